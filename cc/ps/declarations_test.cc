// The declaration check and planning on their own: the test is the job's membership and reads what
// would be sent (plans to servers, replies to workers) instead of a transport.
#include "cc/ps/declarations.h"

#include <gtest/gtest.h>

#include <vector>

#include "cc/common/clock.h"

namespace bps {
namespace {

constexpr PeerId kServers[] = {100, 101};

struct Sent {
  PeerId to;
  Message m;
};

TensorSpec Spec(const std::string& name, std::vector<int64_t> shape) {
  TensorSpec spec;
  spec.name = name;
  spec.shape = std::move(shape);
  return spec;
}

bool Contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

class DeclarationsTest : public ::testing::Test {
 protected:
  // `machines` worker machines of `local_size` processes (worker rank r speaks through peer r), two servers.
  void StartJob(int machines, int local_size) {
    members_ = std::make_unique<JobMembership>(machines, 2);
    config_.num_worker = machines;
    config_.num_server = 2;
    config_.partition_bytes = 4096;
    config_.timeout_s = 30;
    for (int s = 0; s < 2; ++s) {
      RegisterBody b;
      b.role = static_cast<int32_t>(Role::kServer);
      b.num_worker = machines;
      b.num_server = 2;
      b.address = "server" + std::to_string(s) + ":1";
      ASSERT_TRUE(members_->Admit(kServers[s], b, "server").ok());
    }
    for (int rank = 0; rank < machines * local_size; ++rank) {
      RegisterBody b;
      b.role = static_cast<int32_t>(Role::kWorker);
      b.worker_id = rank / local_size;
      b.local_rank = rank % local_size;
      b.local_size = local_size;
      b.num_worker = machines;
      b.num_server = 2;
      b.address = "machine:" + std::to_string(rank + 1);
      ASSERT_TRUE(members_->Admit(rank, b, "worker").ok());
    }
    ASSERT_TRUE(members_->complete());
    members_->Start();
    declarations_ = std::make_unique<Declarations>(config_, *members_,
                                                   [this](PeerId to, const Message& m) { sent_.push_back({to, m}); });
    declarations_->StartGeneration(0);
  }
  void SetUp() override { StartJob(2, 1); }

  // Worker `rank` declares `spec` through the wire format, as the scheduler gets it; request id 1000 + rank.
  Status Declare(int rank, const TensorSpec& spec) {
    auto checked = declarations_->Check(spec.Encode(), rank, true);
    EXPECT_TRUE(checked.ok()) << checked.status().ToString();
    if (!checked.ok()) return checked.status();
    return declarations_->Declare(rank, rank, 1000 + rank, checked.value());
  }

  // Takes what was sent of `type`.
  std::vector<Sent> Take(MessageType type) {
    std::vector<Sent> taken, kept;
    for (Sent& s : sent_) (s.m.type == type ? taken : kept).push_back(s);
    sent_ = kept;
    return taken;
  }

  // Every server that got a key plan confirms it (or refuses it with `answer`).
  void Confirm(const Status& answer = Status::OK()) {
    for (const Sent& plan : Take(MessageType::kKeyPlan)) {
      Message reply;
      reply.type = MessageType::kKeyPlanReply;
      reply.request_id = plan.m.request_id;
      reply.set_status(answer);
      declarations_->OnKeyPlanReply(plan.to, reply, "server at " + std::to_string(plan.to));
    }
  }

