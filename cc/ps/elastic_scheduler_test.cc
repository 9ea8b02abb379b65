// The scheduler's protocol in an elastic job: lost workers break a generation and the others go on
// renumbered, workers join at the next generation, and the job waits below its minimum, then fails.
#include "cc/ps/scheduler.h"

#include <gtest/gtest.h>

#include "cc/ps/scheduler_testing.h"

namespace bps {
namespace {

using testing::Contains;
using testing::ElasticSchedulerTest;
using testing::Node;
using testing::SchedulerTest;

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
