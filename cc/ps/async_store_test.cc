#include "cc/ps/async_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

namespace bps {
namespace {

KeySpec Spec(uint64_t key, DataType dtype, uint64_t count, int workers) {
  KeySpec s;
  s.key = key;
  s.dtype = dtype;
  s.count = count;
  s.participants = workers;
  return s;
}

ParkedPull From(int rank, uint32_t round, double at = 0) {
  return ParkedPull{/*peer=*/rank + 100, rank, ShareMode::kNone, /*request_id=*/round, round, at};
}

std::vector<double> AsDoubles(const std::vector<char>& bytes) {
  std::vector<double> out(bytes.size() / sizeof(double));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(AsyncStore, FirstInitialPushSetsTheWeightsLaterOnesAreAnsweredWithThem) {
  AsyncStore store(-1, 10);
  const KeySpec spec = Spec(7, DataType::kFloat64, 3, 2);
  std::vector<double> w0 = {1, 2, 3}, other = {9, 9, 9};
  auto r0 = store.Push(spec, From(0, 1), w0.data());
  ASSERT_EQ(r0.size(), 1u);
  EXPECT_TRUE(r0[0].status.ok());
  EXPECT_EQ(AsDoubles(*r0[0].weights), w0);
  auto r1 = store.Push(spec, From(1, 1), other.data());
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(AsDoubles(*r1[0].weights), w0);
  EXPECT_EQ(store.Clocks(7), (std::vector<uint64_t>{0, 0}));
}

TEST(AsyncStore, ChangesAddUpExactlyInArrivalOrderFromConcurrentWorkers) {
  AsyncStore store(-1, 10);
  const int workers = 3, steps = 200;
  const KeySpec spec = Spec(1, DataType::kFloat64, 5, workers);
  std::vector<double> w0 = {0.5, -1, 2, 0, 1024};
  ASSERT_EQ(store.Push(spec, From(0, 1), w0.data()).size(), 1u);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      if (w > 0) {
        ASSERT_EQ(store.Push(spec, From(w, 1), w0.data()).size(), 1u);
      }
      for (int s = 0; s < steps; ++s) {
        // Multiples of 1/8 sum exactly in float64, in any order.
        std::vector<double> delta(5, (w + 1) * 0.125 * (s % 4 - 1));
        auto replies = store.Push(spec, From(w, 2 + s), delta.data());
        ASSERT_EQ(replies.size(), 1u);
        ASSERT_TRUE(replies[0].status.ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  double per_worker_unit = 0;
  for (int s = 0; s < steps; ++s) per_worker_unit += 0.125 * (s % 4 - 1);
  auto weights = store.Weights(1);
  ASSERT_TRUE(weights.ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(AsDoubles(weights.value())[i], w0[i] + per_worker_unit * (1 + 2 + 3));
  EXPECT_EQ(store.Clocks(1), (std::vector<uint64_t>(workers, steps)));
}

TEST(AsyncStore, Float32AddsInArrivalOrder) {
  AsyncStore store(-1, 10);
  const KeySpec spec = Spec(2, DataType::kFloat32, 1, 2);
  float w = 1.0f;
  ASSERT_EQ(store.Push(spec, From(0, 1), &w).size(), 1u);
  float reference = w;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1e-3f, 1e-3f);
  for (int s = 0; s < 100; ++s) {
    float d = dist(rng);
    reference += d;
    ASSERT_EQ(store.Push(spec, From(s % 2, 2 + s / 2), &d).size(), 1u);
  }
  float got = 0;
  std::memcpy(&got, store.Weights(2).value().data(), sizeof(float));
  EXPECT_EQ(got, reference);
}

TEST(AsyncStore, ZerosChangeNothingButCountAStep) {
  AsyncStore store(-1, 10);
  const KeySpec spec = Spec(3, DataType::kFloat64, 2, 1);
  std::vector<double> w0 = {4, 5};
  ASSERT_EQ(store.Push(spec, From(0, 1), w0.data()).size(), 1u);
  auto replies = store.Push(spec, From(0, 2), nullptr);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(AsDoubles(*replies[0].weights), w0);
  EXPECT_EQ(store.Clocks(3), (std::vector<uint64_t>{1}));
}

TEST(AsyncStore, AChangeBeforeAnyInitialPushIsAnErrorThatSaysTheModelIsLost) {
  AsyncStore store(-1, 10);
  const KeySpec spec = Spec(4, DataType::kFloat64, 1, 2);
  double d = 1;
  auto replies = store.Push(spec, From(1, 5), &d);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].status.code(), Code::kFailedPrecondition);
  EXPECT_NE(replies[0].status.message().find("restart the job from a checkpoint"), std::string::npos);
}

// Worker 0 runs ahead; worker 1 is the slowest.
TEST(AsyncStore, StalenessHoldsTheReplyOfAWorkerTooFarAheadUntilTheSlowestPushes) {
  const int s = 2;
  AsyncStore store(s, 10);
  const KeySpec spec = Spec(5, DataType::kFloat64, 1, 2);
  double w0 = 0, one = 1;
  ASSERT_EQ(store.Push(spec, From(0, 1), &w0).size(), 1u);
  ASSERT_EQ(store.Push(spec, From(1, 1), &w0).size(), 1u);
  for (int step = 1; step <= s; ++step) {
    ASSERT_EQ(store.Push(spec, From(0, 1 + step), &one).size(), 1u) << "within s steps: answered";
  }
  EXPECT_TRUE(store.Push(spec, From(0, 2 + s, 1.0), &one).empty()) << "s+1 ahead: held";
  auto released = store.Push(spec, From(1, 2, 3.5), &one);
  ASSERT_EQ(released.size(), 2u);  // the slowest's own reply and the held one
  EXPECT_EQ(released[0].to.rank, 1);
  EXPECT_EQ(released[1].to.rank, 0);
  EXPECT_DOUBLE_EQ(released[1].held_seconds, 2.5);
  EXPECT_EQ(AsDoubles(*released[1].weights)[0], s + 2);
  EXPECT_EQ(*released[0].weights, *released[1].weights) << "released together: the same weights";
}

TEST(AsyncStore, StalenessZeroIsLockStep) {
  AsyncStore store(0, 10);
  const KeySpec spec = Spec(6, DataType::kFloat64, 1, 3);
  double w0 = 0;
  for (int w = 0; w < 3; ++w) ASSERT_EQ(store.Push(spec, From(w, 1), &w0).size(), 1u);
  for (int step = 1; step <= 3; ++step) {
    double d = step;
    EXPECT_TRUE(store.Push(spec, From(0, 1 + step), &d).empty());
    EXPECT_TRUE(store.Push(spec, From(2, 1 + step), &d).empty());
    auto all = store.Push(spec, From(1, 1 + step), &d);
    ASSERT_EQ(all.size(), 3u);
    for (const auto& r : all) EXPECT_EQ(AsDoubles(*r.weights)[0], 3.0 * step * (step + 1) / 2);
  }
}

TEST(AsyncStore, AHeldReplyFailsAfterTheTimeoutNamingTheSlowestWorker) {
  AsyncStore store(0, 5);
  const KeySpec spec = Spec(8, DataType::kFloat64, 1, 3);
  double w0 = 0, one = 1;
  for (int w = 0; w < 3; ++w) ASSERT_EQ(store.Push(spec, From(w, 1), &w0).size(), 1u);
  ASSERT_TRUE(store.Push(spec, From(0, 2, 10.0), &one).empty());
  ASSERT_TRUE(store.Push(spec, From(1, 2, 11.0), &one).empty());
  EXPECT_TRUE(store.Expire(14.9).empty());
  auto failed = store.Expire(15.5);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].to.rank, 0);
  EXPECT_EQ(failed[0].status.code(), Code::kDeadlineExceeded);
  EXPECT_NE(failed[0].status.message().find("slowest worker, worker 2"), std::string::npos)
      << failed[0].status.message();
  EXPECT_EQ(store.Expire(16.5).size(), 1u);
}

TEST(AsyncStore, AKeyPlannedAnewWithMoreElementsStartsAfresh) {
  AsyncStore store(0, 5);
  double small = 1;
  ASSERT_EQ(store.Push(Spec(11, DataType::kFloat64, 1, 2), From(0, 1), &small).size(), 1u);
  double one = 1;
  ASSERT_TRUE(store.Push(Spec(11, DataType::kFloat64, 1, 2), From(0, 2), &one).empty());  // held (s = 0)
  // The next generation plans key 11 with 4 elements: the store sizes it anew, and fails the held reply.
  const std::vector<double> large = {1, 2, 3, 4};
  auto replies = store.Push(Spec(11, DataType::kFloat64, 4, 2), From(1, 1), large.data());
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].status.code(), Code::kAborted);
  ASSERT_TRUE(replies[1].status.ok()) << replies[1].status.ToString();
  EXPECT_EQ(AsDoubles(*replies[1].weights), large);
}

