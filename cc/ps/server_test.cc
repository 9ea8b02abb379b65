// A server against lying and careless peers: every field of a push is checked against the key's plan and
// the connection's proven rank; nothing a worker connection sends can stop the server or reach another
// worker's sum. The scheduler is played by the test over the in-memory transport.
#include "cc/ps/server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>

#include "cc/ps/inbox_testing.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

using testing::Inbox;

const uint64_t kKey = 42 << 20;
const uint64_t kWeightsKey = kKey + 1;  // planned in asynchronous servers only
const char kToken0[] = "token-of-worker-0-token-of-worker-0";
const char kToken1[] = "token-of-worker-1-token-of-worker-1";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    network_ = std::make_shared<InMemoryNetwork>();
    scheduler_ = CreateInMemoryTransport(network_);
    scheduler_->SetHandler(&scheduler_inbox_);
    ASSERT_TRUE(scheduler_->Listen("scheduler", 1).ok());
    Config config;
    config.role = Role::kServer;
    config.root_uri = "scheduler";
    config.root_port = 1;
    config.node_host = "server";
    config.num_worker = 2;
    config.num_server = 1;
    config.timeout_s = timeout_s_;
    if (elastic_) {
      config.min_workers = 1;
      config.max_workers = 2;
    }
    config.shared_memory = shared_memory_;
    config.async = async_;
    config.staleness = staleness_;
    server_transport_ = CreateInMemoryTransport(network_);
    server_ = std::make_unique<Server>(config, server_transport_.get());
    server_thread_ = std::thread([this] { result_ = server_->Run(); });

    auto registered = scheduler_inbox_.Next(MessageType::kRegister);
    ASSERT_TRUE(registered);
    to_server_ = registered->first;
    server_address_ = RegisterBody::Decode(registered->second.text).value().address;
    AddressBook book;
    book.num_workers = 2;
    book.worker_tokens = {kToken0, kToken1};
    Message m;
    m.type = MessageType::kAddressBook;
    m.text = book.Encode();
    scheduler_->Send(to_server_, m.Encode(), nullptr, 0, nullptr);
    ASSERT_TRUE(scheduler_inbox_.Next(MessageType::kServerReady));
    std::vector<KeySpec> keys = {KeySpec{kKey, DataType::kFloat32, 4, 2, TensorScope::kProcess}};
    if (async_) {
      keys.push_back(KeySpec{kWeightsKey, DataType::kFloat32, 4, 2, TensorScope::kProcess, ReduceOp::kWeights});
    }
    const Status planned = Plan(keys);
    ASSERT_TRUE(planned.ok()) << planned.ToString();
  }

  // The scheduler plans `keys` with the server: the server's answer.
  Status Plan(const std::vector<KeySpec>& keys) {
    KeyPlanBody plan;
    plan.keys = keys;
    Message key_plan;
    key_plan.type = MessageType::kKeyPlan;
    key_plan.text = plan.Encode();
    scheduler_->Send(to_server_, key_plan.Encode(), nullptr, 0, nullptr);
    auto planned = scheduler_inbox_.Next(MessageType::kKeyPlanReply);
    return planned ? planned->second.status() : DeadlineExceeded("no answer to the key plan");
  }

  void TearDown() override {
    Message bye;
    bye.type = MessageType::kShutdown;
    scheduler_->Send(to_server_, bye.Encode(), nullptr, 0, nullptr);
    server_thread_.join();
    EXPECT_TRUE(result_.ok()) << result_.ToString() << ": the server must end only when the scheduler says";
    for (auto& w : workers_) w->Shutdown(0);
    server_transport_->Shutdown(0);
    scheduler_->Shutdown(0);
  }

  Inbox* NewInbox() { return &inboxes_.emplace_back(); }

  // A worker connection, identified as `rank` with `token` (unless empty).
  PeerId Worker(Inbox* inbox, int rank, const std::string& token, Status* identified = nullptr) {
    workers_.push_back(CreateInMemoryTransport(network_));
    workers_.back()->SetHandler(inbox);
    PeerId peer = workers_.back()->Connect(server_address_, 5, Link::kData).value();
    if (!token.empty()) {
      Message m;
      m.type = MessageType::kIdentify;
      m.sender = rank;
      m.text = token;
      workers_.back()->Send(peer, m.Encode(), nullptr, 0, nullptr);
      auto reply = inbox->Next(MessageType::kIdentifyReply);
      if (identified) *identified = reply ? reply->second.status() : DeadlineExceeded("no reply");
    }
    return peer;
  }

  // Workers 0 and 1, each identified with its token: their inboxes, connections and transports.
  struct TwoWorkers {
    Inbox* inbox0;
    PeerId peer0;
    Transport* worker0;
    Inbox* inbox1;
    PeerId peer1;
    Transport* worker1;
  };
  TwoWorkers IdentifiedWorkers() {
    TwoWorkers w;
    Status identified;
    w.inbox0 = NewInbox();
    w.peer0 = Worker(w.inbox0, 0, kToken0, &identified);
    EXPECT_TRUE(identified.ok()) << identified.ToString();
    w.worker0 = workers_.back().get();
    w.inbox1 = NewInbox();
    w.peer1 = Worker(w.inbox1, 1, kToken1, &identified);
    EXPECT_TRUE(identified.ok()) << identified.ToString();
    w.worker1 = workers_.back().get();
    return w;
  }

  static Message Push(int sender, uint64_t elements, uint32_t round = 1) {
    Message m;
    m.type = MessageType::kPush;
    m.key = kKey;
    m.sender = sender;
    m.participants = 2;
    m.dtype = DataType::kFloat32;
    m.num_elements = elements;
    m.round = round;
    m.request_id = 99;
    return m;
  }

  double timeout_s_ = 20;  // BYTEPS_TIMEOUT
  bool shared_memory_ = false;  // BYTEPS_SHARED_MEMORY
  bool elastic_ = false;
  bool async_ = false;   // BYTEPS_ENABLE_ASYNC
  int staleness_ = -1;   // BYTEPS_STALENESS
  std::shared_ptr<InMemoryNetwork> network_;
  std::unique_ptr<Transport> scheduler_, server_transport_;
  std::deque<Inbox> inboxes_;  // outlive the worker transports that deliver to them (shut down in TearDown)
  std::vector<std::unique_ptr<Transport>> workers_;
  Inbox scheduler_inbox_;
  std::unique_ptr<Server> server_;
  std::thread server_thread_;
  Status result_;
  PeerId to_server_ = -1;
  std::string server_address_;
};

