// Multi-rank tests of how a job fails: workers that disagree on a tensor, workers that stop pushing, and a
// lost server; each failure reaches every worker with what to do. Every node is a thread in this process,
// connected by the in-memory transport.
#include "cc/runtime/engine.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

#include "cc/common/clock.h"
#include "cc/reducer/test_data.h"
#include "cc/runtime/engine_testing.h"
#include "cc/runtime/local_job_testing.h"

namespace bps {
namespace {

using testing::Await;
using testing::Collective;
using testing::LocalJob;
using testing::PushPull;
using testing::Read;
using test_data::Value;

TEST(EngineTest, MismatchedShapesFailOnEveryWorker) {
  LocalJob job(2, 1);
  std::vector<float> a(12), b(13), out_a(12), out_b(13);
  auto fa = PushPull(job.worker(0), "w", DataType::kFloat32, {3, 4}, a.data(), out_a.data());
  auto fb = PushPull(job.worker(1), "w", DataType::kFloat32, {13}, b.data(), out_b.data());
  Status sa = Await(fa), sb = Await(fb);
  for (const Status& s : {sa, sb}) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("'w'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("float32[3,4]"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("float32[13]"), std::string::npos) << s.message();
  }
  // Other tensors still work.
  std::vector<float> x(5, 1.0f), y(5, 2.0f);
  auto fx = PushPull(job.worker(0), "ok", DataType::kFloat32, {5}, x.data(), x.data());
  auto fy = PushPull(job.worker(1), "ok", DataType::kFloat32, {5}, y.data(), y.data());
  ASSERT_TRUE(Await(fx).ok());
  ASSERT_TRUE(Await(fy).ok());
  EXPECT_EQ(x[4], 3.0f);
}

TEST(EngineTest, MismatchedDtypesFailOnEveryWorker) {
  LocalJob job(2, 1);
  std::vector<float> a(4);
  std::vector<double> b(4);
  auto fa = PushPull(job.worker(0), "d", DataType::kFloat32, {4}, a.data(), a.data());
  auto fb = PushPull(job.worker(1), "d", DataType::kFloat64, {4}, b.data(), b.data());
  EXPECT_EQ(Await(fa).code(), Code::kInvalidArgument);
  EXPECT_EQ(Await(fb).code(), Code::kInvalidArgument);
}

TEST(EngineTest, OneNameForTwoTensorsIsRejectedLocally) {
  LocalJob job(1, 1);
  std::vector<float> a(4), b(5);
  auto fa = PushPull(job.worker(0), "same", DataType::kFloat32, {4}, a.data(), a.data());
  ASSERT_TRUE(Await(fa).ok());
  auto fb = PushPull(job.worker(0), "same", DataType::kFloat32, {5}, b.data(), b.data());
  Status s = Await(fb);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("two different tensors"), std::string::npos) << s.message();
}

TEST(EngineTest, AWorkerThatNeverPushesTimesOutTheOthers) {
  LocalJob job(2, 1, /*timeout_s=*/1.5);
  std::vector<float> a(10);
  double start = NowSeconds();
  auto fa = PushPull(job.worker(0), "lonely", DataType::kFloat32, {10}, a.data(), a.data());
  Status s = Await(fa, 20);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("lonely"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("worker(s) 1"), std::string::npos) << s.message();
  EXPECT_LT(NowSeconds() - start, 5.0);
}

TEST(EngineTest, AWorkerThatStopsMidwayTimesOutAtTheServer) {
  LocalJob job(2, 1, /*timeout_s=*/1.5);
  std::vector<float> a(10), b(10);
  auto f0 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a.data(), a.data());
  auto f1 = PushPull(job.worker(1), "t", DataType::kFloat32, {10}, b.data(), b.data());
  ASSERT_TRUE(Await(f0).ok());
  ASSERT_TRUE(Await(f1).ok());
  auto again = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a.data(), a.data());
  Status s = Await(again, 20);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
}