  Config config_;
  std::unique_ptr<JobMembership> members_;
  std::unique_ptr<Declarations> declarations_;
  std::vector<Sent> sent_;
};

TEST_F(DeclarationsTest, EveryWorkerGetsOnePlanOnceAllDeclaredAndTheServersConfirmed) {
  const TensorSpec spec = Spec("grad", {256, 256});  // 256 KiB: partitions on both servers
  ASSERT_TRUE(Declare(1, spec).ok());
  EXPECT_TRUE(sent_.empty()) << "worker 0 has not declared yet";
  ASSERT_TRUE(Declare(0, spec).ok());
  std::vector<Sent> plans = Take(MessageType::kKeyPlan);
  ASSERT_EQ(plans.size(), 2u) << "each server holding keys is told";
  EXPECT_TRUE(Take(MessageType::kDeclareReply).empty()) << "no worker may push before the servers confirmed";
  uint64_t keys = 0;
  for (const Sent& plan : plans) {
    auto body = KeyPlanBody::Decode(plan.m.text);
    ASSERT_TRUE(body.ok());
    keys += body.value().keys.size();
    for (const KeySpec& key : body.value().keys) EXPECT_EQ(key.participants, 2);
  }
  sent_ = plans;
  Confirm();

  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 2u);
  std::set<uint64_t> request_ids;
  for (const Sent& reply : replies) {
    ASSERT_TRUE(reply.m.status().ok()) << reply.m.status().ToString();
    EXPECT_EQ(reply.m.text, replies[0].m.text) << "every worker gets the same plan";
    EXPECT_EQ(reply.m.request_id, 1000u + reply.to);
    request_ids.insert(reply.m.request_id);
  }
  EXPECT_EQ(request_ids.size(), 2u);
  auto plan = PartitionPlan::Decode(replies[0].m.text);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan.value().partitions.size(), keys);
  uint64_t elements = 0;
  for (const Partition& p : plan.value().partitions) elements += p.count;
  EXPECT_EQ(elements, 256u * 256u);
}

TEST_F(DeclarationsTest, ADifferentShapeFailsTheTensorForEveryWorkerAndNamesBoth) {
  ASSERT_TRUE(Declare(0, Spec("w", {3, 4})).ok());
  ASSERT_TRUE(Declare(1, Spec("w", {4, 3})).ok());
  EXPECT_TRUE(Take(MessageType::kKeyPlan).empty());
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 2u);
  for (const Sent& reply : replies) {
    EXPECT_EQ(reply.m.status().code(), Code::kInvalidArgument);
    EXPECT_TRUE(Contains(reply.m.status(), "worker 0 declared it as float32[3,4] but worker 1 as float32[4,3]"))
        << reply.m.status().ToString();
  }
}

TEST_F(DeclarationsTest, SizesThatDifferNameTheLikelyCauseUnevenBatches) {
  ASSERT_TRUE(Declare(0, Spec("w", {11, 64})).ok());
  ASSERT_TRUE(Declare(1, Spec("w", {10, 64})).ok());
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 2u);
  for (const Sent& reply : replies) {
    EXPECT_TRUE(Contains(reply.m.status(), "float32[11,64] but worker 1 as float32[10,64]"))
        << reply.m.status().ToString();
    EXPECT_TRUE(Contains(reply.m.status(), "Batches of different sizes")) << reply.m.status().ToString();
  }
}

TEST_F(DeclarationsTest, AnotherRankDoesNotBlameBatches) {
  ASSERT_TRUE(Declare(0, Spec("w", {12})).ok());
  ASSERT_TRUE(Declare(1, Spec("w", {3, 4})).ok());
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 2u);
  for (const Sent& reply : replies) {
    EXPECT_FALSE(Contains(reply.m.status(), "Batches of different sizes")) << reply.m.status().ToString();
  }
}

TEST_F(DeclarationsTest, AWorkerThatFinishedWithoutDeclaringFailsTheTensor) {
  ASSERT_TRUE(Declare(0, Spec("w", {8})).ok());
  ASSERT_TRUE(members_->Finish(1, false));
  declarations_->Review();
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].to, 0);
  EXPECT_EQ(replies[0].m.status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(Contains(replies[0].m.status(), "worker(s) 1 finished")) << replies[0].m.status().ToString();
}

TEST_F(DeclarationsTest, AJoinedWorkerCountsAsDeclared) {
  ASSERT_TRUE(members_->Finish(1, true));
  ASSERT_TRUE(Declare(0, Spec("w", {8})).ok());
  Confirm();
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_TRUE(replies[0].m.status().ok()) << replies[0].m.status().ToString();
}

TEST_F(DeclarationsTest, DeclarationsThatWaitPastTheTimeoutNameWhoIsMissing) {
  ASSERT_TRUE(Declare(1, Spec("w", {8})).ok());
  declarations_->ExpireWaiting(NowSeconds() + 1);
  EXPECT_TRUE(sent_.empty()) << "not yet";
  declarations_->ExpireWaiting(NowSeconds() + config_.timeout_s + 1);
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].m.status().code(), Code::kDeadlineExceeded);
  const Status& s = replies[0].m.status();
  EXPECT_TRUE(Contains(s, "pushed by worker(s) 1 but not by worker(s) 0 within BYTEPS_TIMEOUT=30 s")) << s.ToString();
}

