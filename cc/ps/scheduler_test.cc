// The scheduler's protocol, with the test playing every server and worker over the in-memory transport:
// registration and the start of the job, declarations, generations, timeouts and the fan-out of an abort.
#include "cc/ps/scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <future>

#include "cc/ps/inbox_testing.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace {

using testing::Inbox;

bool Contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// A process of the job, played by the test.
struct Node {
  Inbox inbox;  // outlives the transport that delivers to it
  std::unique_ptr<Transport> transport;
  PeerId scheduler = -1;
  std::string address;

  void Send(const Message& m) { transport->Send(scheduler, m.Encode(), nullptr, 0, nullptr); }
  void Send(MessageType type, const std::string& text = "", uint64_t request_id = 0) {
    Message m;
    m.type = type;
    m.text = text;
    m.request_id = request_id;
    Send(m);
  }
  // The address book the scheduler sent this node (or its refusal).
  StatusOr<AddressBook> Book(double seconds = 5) {
    auto m = inbox.Next(MessageType::kAddressBook, seconds);
    if (!m) return DeadlineExceeded("no address book");
    if (!m->second.status().ok()) return m->second.status();
    return AddressBook::Decode(m->second.text);
  }
  // The status of the next message of `type`, or DEADLINE_EXCEEDED if none came.
  Status Outcome(MessageType type, double seconds = 5) {
    auto m = inbox.Next(type, seconds);
    return m ? m->second.status() : DeadlineExceeded(std::string("no ") + MessageTypeName(type));
  }
  bool Gets(MessageType type, double seconds = 5) { return inbox.Next(type, seconds).has_value(); }
};

class SchedulerTest : public ::testing::Test {
 protected:
  // A job of two worker machines of one process each and one server.
  // elastic: workers 1..3 (min_workers, max_workers), BYTEPS_ELASTIC_TIMEOUT `elastic_timeout_s`.
  void StartScheduler(double timeout_s = 20, ElasticLimits elastic = {}, double elastic_timeout_s = 600) {
    config_.min_workers = elastic.min_workers;
    config_.max_workers = elastic.max_workers;
    config_.elastic_timeout_s = elastic_timeout_s;
    config_.role = Role::kScheduler;
    config_.root_uri = "scheduler";
    config_.root_port = 1;
    config_.num_worker = 2;
    config_.num_server = 1;
    config_.partition_bytes = 4096;
    config_.slice_bytes = 1024;
    config_.timeout_s = timeout_s;
    scheduler_transport_ = CreateInMemoryTransport(network_);
    scheduler_ = std::make_unique<Scheduler>(config_, scheduler_transport_.get());
    result_ = std::async(std::launch::async, [this] { return scheduler_->Run(); });
  }