TEST_F(ServerTest, AWrongTokenIsNotAWorker) {
  Inbox* inbox = NewInbox();
  Status identified;
  Worker(inbox, 1, "a guessed token, of the right length", &identified);
  EXPECT_EQ(identified.code(), Code::kUnauthenticated) << identified.ToString();
}

TEST_F(ServerTest, ARankSpeaksThroughOneConnectionOnly) {
  Inbox* first = NewInbox();
  Inbox* second = NewInbox();
  Status identified;
  Worker(first, 1, kToken1, &identified);
  ASSERT_TRUE(identified.ok()) << identified.ToString();
  Worker(second, 1, kToken1, &identified);
  EXPECT_FALSE(identified.ok());
}

TEST_F(ServerTest, PushesFromAnUnidentifiedConnectionGetNoAnswer) {
  Inbox* inbox = NewInbox();
  PeerId peer = Worker(inbox, 1, "");
  float data[4] = {1e6, 1e6, 1e6, 1e6};
  workers_.back()->Send(peer, Push(1, 4).Encode(), data, sizeof(data), nullptr);
  EXPECT_FALSE(inbox->Next(MessageType::kPullReply, 1)) << "an error reply would tell a stranger the round";
}

TEST_F(ServerTest, APushForAnotherRankIsRefused) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  ASSERT_TRUE(identified.ok());
  float data[4] = {1e6, 1e6, 1e6, 1e6};
  workers_.back()->Send(peer, Push(1, 4).Encode(), data, sizeof(data), nullptr);  // claims to be worker 1
  auto reply = inbox->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kInvalidArgument) << reply->second.status().ToString();
}

TEST_F(ServerTest, HugeOrWrappingElementCountsAreErrorsNotCrashes) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  ASSERT_TRUE(identified.ok());
  for (uint64_t elements : {uint64_t(1) << 40, (uint64_t(1) << 62) + 1, uint64_t(0), ~uint64_t(0)}) {
    workers_.back()->Send(peer, Push(0, elements).Encode(), nullptr, 0, nullptr);
    auto reply = inbox->Next(MessageType::kPullReply);
    ASSERT_TRUE(reply) << elements;
    EXPECT_FALSE(reply->second.status().ok()) << elements;
  }
}