TEST(AsyncStore, AFinishedWorkerHoldsNobodyBack) {
  AsyncStore store(0, 5);
  const KeySpec spec = Spec(9, DataType::kFloat64, 1, 2);
  double w0 = 0, one = 1;
  for (int w = 0; w < 2; ++w) ASSERT_EQ(store.Push(spec, From(w, 1), &w0).size(), 1u);
  ASSERT_TRUE(store.Push(spec, From(0, 2), &one).empty());
  auto released = store.Finished(spec, {1});
  ASSERT_EQ(released.size(), 1u);
  EXPECT_TRUE(released[0].status.ok());
}

TEST(AsyncStore, ClearFailsHeldRepliesAndForgetsTheWeights) {
  AsyncStore store(0, 5);
  const KeySpec spec = Spec(10, DataType::kFloat64, 1, 2);
  double w0 = 0, one = 1;
  for (int w = 0; w < 2; ++w) ASSERT_EQ(store.Push(spec, From(w, 1), &w0).size(), 1u);
  ASSERT_TRUE(store.Push(spec, From(0, 2), &one).empty());
  auto failed = store.Clear(Aborted("gone"));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].status.code(), Code::kAborted);
  EXPECT_FALSE(store.Weights(10).ok());
}

TEST(AsyncStore, HalfPrecisionWeightsAccumulateInFloat32) {
  AsyncStore store(-1, 5);
  const KeySpec spec = Spec(11, DataType::kFloat16, 1, 1);
  const uint16_t one = 0x3C00;  // 1.0; float16's spacing at 1.0 is 2^-10
  ASSERT_EQ(store.Push(spec, From(0, 1), &one).size(), 1u);
  uint16_t quarter_ulp = 0x0C00;  // 2^-12: lost if each addition rounded to float16
  for (int s = 0; s < 4; ++s) ASSERT_EQ(store.Push(spec, From(0, 2 + s), &quarter_ulp).size(), 1u);
  uint16_t got = 0;
  std::memcpy(&got, store.Weights(11).value().data(), sizeof(got));
  EXPECT_EQ(got, 0x3C01) << "1 + 4 * 2^-12 = 1 + 2^-10";
}

}  // namespace
}  // namespace bps