  void TearDown() override {
    // Nodes that go away end a job that has not ended: a lost server aborts it.
    for (Node& node : nodes_) node.transport->Shutdown(0);
    if (result_.valid()) {
      EXPECT_EQ(result_.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "the scheduler hangs";
    }
    if (scheduler_transport_) scheduler_transport_->Shutdown(0);
  }

  Node& Connect(const std::string& address) {
    Node& node = nodes_.emplace_back();
    node.address = address;
    node.transport = CreateInMemoryTransport(network_);
    node.transport->SetHandler(&node.inbox);
    node.scheduler = node.transport->Connect("scheduler:1", 5, Link::kControl).value();
    return node;
  }

  Node& Register(Role role, int worker_id, const std::string& address, int num_worker = 2) {
    Node& node = Connect(address);
    RegisterBody b;
    b.role = static_cast<int32_t>(role);
    b.worker_id = worker_id;
    b.num_worker = num_worker;
    b.num_server = 1;
    b.min_workers = config_.min_workers;
    b.max_workers = config_.max_workers;
    b.address = address;
    node.Send(MessageType::kRegister, b.Encode());
    return node;
  }

  // Server and workers registered, the job started; the server shares a host with worker 0.
  void StartJob() {
    server_ = &Register(Role::kServer, 0, "hosta:1");
    worker_[1] = &Register(Role::kWorker, 1, "hostb:2");
    worker_[0] = &Register(Role::kWorker, 0, "hosta:3");
    auto book = server_->Book();
    ASSERT_TRUE(book.ok()) << book.status().ToString();
    server_book_ = book.value();
    server_->Send(MessageType::kServerReady);
    for (int w = 0; w < 2; ++w) {
      auto worker_book = worker_[w]->Book();
      ASSERT_TRUE(worker_book.ok()) << worker_book.status().ToString();
      worker_book_[w] = worker_book.value();
    }
  }

  // Worker `w` declares `spec` (request id 10 + w).
  void Declare(int w, const TensorSpec& spec) { worker_[w]->Send(MessageType::kDeclare, spec.Encode(), 10 + w); }

  // The server confirms the next key plan.
  void ConfirmKeyPlan() {
    auto plan = server_->inbox.Next(MessageType::kKeyPlan);
    ASSERT_TRUE(plan);
    Message reply;
    reply.type = MessageType::kKeyPlanReply;
    reply.request_id = plan->second.request_id;
    server_->Send(reply);
  }

  Status Result(double seconds = 10) {
    if (result_.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
      return DeadlineExceeded("the scheduler is still running");
    }
    return result_.get();
  }

  static TensorSpec Spec(std::vector<int64_t> shape) {
    TensorSpec spec;
    spec.name = "grad";
    spec.shape = std::move(shape);
    return spec;
  }

  std::shared_ptr<InMemoryNetwork> network_ = std::make_shared<InMemoryNetwork>();
  Config config_;
  std::unique_ptr<Transport> scheduler_transport_;
  std::unique_ptr<Scheduler> scheduler_;
  std::future<Status> result_;
  std::deque<Node> nodes_;
  Node* server_ = nullptr;
  Node* worker_[2] = {nullptr, nullptr};
  AddressBook server_book_, worker_book_[2];
};

TEST_F(SchedulerTest, ServersLearnTheJobFirstThenEachWorkerItsRankAndToken) {
  StartScheduler();
  server_ = &Register(Role::kServer, 0, "hosta:1");
  worker_[1] = &Register(Role::kWorker, 1, "hostb:2");
  EXPECT_FALSE(server_->Gets(MessageType::kAddressBook, 0.3)) << "worker 0 has not registered";
  worker_[0] = &Register(Role::kWorker, 0, "hosta:3");
  auto book = server_->Book();
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  EXPECT_EQ(book.value().your_rank, 0);
  EXPECT_EQ(book.value().num_workers, 2);
  EXPECT_EQ(book.value().servers, std::vector<std::string>{"hosta:1"});
  EXPECT_EQ(book.value().workers_on_your_host, 1);
  EXPECT_EQ(book.value().slice_bytes, 1024u) << "nodes on several hosts slice partitions";
  ASSERT_EQ(book.value().worker_tokens.size(), 2u);
  EXPECT_FALSE(worker_[0]->Gets(MessageType::kAddressBook, 0.3)) << "a worker may push once every server is ready";

  server_->Send(MessageType::kServerReady);
  for (int w = 0; w < 2; ++w) {
    auto worker_book = worker_[w]->Book();
    ASSERT_TRUE(worker_book.ok()) << worker_book.status().ToString();
    EXPECT_EQ(worker_book.value().your_rank, w);
    EXPECT_EQ(worker_book.value().your_token, book.value().worker_tokens[w]);
    EXPECT_TRUE(worker_book.value().worker_tokens.empty()) << "a worker learns no other worker's token";
    EXPECT_EQ(worker_book.value().servers, book.value().servers);
  }
}

TEST_F(SchedulerTest, ASecondWorkerWithATakenIdIsTurnedAwayAndTheJobGoesOn) {
  StartScheduler();
  Register(Role::kWorker, 0, "hosta:3");
  Node& twin = Register(Role::kWorker, 0, "hostc:9");
  Status refused = twin.Book().status();
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Contains(refused, "two workers registered with DMLC_WORKER_ID=0")) << refused.ToString();
  Node& server = Register(Role::kServer, 0, "hosta:1");
  Register(Role::kWorker, 1, "hostb:2");
  EXPECT_TRUE(server.Book().ok()) << "the job starts with the first worker 0";
}