TEST_F(ServerTest, UnplannedKeysAndWrongDtypesAreRefused) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  ASSERT_TRUE(identified.ok());
  Message unplanned = Push(0, 4);
  unplanned.key = kKey + 1;
  Message wrong_dtype = Push(0, 4);
  wrong_dtype.dtype = DataType::kInt64;
  Message wrong_participants = Push(0, 4);
  wrong_participants.participants = 1;
  for (const Message& m : {unplanned, wrong_dtype, wrong_participants}) {
    workers_.back()->Send(peer, m.Encode(), nullptr, 0, nullptr);
    auto reply = inbox->Next(MessageType::kPullReply);
    ASSERT_TRUE(reply);
    EXPECT_FALSE(reply->second.status().ok());
  }
}

TEST_F(ServerTest, SchedulerMessagesFromAWorkerAreIgnored) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  for (MessageType type : {MessageType::kAbort, MessageType::kShutdown, MessageType::kReset, MessageType::kKeyPlan}) {
    Message m;
    m.type = type;
    m.set_status(Aborted("a worker pretending to be the scheduler"));
    workers_.back()->Send(peer, m.Encode(), nullptr, 0, nullptr);
  }
  // Still serving: two identified workers complete a round.
  Inbox* other = NewInbox();
  PeerId other_peer = Worker(other, 1, kToken1, &identified);
  ASSERT_TRUE(identified.ok());
  float mine[4] = {1, 2, 3, 4}, theirs[4] = {10, 20, 30, 40};
  workers_[0]->Send(peer, Push(0, 4).Encode(), mine, sizeof(mine), nullptr);
  workers_[1]->Send(other_peer, Push(1, 4).Encode(), theirs, sizeof(theirs), nullptr);
  auto reply = inbox->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->second.status().ok()) << reply->second.status().ToString();
}

TEST_F(ServerTest, FusedPushesAreSummedPerKeyAndAnsweredTogetherInOneReply) {
  const uint64_t kOtherKey = 43 << 20;
  ASSERT_TRUE(Plan({KeySpec{kOtherKey, DataType::kInt32, 3, 2, TensorScope::kProcess}}).ok());
  const auto [inbox0, peer0, worker0, inbox1, peer1, worker1] = IdentifiedWorkers();
  ASSERT_FALSE(HasFailure());

  // Worker 0: both keys and a key no tensor has, in one PUSH_MANY.
  Message ints = Push(0, 3);
  ints.key = kOtherKey;
  ints.dtype = DataType::kInt32;
  ints.request_id = 100;
  Message unplanned = Push(0, 2);
  unplanned.key = 44 << 20;
  unplanned.request_id = 101;
  Message floats = Push(0, 4);
  floats.request_id = 102;
  FusedBody body;
  body.members = {{ints, 12}, {unplanned, 8}, {floats, 16}};
  std::string payload;
  const int32_t my_ints[3] = {1, -2, 3};
  const float nothing[2] = {0, 0}, my_floats[4] = {1, 2, 3, 4};
  payload.append(reinterpret_cast<const char*>(my_ints), 12);
  payload.append(reinterpret_cast<const char*>(nothing), 8);
  payload.append(reinterpret_cast<const char*>(my_floats), 16);
  Message many;
  many.type = MessageType::kPushMany;
  many.text = body.Encode();
  worker0->Send(peer0, many.Encode(), payload.data(), payload.size(), nullptr);
  // Worker 1: the float key as a PUSH, the int key as a PUSH_MANY of one.
  const float their_floats[4] = {10, 20, 30, 40};
  worker1->Send(peer1, Push(1, 4).Encode(), their_floats, sizeof(their_floats), nullptr);
  EXPECT_FALSE(inbox0->Next(MessageType::kPullReplyMany, 0.2)) << "answered before the int key's round completed";
  Message their_ints = ints;
  their_ints.sender = 1;
  FusedBody one;
  one.members = {{their_ints, 12}};
  const int32_t theirs[3] = {10, 20, 30};
  many.text = one.Encode();
  worker1->Send(peer1, many.Encode(), theirs, sizeof(theirs), nullptr);

  auto reply = inbox0->Next(MessageType::kPullReplyMany);
  ASSERT_TRUE(reply);
  auto answers = FusedBody::Decode(reply->second.text, MessageType::kPullReply);
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  const auto& members = answers.value().members;
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].header.request_id, 100u);
  EXPECT_TRUE(members[0].header.status().ok()) << members[0].header.status().ToString();
  EXPECT_EQ(members[0].payload_bytes, 12u);
  EXPECT_EQ(members[1].header.request_id, 101u);
  EXPECT_EQ(members[1].header.status().code(), Code::kFailedPrecondition) << "a key no tensor has";
  EXPECT_EQ(members[1].payload_bytes, 0u);
  EXPECT_EQ(members[2].header.request_id, 102u);
  EXPECT_TRUE(members[2].header.status().ok());
  std::vector<char> sums = inbox0->LastPayload();
  ASSERT_EQ(sums.size(), 12u + 16u);
  int32_t int_sum[3];
  float float_sum[4];
  std::memcpy(int_sum, sums.data(), 12);
  std::memcpy(float_sum, sums.data() + 12, 16);
  EXPECT_EQ(std::vector<int32_t>(int_sum, int_sum + 3), (std::vector<int32_t>{11, 18, 33}));
  EXPECT_EQ(std::vector<float>(float_sum, float_sum + 4), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_FALSE(inbox0->Next(MessageType::kPullReply, 0.1)) << "fused pushes are answered only together";
  // Worker 1's PUSH got a PULL_REPLY, its PUSH_MANY a PULL_REPLY_MANY.
  ASSERT_TRUE(inbox1->Next(MessageType::kPullReply));
  ASSERT_TRUE(inbox1->Next(MessageType::kPullReplyMany));
}