// Worker 0's round 2 times out (worker 1 is late), then worker 0 pushes round 3, which the server refuses.
// Worker 1's late round 2 must still get worker 0's round-2 data: the refused push may not land in memory
// the server is summing in (with shared memory, its buffer from the last reply had become the running sum).
TEST(EngineTest, APushAfterATimedOutRoundLeavesThatRoundsSumIntact) {
  LocalJob job(2, 1, /*timeout_s=*/1.5);
  std::vector<float> a(10, 1), b(10, 2), out0(10), out1(10);
  auto f0 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a.data(), out0.data());
  auto f1 = PushPull(job.worker(1), "t", DataType::kFloat32, {10}, b.data(), out1.data());
  ASSERT_TRUE(Await(f0).ok());
  ASSERT_TRUE(Await(f1).ok());
  std::vector<float> a2(10, 10), a3(10, 1000), b2(10, 100);
  auto round2 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a2.data(), out0.data());
  EXPECT_EQ(Await(round2, 20).code(), Code::kDeadlineExceeded);
  auto round3 = PushPull(job.worker(0), "t", DataType::kFloat32, {10}, a3.data(), out0.data());
  EXPECT_FALSE(Await(round3, 20).ok());
  auto late = PushPull(job.worker(1), "t", DataType::kFloat32, {10}, b2.data(), out1.data());
  ASSERT_TRUE(Await(late, 20).ok());
  EXPECT_EQ(out1, std::vector<float>(10, 110));
}

// One process per GPU: local rank l of every machine pushes slice l of its machine's reduced tensor, and the
// servers sum one contribution per machine; tensors of every process still sum over all processes.

TEST(EngineTest, LosingAServerFailsEveryWorkerPromptly) {
  LocalJob job(2, 2, /*timeout_s=*/30);
  std::vector<float> a(100000), b(100000);
  auto f0 = PushPull(job.worker(0), "before", DataType::kFloat32, {100000}, a.data(), a.data());
  auto f1 = PushPull(job.worker(1), "before", DataType::kFloat32, {100000}, b.data(), b.data());
  ASSERT_TRUE(Await(f0).ok());
  ASSERT_TRUE(Await(f1).ok());
  job.KillServer(1);
  double start = NowSeconds();
  for (int w = 0; w < 2; ++w) {
    auto f = PushPull(job.worker(w), "after", DataType::kFloat32, {100000}, a.data(), a.data());
    Status s = Await(f, 20);
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    // Either the worker's own connection or the scheduler's ABORT reports it first; both name the server
    // (servers are numbered in registration order, not by LocalJob's index).
    EXPECT_NE(s.message().find("server "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("exited"), std::string::npos) << s.message();
  }
  EXPECT_LT(NowSeconds() - start, 10.0);
}


// A shutdown that gives up waiting for push_pulls (here worker 1 never pushes) completes each of them with
// an error before it returns, those queued behind others included: none is left to a callback that could
// come after the engine is gone.
TEST(EngineTest, ShutdownCompletesEveryRequestItLeavesUnfinished) {
  LocalJob job(2, 1, /*timeout_s=*/1);
  std::vector<float> a(10, 1), b(10, 2), c(10, 3);
  std::vector<std::future<Status>> pending;
  pending.push_back(PushPull(job.worker(0), "alone", DataType::kFloat32, {10}, a.data(), a.data()));
  pending.push_back(PushPull(job.worker(0), "alone", DataType::kFloat32, {10}, b.data(), b.data()));
  pending.push_back(PushPull(job.worker(0), "alone", DataType::kFloat32, {10}, c.data(), c.data()));
  pending.push_back(PushPull(job.worker(0), "also alone", DataType::kFloat32, {10}, c.data(), c.data()));
  job.worker(0).Shutdown().IgnoreError();
  for (auto& f : pending) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    Status s = f.get();
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(s.code() == Code::kDeadlineExceeded || s.code() == Code::kAborted) << s.ToString();
  }
}

}  // namespace
}  // namespace bps