TEST_F(SchedulerTest, ProcessesThatDoNotFitTheJobAreToldWhy) {
  StartScheduler();
  Status foreign = Register(Role::kWorker, 0, "hosta:3", 3).Book().status();
  EXPECT_TRUE(Contains(foreign, "DMLC_NUM_WORKER=3")) << foreign.ToString();
  Status beyond = Register(Role::kWorker, 2, "hosta:4").Book().status();
  EXPECT_TRUE(Contains(beyond, "outside the job's ranges")) << beyond.ToString();
  Status crafted = Register(Role::kWorker, 1, "host a:4").Book().status();
  EXPECT_TRUE(Contains(crafted, "is not host:port")) << crafted.ToString();
  Node& garbage = Connect("hostd:1");
  garbage.Send(MessageType::kRegister, "not a registration");
  EXPECT_FALSE(garbage.Book().ok());
  StartJob();  // with the places still free
}

TEST_F(SchedulerTest, MessagesFromProcessesThatMayNotSendThemAreDropped) {
  StartScheduler();
  Node& stranger = Connect("hoste:1");
  stranger.Send(MessageType::kDeclare, Spec({4}).Encode(), 1);
  stranger.Send(MessageType::kAbortRequest, "stop");
  StartJob();
  server_->Send(MessageType::kDeclare, Spec({4}).Encode(), 1);
  server_->Send(MessageType::kAbortRequest, "stop");
  worker_[0]->Send(MessageType::kResetReply);
  EXPECT_FALSE(stranger.Gets(MessageType::kDeclareReply, 0.3));
  EXPECT_FALSE(server_->Gets(MessageType::kDeclareReply, 0.1));
  EXPECT_FALSE(server_->Gets(MessageType::kAbort, 0.1)) << "only a worker may ask to abort";
  Declare(0, Spec({4}));
  Declare(1, Spec({4}));
  ConfirmKeyPlan();
  EXPECT_TRUE(worker_[0]->Outcome(MessageType::kDeclareReply).ok()) << "the job goes on";
}

TEST_F(SchedulerTest, WorkersGetTheSamePlanOnceTheServerConfirmedTheKeys) {
  StartScheduler();
  StartJob();
  Declare(1, Spec({64}));
  EXPECT_FALSE(server_->Gets(MessageType::kKeyPlan, 0.3)) << "worker 0 has not declared";
  Declare(0, Spec({64}));
  auto plan = server_->inbox.Next(MessageType::kKeyPlan);
  ASSERT_TRUE(plan);
  EXPECT_FALSE(worker_[0]->Gets(MessageType::kDeclareReply, 0.3)) << "the server has not confirmed";
  Message reply;
  reply.type = MessageType::kKeyPlanReply;
  reply.request_id = plan->second.request_id;
  server_->Send(reply);
  std::string plans[2];
  for (int w = 0; w < 2; ++w) {
    auto answer = worker_[w]->inbox.Next(MessageType::kDeclareReply);
    ASSERT_TRUE(answer);
    EXPECT_TRUE(answer->second.status().ok()) << answer->second.status().ToString();
    EXPECT_EQ(answer->second.request_id, 10u + w);
    plans[w] = answer->second.text;
  }
  EXPECT_EQ(plans[0], plans[1]);
}

TEST_F(SchedulerTest, WorkersThatDisagreeAllLearnHow) {
  StartScheduler();
  StartJob();
  Declare(0, Spec({64}));
  Declare(1, Spec({65}));
  for (int w = 0; w < 2; ++w) {
    Status s = worker_[w]->Outcome(MessageType::kDeclareReply);
    EXPECT_TRUE(Contains(s, "worker 0 declared it as float32[64] but worker 1 as float32[65]")) << s.ToString();
  }
}

TEST_F(SchedulerTest, ADeclarationBeforeTheJobStartedIsRefused) {
  StartScheduler();
  worker_[0] = &Register(Role::kWorker, 0, "hosta:3");
  Declare(0, Spec({4}));
  Status s = worker_[0]->Outcome(MessageType::kDeclareReply);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
}