TEST_F(ServerTest, AFusedPushWhosePayloadDoesNotAddUpIsNotReceived) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  ASSERT_TRUE(identified.ok());
  FusedBody body;
  body.members = {{Push(0, 4), 16}};
  Message many;
  many.type = MessageType::kPushMany;
  many.text = body.Encode();
  const float short_payload[2] = {1, 2};
  workers_.back()->Send(peer, many.Encode(), short_payload, sizeof(short_payload), nullptr);
  auto reply = inbox->Next(MessageType::kPullReplyMany);
  ASSERT_TRUE(reply);
  auto answers = FusedBody::Decode(reply->second.text, MessageType::kPullReply);
  ASSERT_TRUE(answers.ok());
  EXPECT_EQ(answers.value().members[0].header.status().code(), Code::kInvalidArgument);
}

TEST_F(ServerTest, AWorkerThatFinishedFailsTheRoundsWaitingOnItAtOnce) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  ASSERT_TRUE(identified.ok());
  float mine[4] = {1, 2, 3, 4};
  workers_.back()->Send(peer, Push(0, 4).Encode(), mine, sizeof(mine), nullptr);
  Message finished;
  finished.type = MessageType::kWorkerFinished;
  finished.sender = 1;
  scheduler_->Send(to_server_, finished.Encode(), nullptr, 0, nullptr);
  auto reply = inbox->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(reply->second.status().message().find("worker(s) 1 finished"), std::string::npos)
      << reply->second.status().message();
}

// A transport writes a payload between asking where it goes and handing the message over, and the
// generation may end meanwhile (a worker that lies pushes after saying it finished): the buffer it writes
// stays the server's until the message is handled, and the push is refused.
class LatePayloadServerTest : public ServerTest {
 protected:
  // Worker 0's push is told where its payload goes; the generation ends (the scheduler's reset) and, with
  // `replan`, the next one plans the key again; then the payload is written and the message handed over, as
  // a transport does. Returns the reply worker 0 gets. (The in-memory transport numbers the server's links
  // in order: its scheduler's is 0, the first worker's 1.)
  std::optional<std::pair<PeerId, Message>> LatePayloadReply(bool replan) {
    Inbox* inbox = NewInbox();
    Status identified;
    Worker(inbox, 0, kToken0, &identified);
    EXPECT_TRUE(identified.ok());
    const PeerId worker_at_server = 1;
    const std::string header = Push(0, 4).Encode();
    void* destination = server_->PayloadDestination(worker_at_server, header, 4 * sizeof(float));
    EXPECT_NE(destination, nullptr);
    if (destination == nullptr) return std::nullopt;
    Message reset;
    reset.type = MessageType::kReset;
    scheduler_->Send(to_server_, reset.Encode(), nullptr, 0, nullptr);
    EXPECT_TRUE(scheduler_inbox_.Next(MessageType::kResetReply));
    if (replan) EXPECT_TRUE(Plan({KeySpec{kKey, DataType::kFloat32, 4, 2, TensorScope::kProcess}}).ok());
    const float late[4] = {1, 2, 3, 4};
    std::memcpy(destination, late, sizeof(late));  // the key is gone from the server's table, not its memory
    server_->OnMessage(worker_at_server, header, destination, sizeof(late));
    return inbox->Next(MessageType::kPullReply);
  }
};

