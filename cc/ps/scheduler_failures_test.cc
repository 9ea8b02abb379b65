// The scheduler's protocol when the job fails: a job that never starts, a worker's failure, lost servers
// and workers, and the fan-out of an abort to every node.
#include "cc/ps/scheduler.h"

#include <gtest/gtest.h>

#include "cc/ps/scheduler_testing.h"

namespace bps {
namespace {

using testing::Contains;
using testing::ElasticSchedulerTest;
using testing::Node;
using testing::SchedulerTest;

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

}  // namespace
}  // namespace bps