TEST_F(SchedulerTest, AGenerationEndsWhenEveryWorkerFinishedAndTheJobWhenAllLeft) {
  StartScheduler();
  StartJob();
  worker_[0]->Send(MessageType::kFinish);
  auto finished = server_->inbox.Next(MessageType::kWorkerFinished);
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->second.sender, 0);
  EXPECT_FALSE(server_->Gets(MessageType::kReset, 0.3)) << "worker 1 is still working";
  worker_[0]->Send(MessageType::kFinish);  // once is enough
  worker_[1]->Send(MessageType::kFinish, kJoinedMark);
  finished = server_->inbox.Next(MessageType::kWorkerFinished);
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->second.sender, 1);
  EXPECT_EQ(finished->second.text, kJoinedMark);
  ASSERT_TRUE(server_->Gets(MessageType::kReset));
  EXPECT_FALSE(server_->Gets(MessageType::kWorkerFinished, 0.1)) << "worker 0's second finish is no news";
  EXPECT_FALSE(worker_[0]->Gets(MessageType::kGenerationDone, 0.3)) << "the server has not forgotten the keys";
  server_->Send(MessageType::kResetReply);
  for (int w = 0; w < 2; ++w) {
    auto done = worker_[w]->inbox.Next(MessageType::kGenerationDone);
    ASSERT_TRUE(done);
    EXPECT_EQ(done->second.sender, 1) << "worker 1 finished last";
  }

  // The next generation: the same name may now be another tensor.
  Declare(0, Spec({8}));
  Declare(1, Spec({8}));
  ConfirmKeyPlan();
  EXPECT_TRUE(worker_[1]->Outcome(MessageType::kDeclareReply).ok());
  worker_[0]->Send(MessageType::kFinish);
  worker_[1]->Send(MessageType::kFinish);
  ASSERT_TRUE(server_->Gets(MessageType::kReset));
  server_->Send(MessageType::kResetReply);
  ASSERT_TRUE(worker_[0]->Gets(MessageType::kGenerationDone));

  // Idle workers that leave end the job; the server is told to go.
  worker_[0]->transport->Shutdown(0);
  EXPECT_FALSE(server_->Gets(MessageType::kShutdown, 0.3)) << "worker 1 may start another generation";
  worker_[1]->transport->Shutdown(0);
  EXPECT_TRUE(server_->Gets(MessageType::kShutdown));
  EXPECT_TRUE(Result().ok());
}

TEST_F(SchedulerTest, AnIdleWorkerThatLeavesFailsWhatWaitsOnIt) {
  StartScheduler();
  StartJob();
  worker_[0]->Send(MessageType::kFinish);
  worker_[1]->Send(MessageType::kFinish);
  ASSERT_TRUE(server_->Gets(MessageType::kReset));
  server_->Send(MessageType::kResetReply);
  ASSERT_TRUE(worker_[0]->Gets(MessageType::kGenerationDone));
  Declare(0, Spec({8}));  // worker 0 starts generation 2, worker 1 never will
  worker_[1]->transport->Shutdown(0);
  Status s = worker_[0]->Outcome(MessageType::kDeclareReply);
  EXPECT_TRUE(Contains(s, "worker(s) 1 finished")) << s.ToString();
}

TEST_F(SchedulerTest, ADeclarationNobodyCompletesTimesOut) {
  StartScheduler(2);
  StartJob();
  Declare(0, Spec({8}));
  Status s = worker_[0]->Outcome(MessageType::kDeclareReply);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_TRUE(Contains(s, "pushed by worker(s) 0 but not by worker(s) 1 within BYTEPS_TIMEOUT=2 s")) << s.ToString();
}

TEST_F(SchedulerTest, AJobThatNeverStartsAbortsAndSaysWhoCameAndWhoWasTurnedAway) {
  StartScheduler(1);
  Node& server = Register(Role::kServer, 0, "hosta:1");
  Register(Role::kWorker, 0, "hosta:3", 5).Book().status().IgnoreError();  // refused: the turned-away reason
  Status s = Result();
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_TRUE(Contains(s, "only 1 of 1 servers and 0 worker processes registered within BYTEPS_TIMEOUT=1 s"))
      << s.ToString();
  EXPECT_TRUE(Contains(s, "Turned away: worker at hosta:3 has DMLC_NUM_WORKER=5")) << s.ToString();
  EXPECT_EQ(server.Outcome(MessageType::kAbort).code(), Code::kDeadlineExceeded);
}