TEST_F(LatePayloadServerTest, APayloadArrivingAcrossTheGenerationsEndLandsInMemoryTheServerStillHolds) {
  auto reply = LatePayloadReply(/*replan=*/false);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kFailedPrecondition) << reply->second.status().ToString();
}

// The next generation planned the key again (the connection still speaks for its worker): the payload went
// to the old key's buffer, so the new key must not sum what its own buffer holds in its place.
TEST_F(LatePayloadServerTest, APayloadReceivedForTheKeyOfAnEndedGenerationIsNotSummedByItsSuccessor) {
  auto reply = LatePayloadReply(/*replan=*/true);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kAborted) << reply->second.status().ToString();
}


class ShortTimeoutServerTest : public ServerTest {
 protected:
  ShortTimeoutServerTest() { timeout_s_ = 1; }
};

// A worker that pushes a tensor fewer times than the others (its code took another path) keeps them waiting
// for the round no longer than BYTEPS_TIMEOUT, and they learn who is missing and what to do.
TEST_F(ShortTimeoutServerTest, ARoundAWorkerNeverPushesFailsWithinTheTimeoutNamingIt) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  ASSERT_TRUE(identified.ok());
  const auto started = std::chrono::steady_clock::now();
  float mine[4] = {1, 2, 3, 4};
  workers_.back()->Send(peer, Push(0, 4).Encode(), mine, sizeof(mine), nullptr);
  auto reply = inbox->Next(MessageType::kPullReply, 10);
  ASSERT_TRUE(reply);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 3.0);
  EXPECT_EQ(reply->second.status().code(), Code::kDeadlineExceeded);
  const std::string message = reply->second.status().message();
  EXPECT_NE(message.find("worker(s) 1 did not push round 1 within BYTEPS_TIMEOUT=1 s"), std::string::npos) << message;
  EXPECT_NE(message.find("every worker must push_pull the same tensors"), std::string::npos) << message;
}

class ElasticShortTimeoutServerTest : public ServerTest {
 protected:
  ElasticShortTimeoutServerTest() {
    timeout_s_ = 1;
    elastic_ = true;
  }
};

// In an elastic job a worker that stops pushing has usually frozen: its connections are found dead after
// BYTEPS_TIMEOUT of silence and the job goes on without it. The round waits a margin longer, so that the loss,
// not a missing push (an error), is what the others learn.
TEST_F(ElasticShortTimeoutServerTest, ARoundAWorkerNeverPushesWaitsAMarginLongerThanTheTimeout) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  ASSERT_TRUE(identified.ok());
  const auto started = std::chrono::steady_clock::now();
  float mine[4] = {1, 2, 3, 4};
  workers_.back()->Send(peer, Push(0, 4).Encode(), mine, sizeof(mine), nullptr);
  auto reply = inbox->Next(MessageType::kPullReply, 10);
  ASSERT_TRUE(reply);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(waited, 2.9) << "BYTEPS_TIMEOUT=1 s and a margin of 2 s";
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(reply->second.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(reply->second.status().message().find("worker(s) 1 did not push round 1"), std::string::npos)
      << reply->second.status().message();
}

// A compressed key: pushes are encodings (cc/compress/codec.h), checked before anything is summed.
class CompressedKeyTest : public ServerTest {
 protected:
  static constexpr uint64_t kCompressedKey = kKey + 1000;

  Status PlanKey(DataType dtype, const std::string& compression) {
    KeySpec spec{kCompressedKey, dtype, 4, 2, TensorScope::kProcess};
    spec.compression = CompressionSpec::Parse(compression).value();
    return Plan({spec});
  }

  static Message CompressedPush(int sender) {
    Message m = Push(sender, 4);
    m.key = kCompressedKey;
    return m;
  }
};

struct Record {
  uint32_t index;
  float value;
};

