// The scheduler's protocol, with the test playing every server and worker over the in-memory transport:
// registration and the start of the job, declarations, and the end of a generation and of the job.
#include "cc/ps/scheduler.h"

#include <gtest/gtest.h>

#include "cc/ps/scheduler_testing.h"

namespace bps {
namespace {

using testing::Contains;
using testing::ElasticSchedulerTest;
using testing::Node;
using testing::SchedulerTest;

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

}  // namespace
}  // namespace bps