TEST_F(SchedulerTest, AWorkersFailureReachesEveryNode) {
  StartScheduler();
  StartJob();
  worker_[1]->Send(MessageType::kAbortRequest, "out of memory");
  for (Node* node : {server_, worker_[0], worker_[1]}) {
    Status s = node->Outcome(MessageType::kAbort);
    EXPECT_EQ(s.code(), Code::kAborted);
    EXPECT_TRUE(Contains(s, "worker 1 (hostb:2) failed: out of memory")) << s.ToString();
  }
  EXPECT_EQ(Result().code(), Code::kAborted);
}

TEST_F(SchedulerTest, ALostServerAbortsTheJobAtOnceAndIsNamed) {
  StartScheduler();
  StartJob();
  server_->transport->Shutdown(0);
  for (int w = 0; w < 2; ++w) {
    Status s = worker_[w]->Outcome(MessageType::kAbort, 0.9);
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    EXPECT_TRUE(Contains(s, "server 0 (hosta:1) exited or lost its connection")) << s.ToString();
  }
  EXPECT_EQ(Result().code(), Code::kUnavailable);
}

TEST_F(SchedulerTest, AServerLostSoonAfterAWorkerIsNamedAsTheCause) {
  StartScheduler();
  StartJob();
  worker_[1]->transport->Shutdown(0);  // a worker that was working: the job cannot go on
  EXPECT_FALSE(worker_[0]->Gets(MessageType::kAbort, 0.2)) << "a lost server may explain it";
  server_->transport->Shutdown(0);
  Status s = worker_[0]->Outcome(MessageType::kAbort);
  EXPECT_TRUE(Contains(s, "server 0")) << s.ToString();
}

TEST_F(SchedulerTest, ALostWorkingWorkerAbortsTheJob) {
  StartScheduler();
  StartJob();
  worker_[1]->transport->Shutdown(0);
  Status s = worker_[0]->Outcome(MessageType::kAbort);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(s, "worker 1 (hostb:2) exited or lost its connection")) << s.ToString();
  EXPECT_TRUE(server_->Gets(MessageType::kAbort));
}

// --- Elastic jobs ---

class ElasticSchedulerTest : public SchedulerTest {
 protected:
  // The server forgets the generation and is ready for the next one, whose book it gets first.
  AddressBook ResetAndReady(bool dropped) {
    auto reset = server_->inbox.Next(MessageType::kReset);
    EXPECT_TRUE(reset);
    if (reset) {
      EXPECT_EQ(reset->second.text == kDroppedMark, dropped);
    }
    server_->Send(MessageType::kResetReply);
    auto book = server_->Book();
    EXPECT_TRUE(book.ok()) << book.status().ToString();
    server_->Send(MessageType::kServerReady);
    return book.ok() ? book.value() : AddressBook();
  }
  AddressBook WorkerBook(Node& node) {
    auto book = node.Book();
    EXPECT_TRUE(book.ok()) << book.status().ToString();
    return book.ok() ? book.value() : AddressBook();
  }
};

TEST_F(ElasticSchedulerTest, ALostWorkerBreaksTheGenerationAndTheOthersGoOnRenumbered) {
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  worker_[0]->transport->Shutdown(0);  // worker 0 dies while working
  Status broken = worker_[1]->Outcome(MessageType::kGenerationBroken, 1);
  EXPECT_EQ(broken.code(), Code::kAborted) << broken.ToString();
  EXPECT_TRUE(Contains(broken, "worker 0 (hosta:3) exited or lost its connection")) << broken.ToString();
  EXPECT_FALSE(server_->Gets(MessageType::kAbort, 0.2)) << "the job goes on";

  worker_[1]->Send(MessageType::kNextGeneration);
  AddressBook server_book = ResetAndReady(/*dropped=*/true);
  EXPECT_EQ(server_book.generation, 2);
  EXPECT_EQ(server_book.num_workers, 1);
  ASSERT_EQ(server_book.worker_tokens.size(), 1u);
  AddressBook book = WorkerBook(*worker_[1]);
  EXPECT_EQ(book.your_rank, 0) << "the survivor is renumbered";
  EXPECT_EQ(book.num_workers, 1);
  EXPECT_EQ(book.your_token, server_book.worker_tokens[0]);
  EXPECT_NE(book.your_token, worker_book_[1].your_token) << "a new generation, a new token";

  // Tensors are planned for the generation's workers.
  worker_[1]->Send(MessageType::kDeclare, Spec({4}).Encode(), 7);
  auto plan = server_->inbox.Next(MessageType::kKeyPlan);
  ASSERT_TRUE(plan);
  auto keys = KeyPlanBody::Decode(plan->second.text);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys.value().keys[0].participants, 1);
}