TEST_F(CompressedKeyTest, CompressionOfWhatIsNoFloatSumIsRefusedAtPlanning) {
  EXPECT_FALSE(PlanKey(DataType::kInt64, "topk:0.5").ok());
}

TEST_F(CompressedKeyTest, LyingPayloadsAreRefusedAndTheSumStaysIntact) {
  ASSERT_TRUE(PlanKey(DataType::kFloat32, "topk:0.5,ef=0").ok());  // 2 of 4 elements: 16 bytes
  const auto [inbox0, peer0, worker0, inbox1, peer1, worker1] = IdentifiedWorkers();
  ASSERT_FALSE(HasFailure());

  Record out_of_range[2] = {{1, 5.f}, {4, 1e30f}};  // element 4 of a 4-element key
  worker0->Send(peer0, CompressedPush(0).Encode(), out_of_range, sizeof(out_of_range), nullptr);
  auto refused = inbox0->Next(MessageType::kPullReply);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->second.status().code(), Code::kInvalidArgument) << refused->second.status().ToString();
  Record too_short[1] = {{0, 1.f}};
  worker0->Send(peer0, CompressedPush(0).Encode(), too_short, sizeof(too_short), nullptr);
  refused = inbox0->Next(MessageType::kPullReply);
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->second.status().ok());

  // The refused pushes left nothing behind: the round sums the two honest pushes only.
  Record push0[2] = {{0, 1.f}, {2, 4.f}};
  Record push1[2] = {{2, 3.f}, {3, -0.5f}};
  worker0->Send(peer0, CompressedPush(0).Encode(), push0, sizeof(push0), nullptr);
  worker1->Send(peer1, CompressedPush(1).Encode(), push1, sizeof(push1), nullptr);
  for (Inbox* inbox : {inbox0, inbox1}) {
    auto reply = inbox->Next(MessageType::kPullReply);
    ASSERT_TRUE(reply);
    ASSERT_TRUE(reply->second.status().ok()) << reply->second.status().ToString();
  }
  // (The encoded sum's bytes land in the inbox's buffers; the engine tests check their decoding.)
}

TEST_F(CompressedKeyTest, TheResidualMovesWholeAndBetweenRoundsOnly) {
  ASSERT_TRUE(PlanKey(DataType::kFloat32, "topk:0.5").ok());  // with error feedback
  Inbox* inbox0 = NewInbox();
  Inbox* inbox1 = NewInbox();
  Status identified;
  PeerId peer0 = Worker(inbox0, 0, kToken0, &identified);
  Transport* worker0 = workers_.back().get();
  PeerId peer1 = Worker(inbox1, 1, kToken1, &identified);
  Transport* worker1 = workers_.back().get();
  Message load = CompressedPush(0);
  load.type = MessageType::kLoadResidual;
  Message save = CompressedPush(0);
  save.type = MessageType::kSaveResidual;
  auto answer = [&](Inbox* inbox) {
    auto reply = inbox->Next(MessageType::kPullReply);
    return reply ? reply->second.status() : DeadlineExceeded("no reply");
  };

  float residual[4] = {1.f, -2.f, 3.f, 0.5f};
  worker0->Send(peer0, load.Encode(), residual, 3 * sizeof(float), nullptr);
  EXPECT_EQ(answer(inbox0).code(), Code::kInvalidArgument) << "three of four floats";
  worker0->Send(peer0, load.Encode(), residual, sizeof(residual), nullptr);
  ASSERT_TRUE(answer(inbox0).ok());
  worker0->Send(peer0, save.Encode(), nullptr, 0, nullptr);
  ASSERT_TRUE(answer(inbox0).ok());
  std::vector<char> saved = inbox0->LastPayload();
  ASSERT_EQ(saved.size(), sizeof(residual));
  EXPECT_EQ(std::memcmp(saved.data(), residual, sizeof(residual)), 0);

  // Once worker 0 pushed a round, its residual stays until the round completes.
  Record push0[2] = {{0, 10.f}, {1, 1.f}};
  Record push1[2] = {{2, 1.f}, {3, 1.f}};
  worker0->Send(peer0, CompressedPush(0).Encode(), push0, sizeof(push0), nullptr);
  worker0->Send(peer0, load.Encode(), residual, sizeof(residual), nullptr);
  Status refused = answer(inbox0);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition) << refused.ToString();
  // The loaded residual joins the sum: {11, -1, 4, 1.5}, whose top two are elements 0 and 2.
  worker1->Send(peer1, CompressedPush(1).Encode(), push1, sizeof(push1), nullptr);
  ASSERT_TRUE(answer(inbox0).ok());
  ASSERT_TRUE(answer(inbox1).ok());
  std::vector<char> sum = inbox1->LastPayload();
  ASSERT_EQ(sum.size(), sizeof(push0));
  Record top[2];
  std::memcpy(top, sum.data(), sizeof(top));
  EXPECT_EQ(top[0].index, 0u);
  EXPECT_EQ(top[0].value, 11.f);
  EXPECT_EQ(top[1].index, 2u);
  EXPECT_EQ(top[1].value, 4.f);
}

