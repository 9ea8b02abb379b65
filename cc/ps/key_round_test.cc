// KeyRound with backup workers: which pushes a round sums, what late pushes get, and the window of kept sums.
#include "cc/ps/key_round.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace bps {
namespace {

// Worker `rank` pushes `values` (float32) to `round` of `key`; returns whether that completed a round.
bool Push(KeyRound& key, int rank, uint32_t round, std::vector<float> values) {
  std::memcpy(key.ReceiveBuffer(rank), values.data(), values.size() * sizeof(float));
  auto completed = key.Add(rank, round);
  EXPECT_TRUE(completed.ok()) << completed.status().ToString();
  return completed.ok() && completed.value();
}

std::vector<float> Result(const KeyRound& key, uint32_t round) {
  const float* sum = static_cast<const float*>(key.result(round));
  return std::vector<float>(sum, sum + key.num_elements());
}

// The sum of the contributors, scaled as the server scales it: in float32, by 4/3 computed in float32.
std::vector<float> Scaled(std::vector<float> sum, int workers, int contributors) {
  const float scale = static_cast<float>(workers) / static_cast<float>(contributors);
  for (float& v : sum) v *= scale;
  return sum;
}

TEST(KeyRoundBackupTest, ARoundSumsTheFirstPushesScaledToStandForEveryWorker) {
  KeyRound key(DataType::kFloat32, 2, 4, nullptr, ReduceOp::kSum, {}, 0, nullptr, /*backups=*/1, /*window=*/2);
  EXPECT_EQ(key.contributions_needed(), 3);
  EXPECT_FALSE(Push(key, 2, 1, {1, 2}));
  EXPECT_FALSE(Push(key, 0, 1, {10, 20}));
  EXPECT_TRUE(Push(key, 3, 1, {100, 200})) << "three of four workers complete the round";
  EXPECT_EQ(key.completed_round(), 1u);
  EXPECT_EQ(Result(key, 1), Scaled({111, 222}, 4, 3));
  EXPECT_FALSE(key.result_is_zero(1));
  EXPECT_EQ(key.result_sole_contributor(1), -1) << "a scaled sum is nobody's own push";
  EXPECT_EQ(key.dropped_pushes(), 0u);
}

TEST(KeyRoundBackupTest, ALatePushIsDroppedCountedAndItsRoundsSumKept) {
  KeyRound key(DataType::kFloat32, 2, 4, nullptr, ReduceOp::kSum, {}, 0, nullptr, 1, 2);
  Push(key, 0, 1, {1, 1});
  Push(key, 1, 1, {2, 2});
  ASSERT_TRUE(Push(key, 2, 1, {4, 4}));
  // Worker 3 pushes round 1 late: its data is never added, to round 1 or any other.
  EXPECT_FALSE(Push(key, 3, 1, {1000, 1000}));
  EXPECT_EQ(key.dropped_pushes(), 1u);
  EXPECT_TRUE(key.Retains(1));
  EXPECT_EQ(Result(key, 1), Scaled({7, 7}, 4, 3));
  // Round 2: worker 3 is on time, worker 0 late.
  Push(key, 3, 2, {8, 8});
  Push(key, 1, 2, {16, 16});
  ASSERT_TRUE(Push(key, 2, 2, {32, 32}));
  EXPECT_FALSE(Push(key, 0, 2, {1000, 1000}));
  EXPECT_EQ(key.dropped_pushes(), 2u);
  EXPECT_EQ(Result(key, 2), Scaled({56, 56}, 4, 3));
  EXPECT_EQ(Result(key, 1), Scaled({7, 7}, 4, 3)) << "round 1's sum is still kept for the window";
}

TEST(KeyRoundBackupTest, PushesBeyondTheContributionsOfAHeldRoundAreLateToo) {
  // Window 1: worker 2, which never pushed, holds round 2 (it must have pushed round 1 first).
  KeyRound key(DataType::kFloat32, 1, 3, nullptr, ReduceOp::kSum, {}, 0, nullptr, 1, 1);
  Push(key, 0, 1, {1});
  ASSERT_TRUE(Push(key, 1, 1, {2}));
  EXPECT_FALSE(Push(key, 0, 2, {4}));
  EXPECT_FALSE(Push(key, 1, 2, {8})) << "round 2 has its contributions but waits for worker 2 to reach the window";
  EXPECT_TRUE(key.held_by_window());
  EXPECT_EQ(key.MissingWorkers(), std::set<int>({2}));
  EXPECT_FALSE(key.Add(2, 2).ok()) << "worker 2 cannot push round 2 before round 1";
}

TEST(KeyRoundBackupTest, TheWindowHoldsARoundUntilTheSlowestWorkerIsWithinIt) {
  KeyRound key(DataType::kFloat32, 1, 3, nullptr, ReduceOp::kSum, {}, 0, nullptr, 1, 2);
  for (uint32_t round = 1; round <= 2; ++round) {
    Push(key, 0, round, {float(round)});
    ASSERT_TRUE(Push(key, 1, round, {10.f * round})) << round;
  }
  // Completing round 3 would reuse round 0's slot, fine; but worker 2 has pushed nothing: it is 3 behind.
  Push(key, 0, 3, {3});
  EXPECT_FALSE(Push(key, 1, 3, {30}));
  EXPECT_TRUE(key.held_by_window());
  EXPECT_EQ(key.completed_round(), 2u);
  EXPECT_EQ(key.MissingWorkers(), std::set<int>({2}));
  EXPECT_TRUE(key.WaitsOn({2})) << "a finished worker behind the window holds the round for good";
  // Worker 2 catches up into the window: its late push of round 1 releases round 3.
  EXPECT_TRUE(Push(key, 2, 1, {1000}));
  EXPECT_EQ(key.completed_round(), 3u);
  EXPECT_EQ(Result(key, 3), Scaled({33}, 3, 2));
  EXPECT_EQ(Result(key, 1), Scaled({11}, 3, 2)) << "round 1's sum was kept for worker 2";
  EXPECT_EQ(Result(key, 2), Scaled({22}, 3, 2));
  EXPECT_FALSE(Push(key, 2, 2, {1000}));
  EXPECT_FALSE(Push(key, 2, 3, {1000}));
  EXPECT_EQ(key.dropped_pushes(), 3u);
  // Worker 2 contributes again once it is on time.
  Push(key, 2, 4, {400});
  EXPECT_TRUE(Push(key, 0, 4, {4}));
  EXPECT_EQ(Result(key, 4), Scaled({404}, 3, 2));
}

TEST(KeyRoundBackupTest, SixteenBitFloatsAreScaledInFloat32) {
  KeyRound key(DataType::kFloat16, 1, 2, nullptr, ReduceOp::kSum, {}, 0, nullptr, 1, 2);
  const uint16_t three = 0x4200;  // 3.0 in IEEE half
  std::memcpy(key.ReceiveBuffer(1), &three, 2);
  auto completed = key.Add(1, 1);
  ASSERT_TRUE(completed.ok() && completed.value());
  uint16_t six;
  std::memcpy(&six, key.result(1), 2);
  EXPECT_EQ(six, 0x4600) << "3 * 2/1 = 6.0 in IEEE half";
}

TEST(KeyRoundBackupTest, PushesOutOfOrderAreRefused) {
  KeyRound key(DataType::kFloat32, 1, 3, nullptr, ReduceOp::kSum, {}, 0, nullptr, 1, 2);
  std::memset(key.ReceiveBuffer(0), 0, 4);
  EXPECT_FALSE(key.Add(0, 2).ok()) << "a round ahead of the accumulating one";
  ASSERT_TRUE(key.Add(0, 1).ok());
  EXPECT_FALSE(key.Add(0, 1).ok()) << "the same round twice";
}

TEST(KeyRoundBackupTest, ARoundWaitsOnFinishedWorkersOnlyWhenTooFewAreLeft) {
  KeyRound key(DataType::kFloat32, 1, 4, nullptr, ReduceOp::kSum, {}, 0, nullptr, 1, 2);
  Push(key, 0, 1, {1});
  EXPECT_FALSE(key.WaitsOn({1})) << "workers 2 and 3 can still complete the round";
  EXPECT_TRUE(key.WaitsOn({1, 2}));
}

TEST(KeyRoundBackupTest, WithoutBackupsEveryPushIsSummed) {
  KeyRound key(DataType::kFloat32, 1, 3);
  EXPECT_EQ(key.contributions_needed(), 3);
  Push(key, 0, 1, {1});
  EXPECT_FALSE(Push(key, 1, 1, {2}));
  EXPECT_TRUE(Push(key, 2, 1, {4}));
  EXPECT_EQ(Result(key, 1), std::vector<float>({7}));
  EXPECT_FALSE(key.Retains(0));
  EXPECT_FALSE(key.Add(0, 1).ok()) << "a round already completed";
}

TEST(KeyRoundBackupTest, SharedBuffersKeepEachRoundsSumAtItsOwnOffset) {
  auto arena = SharedArena::Create(size_t(1) << 24);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  KeyRound key(DataType::kFloat32, 1024, 3, arena.value().get(), ReduceOp::kSum, {}, 0, nullptr, 1, 2);
  ASSERT_TRUE(key.shared());
  std::vector<float> ones(1024, 1), twos(1024, 2);
  Push(key, 0, 1, ones);
  ASSERT_TRUE(Push(key, 1, 1, twos));
  Push(key, 1, 2, twos);
  ASSERT_TRUE(Push(key, 0, 2, twos));
  EXPECT_NE(key.result_offset(1), key.result_offset(2));
  EXPECT_EQ(Result(key, 1), Scaled(std::vector<float>(1024, 3), 3, 2));
  EXPECT_EQ(Result(key, 2), Scaled(std::vector<float>(1024, 4), 3, 2));
}

}  // namespace
}  // namespace bps