TEST_F(ElasticSchedulerTest, AWorkerThatComesLaterWaitsAndJoinsAtTheNextGeneration) {
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  Node& late = Register(Role::kWorker, 2, "hostc:4");
  EXPECT_TRUE(late.Gets(MessageType::kJoinPending));
  for (int w = 0; w < 2; ++w) {
    auto waiting = worker_[w]->inbox.Next(MessageType::kWorkersWaiting);
    ASSERT_TRUE(waiting);
    EXPECT_EQ(waiting->second.sender, 1);
  }
  EXPECT_FALSE(late.Gets(MessageType::kAddressBook, 0.2)) << "it waits for the running generation to end";
  Status twin = Register(Role::kWorker, 2, "hostd:4").Book().status();
  EXPECT_TRUE(Contains(twin, "two workers registered with DMLC_WORKER_ID=2")) << twin.ToString();

  for (int w = 0; w < 2; ++w) worker_[w]->Send(MessageType::kFinish);
  server_->inbox.Next(MessageType::kWorkerFinished);
  auto reset = server_->inbox.Next(MessageType::kReset);
  ASSERT_TRUE(reset);
  server_->Send(MessageType::kResetReply);
  for (int w = 0; w < 2; ++w) ASSERT_TRUE(worker_[w]->Gets(MessageType::kGenerationDone));
  worker_[1]->Send(MessageType::kNextGeneration);
  EXPECT_FALSE(server_->Gets(MessageType::kAddressBook, 0.2)) << "worker 0 has not asked yet";
  worker_[0]->Send(MessageType::kNextGeneration);
  auto server_book = server_->Book();
  ASSERT_TRUE(server_book.ok());
  EXPECT_EQ(server_book.value().num_workers, 3);
  server_->Send(MessageType::kServerReady);
  EXPECT_EQ(WorkerBook(*worker_[0]).your_rank, 0);
  EXPECT_EQ(WorkerBook(*worker_[1]).your_rank, 1);
  AddressBook joined = WorkerBook(late);
  EXPECT_EQ(joined.your_rank, 2) << "the newest worker ranks last";
  EXPECT_EQ(joined.generation, 2);
}

TEST_F(ElasticSchedulerTest, BelowTheMinimumTheJobWaitsForWorkersThenFailsSayingSo) {
  StartScheduler(20, ElasticLimits{2, 3}, /*elastic_timeout_s=*/1.5);
  StartJob();
  worker_[0]->transport->Shutdown(0);
  ASSERT_TRUE(worker_[1]->Gets(MessageType::kGenerationBroken));
  worker_[1]->Send(MessageType::kNextGeneration);
  auto reset = server_->inbox.Next(MessageType::kReset);
  ASSERT_TRUE(reset);
  server_->Send(MessageType::kResetReply);
  EXPECT_FALSE(server_->Gets(MessageType::kAddressBook, 0.5)) << "one worker is below the minimum";
  Status s = worker_[1]->Outcome(MessageType::kAbort, 5);
  EXPECT_TRUE(Contains(s, "at least BYTEPS_MIN_WORKERS=2 workers")) << s.ToString();
  EXPECT_TRUE(Contains(s, "1 is left and no worker joined within BYTEPS_ELASTIC_TIMEOUT=1.5 s")) << s.ToString();
  EXPECT_FALSE(Result().ok());
}