TEST_F(DeclarationsTest, AServerThatCannotTakeItsKeysFailsTheTensor) {
  ASSERT_TRUE(Declare(0, Spec("w", {8})).ok());
  ASSERT_TRUE(Declare(1, Spec("w", {8})).ok());
  Confirm(Internal("out of memory"));
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].m.status().code(), Code::kInternal);
  EXPECT_TRUE(Contains(replies[0].m.status(), "could not take its keys: out of memory"))
      << replies[0].m.status().ToString();
}

TEST_F(DeclarationsTest, DeclarationsAreCheckedAgainstTheJob) {
  TensorSpec outside = Spec("w", {8});
  outside.members = {1};
  auto refused = declarations_->Check(outside.Encode(), 0, true);
  EXPECT_TRUE(Contains(refused.status(), "belongs to a process set without worker 0")) << refused.status().ToString();

  TensorSpec beyond = Spec("w", {8});
  beyond.members = {0, 5};
  refused = declarations_->Check(beyond.Encode(), 0, true);
  EXPECT_TRUE(Contains(refused.status(), "names rank 5 in a job of 2 worker processes")) << refused.status().ToString();

  TensorSpec published = Spec("w", {8});
  published.scope = TensorScope::kPublished;
  published.root = 2;
  refused = declarations_->Check(published.Encode(), 0, true);
  EXPECT_TRUE(Contains(refused.status(), "published by rank 2 in a job of 2")) << refused.status().ToString();

  refused = declarations_->Check(Spec("w", {8}).Encode(), 0, false);
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(declarations_->Check("garbage", 0, true).ok());
  EXPECT_FALSE(declarations_->Check(Spec("", {8}).Encode(), 0, true).ok()) << "an empty name is invalid";
}

TEST_F(DeclarationsTest, AReaderLearnsThatThePublisherFinishedWithoutPublishing) {
  TensorSpec spec = Spec("w", {8});
  spec.scope = TensorScope::kPublished;
  spec.root = 1;
  ASSERT_TRUE(Declare(0, spec).ok());
  EXPECT_TRUE(sent_.empty()) << "a reader waits for the publisher";
  ASSERT_TRUE(members_->Finish(1, true));
  ASSERT_TRUE(Declare(0, spec).ok());
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_TRUE(Contains(replies[0].m.status(), "published by worker 1, which finished without publishing it"))
      << replies[0].m.status().ToString() << ": joining publishes nothing";
}

TEST_F(DeclarationsTest, ASecondProcessOfAMachineAfterThePlanMustEndTheJob) {
  StartJob(2, 2);
  TensorSpec spec = Spec("w", {8});
  spec.scope = TensorScope::kMachine;
  ASSERT_TRUE(Declare(0, spec).ok());
  ASSERT_TRUE(Declare(2, spec).ok());
  Confirm();
  ASSERT_EQ(Take(MessageType::kDeclareReply).size(), 2u) << "one process per machine completes it";
  Status second = Declare(1, spec);
  EXPECT_EQ(second.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Contains(second, "workers 0 and 1 of machine 0 both pushed it")) << second.ToString();
}

TEST_F(DeclarationsTest, ANewGenerationForgetsEveryTensor) {
  ASSERT_TRUE(Declare(0, Spec("w", {8})).ok());
  ASSERT_TRUE(Declare(1, Spec("w", {8})).ok());
  Confirm();
  ASSERT_EQ(Take(MessageType::kDeclareReply).size(), 2u);
  declarations_->StartGeneration(0);
  ASSERT_TRUE(Declare(0, Spec("w", {16})).ok());
  ASSERT_TRUE(Declare(1, Spec("w", {16})).ok());
  Confirm();
  std::vector<Sent> replies = Take(MessageType::kDeclareReply);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_TRUE(replies[0].m.status().ok()) << "another shape under the same name: " << replies[0].m.status().ToString();
}

}  // namespace
}  // namespace bps