TEST_F(ServerTest, AKeyWithoutErrorFeedbackHasNoResidual) {
  Inbox* inbox = NewInbox();
  Status identified;
  PeerId peer = Worker(inbox, 0, kToken0, &identified);
  Message save = Push(0, 4);
  save.type = MessageType::kSaveResidual;
  workers_.back()->Send(peer, save.Encode(), nullptr, 0, nullptr);
  auto reply = inbox->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kInvalidArgument) << reply->second.status().ToString();
}

TEST_F(ServerTest, AWeightsKeyIsRefusedByAServerNotStartedForAsynchronousTraining) {
  const Status planned = Plan({KeySpec{kKey + 7, DataType::kFloat32, 4, 2, TensorScope::kProcess, ReduceOp::kWeights}});
  EXPECT_NE(planned.message().find("without BYTEPS_ENABLE_ASYNC or BYTEPS_STALENESS"), std::string::npos)
      << planned.ToString();
}

// The server of an asynchronous job with BYTEPS_STALENESS=0: weights keys keep the weights, other keys sum.
class AsyncServerTest : public ServerTest {
 protected:
  AsyncServerTest() {
    async_ = true;
    staleness_ = 0;
  }
  static Message WeightsPush(int sender, uint32_t round) {
    Message m = Push(sender, 4, round);
    m.key = kWeightsKey;
    return m;
  }
  static std::vector<float> Floats(const std::vector<char>& bytes) {
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

TEST_F(AsyncServerTest, InitialPushesThenChangesHeldForTheSlowest) {
  TwoWorkers w = IdentifiedWorkers();
  float initial[4] = {1, 2, 3, 4}, other[4] = {9, 9, 9, 9};
  w.worker0->Send(w.peer0, WeightsPush(0, 1).Encode(), initial, sizeof(initial), nullptr);
  auto reply = w.inbox0->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply && reply->second.status().ok()) << (reply ? reply->second.status().ToString() : "none");
  EXPECT_EQ(Floats(w.inbox0->LastPayload()), (std::vector<float>{1, 2, 3, 4}));
  w.worker1->Send(w.peer1, WeightsPush(1, 1).Encode(), other, sizeof(other), nullptr);
  ASSERT_TRUE(w.inbox1->Next(MessageType::kPullReply));
  EXPECT_EQ(Floats(w.inbox1->LastPayload()), (std::vector<float>{1, 2, 3, 4})) << "the first initial push wins";

  float change0[4] = {1, 1, 1, 1}, change1[4] = {2, 2, 2, 2};
  w.worker0->Send(w.peer0, WeightsPush(0, 2).Encode(), change0, sizeof(change0), nullptr);
  EXPECT_FALSE(w.inbox0->Next(MessageType::kPullReply, 0.5)) << "a step ahead of worker 1: held";
  w.worker1->Send(w.peer1, WeightsPush(1, 2).Encode(), change1, sizeof(change1), nullptr);
  ASSERT_TRUE(w.inbox1->Next(MessageType::kPullReply));
  ASSERT_TRUE(w.inbox0->Next(MessageType::kPullReply));
  EXPECT_EQ(Floats(w.inbox0->LastPayload()), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(Floats(w.inbox1->LastPayload()), (std::vector<float>{4, 5, 6, 7}));

  // A plain key of the same job still sums round by round.
  float a[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2};
  w.worker0->Send(w.peer0, Push(0, 4).Encode(), a, sizeof(a), nullptr);
  w.worker1->Send(w.peer1, Push(1, 4).Encode(), b, sizeof(b), nullptr);
  ASSERT_TRUE(w.inbox0->Next(MessageType::kPullReply));
  EXPECT_EQ(Floats(w.inbox0->LastPayload()), (std::vector<float>{3, 3, 3, 3}));
}

// Pushes in place: the server reads and writes a worker's heap (a SharedArena of this process stands for
// it), and checks what a push names there.
class InPlaceServerTest : public ServerTest {
 protected:
  InPlaceServerTest() { shared_memory_ = true; }
  void SetUp() override {
    ServerTest::SetUp();
    auto heap = SharedArena::Create(size_t(1) << 24, "test_heap");
    ASSERT_TRUE(heap.ok());
    heap_ = std::move(heap.value());
  }
  float* Floats4() { return reinterpret_cast<float*>(heap_->Allocate(4 * sizeof(float))->data); }
  Message InPlace(int sender, const float* in, const float* out, uint32_t round = 1) {
    Message m = Push(sender, 4, round);
    m.share = ShareMode::kInPlace;
    m.in_place_input = heap_->OffsetOf(in, 16).value_or(Message::kNoOffset);
    m.in_place_output = heap_->OffsetOf(out, 16).value_or(Message::kNoOffset);
    m.text = heap_->locator();
    return m;
  }
  std::unique_ptr<SharedArena> heap_;
};

TEST_F(InPlaceServerTest, TheSumIsWrittenWhereEachWorkerSaid) {
  TwoWorkers w = IdentifiedWorkers();
  float *in0 = Floats4(), *in1 = Floats4(), *out1 = Floats4();
  for (int i = 0; i < 4; ++i) {
    in0[i] = static_cast<float>(i);
    in1[i] = 10.f * static_cast<float>(i);
    out1[i] = -1;
  }
  w.worker0->Send(w.peer0, InPlace(0, in0, in0).Encode(), nullptr, 0, nullptr);  // output = input
  w.worker1->Send(w.peer1, InPlace(1, in1, out1).Encode(), nullptr, 0, nullptr);
  for (Inbox* inbox : {w.inbox0, w.inbox1}) {
    auto reply = inbox->Next(MessageType::kPullReply);
    ASSERT_TRUE(reply && reply->second.status().ok()) << (reply ? reply->second.status().ToString() : "none");
    EXPECT_TRUE(reply->second.written);
    EXPECT_TRUE(reply->second.heap_mapped);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(in0[i], 11.f * static_cast<float>(i));
    EXPECT_EQ(out1[i], 11.f * static_cast<float>(i));
    EXPECT_EQ(in1[i], 10.f * static_cast<float>(i));
  }
}

TEST_F(InPlaceServerTest, OffsetsOutsideTheHeapOrAHeapThatCannotBeMappedAreRefused) {
  TwoWorkers w = IdentifiedWorkers();
  float* in = Floats4();
  Message outside = InPlace(0, in, in);
  outside.in_place_output = (size_t(1) << 24) - 8;  // runs past the heap's end
  w.worker0->Send(w.peer0, outside.Encode(), nullptr, 0, nullptr);
  auto reply = w.inbox0->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kInvalidArgument) << reply->second.status().ToString();

  Message unmappable = InPlace(1, in, in);
  unmappable.text = "1 3 12345";  // pid 1's fd 3 is no heap of this job
  w.worker1->Send(w.peer1, unmappable.Encode(), nullptr, 0, nullptr);
  reply = w.inbox1->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kUnavailable) << reply->second.status().ToString();

  Message zeros = InPlace(0, in, in);
  zeros.zeros = true;
  w.worker0->Send(w.peer0, zeros.Encode(), nullptr, 0, nullptr);
  reply = w.inbox0->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->second.status().code(), Code::kInvalidArgument) << reply->second.status().ToString();

  // None of it counted: a round of copied pushes completes, and a push naming a heap it cannot map is
  // told so.
  float a[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2};
  Message offer = Push(0, 4);
  offer.share = ShareMode::kOffer;
  offer.text = "1 3 12345";
  w.worker0->Send(w.peer0, offer.Encode(), a, sizeof(a), nullptr);
  w.worker1->Send(w.peer1, Push(1, 4).Encode(), b, sizeof(b), nullptr);
  reply = w.inbox0->Next(MessageType::kPullReply);
  ASSERT_TRUE(reply && reply->second.status().ok()) << (reply ? reply->second.status().ToString() : "none");
  EXPECT_FALSE(reply->second.heap_mapped);
  ASSERT_TRUE(w.inbox1->Next(MessageType::kPullReply));
}

}  // namespace
}  // namespace bps