TEST_F(ElasticSchedulerTest, AWorkerThatJoinsInTimeBringsTheJobBackToItsMinimum) {
  StartScheduler(20, ElasticLimits{2, 3}, /*elastic_timeout_s=*/30);
  StartJob();
  worker_[0]->transport->Shutdown(0);
  ASSERT_TRUE(worker_[1]->Gets(MessageType::kGenerationBroken));
  worker_[1]->Send(MessageType::kNextGeneration);
  auto reset = server_->inbox.Next(MessageType::kReset);
  ASSERT_TRUE(reset);
  server_->Send(MessageType::kResetReply);
  Node& restarted = Register(Role::kWorker, 0, "hosta:5");  // the lost worker's place, free again
  auto book = server_->Book();
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  EXPECT_EQ(book.value().num_workers, 2);
  server_->Send(MessageType::kServerReady);
  EXPECT_EQ(WorkerBook(*worker_[1]).your_rank, 0);
  EXPECT_EQ(WorkerBook(restarted).your_rank, 1);
}

TEST_F(ElasticSchedulerTest, WhenEveryWorkerFinishedAndLeftTheJobEndsAndAWaitingWorkerIsToldSo) {
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  Node& late = Register(Role::kWorker, 2, "hostc:4");
  ASSERT_TRUE(late.Gets(MessageType::kJoinPending));
  for (int w = 0; w < 2; ++w) worker_[w]->Send(MessageType::kFinish);
  ASSERT_TRUE(server_->Gets(MessageType::kReset));
  server_->Send(MessageType::kResetReply);
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(worker_[w]->Gets(MessageType::kGenerationDone));
    worker_[w]->transport->Shutdown(0);
  }
  Status told = late.Book().status();
  EXPECT_TRUE(Contains(told, "the job ended before this worker could join it")) << told.ToString();
  EXPECT_TRUE(server_->Gets(MessageType::kShutdown));
  EXPECT_TRUE(Result().ok());
}

TEST_F(ElasticSchedulerTest, AWorkerThatFailsLeavesTheJobToTheOthers) {
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  worker_[1]->Send(MessageType::kAbortRequest, "uncaught ValueError");
  Status broken = worker_[0]->Outcome(MessageType::kGenerationBroken);
  EXPECT_TRUE(Contains(broken, "worker 1 (hostb:2) failed: uncaught ValueError")) << broken.ToString();
  EXPECT_FALSE(server_->Gets(MessageType::kAbort, 0.2));
}

// Both survivors of a lost worker fail (in a reset callback, say): the first breaks the generation, the second
// fails between generations. The job fails naming it, also for a worker waiting to join.
TEST_F(ElasticSchedulerTest, WhenTheLastWorkersFailTheJobFailsNamingTheLastFailure) {
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  Node& late = Register(Role::kWorker, 2, "hostc:4");
  ASSERT_TRUE(late.Gets(MessageType::kJoinPending));
  worker_[0]->Send(MessageType::kAbortRequest, "uncaught AttributeError: no attribute 'lr'");
  ASSERT_TRUE(worker_[1]->Gets(MessageType::kGenerationBroken));
  worker_[1]->Send(MessageType::kAbortRequest, "uncaught AttributeError: no attribute 'lr'");
  ASSERT_TRUE(server_->Gets(MessageType::kReset));
  server_->Send(MessageType::kResetReply);
  Status told = late.Outcome(MessageType::kAbort);
  EXPECT_TRUE(Contains(told, "every worker of the job failed or was lost; the last: worker 1 (hostb:2) failed: "
                             "uncaught AttributeError: no attribute 'lr'")) << told.ToString();
  EXPECT_TRUE(server_->Gets(MessageType::kAbort));
  EXPECT_FALSE(Result().ok());
}

TEST_F(ElasticSchedulerTest, ASurvivorThatExitsWithoutFinishingIsLostToo) {
  StartScheduler(20, ElasticLimits{1, 3});
  StartJob();
  worker_[0]->transport->Shutdown(0);
  ASSERT_TRUE(worker_[1]->Gets(MessageType::kGenerationBroken));
  ASSERT_TRUE(server_->Gets(MessageType::kReset));
  server_->Send(MessageType::kResetReply);
  worker_[1]->transport->Shutdown(0);  // gone before it asked for the next generation
  Status s = server_->Outcome(MessageType::kAbort);
  EXPECT_TRUE(Contains(s, "the last: worker 1 (hostb:2) exited or lost its connection")) << s.ToString();
  EXPECT_FALSE(server_->Gets(MessageType::kShutdown, 0.2));
  EXPECT_FALSE(Result().ok());
}

}  // namespace
}  // namespace bps
