// KeyRound with 16-bit floats, accumulated in float32: however the pushes of a round arrive (data, zeros,
// absent workers, in any order), its result is bit for bit that of the reducer's serial calls in arrival
// order, over rounds that reuse the same buffers, in shared memory or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cc/common/chunk_helpers.h"
#include "cc/common/shared_arena.h"
#include "cc/ps/key_round.h"
#include "cc/reducer/cpu_reducer.h"

namespace bps {
namespace {

enum class Kind { kData, kZeros, kAbsent };

struct Push {
  int rank;
  Kind kind;
};

std::vector<uint16_t> RandomHalves(size_t n, std::mt19937& gen) {
  std::vector<uint16_t> values(n);
  for (uint16_t& v : values) v = static_cast<uint16_t>(gen());  // every bit pattern: NaNs and infinities too
  return values;
}

// The result of `pushes` by the serial calls: the first data push stored (zeros in a sum: cleared), each
// later one combined, absent workers left out, then rounded once.
std::vector<uint16_t> Reference(DataType dtype, ReduceOp op, const std::vector<Push>& pushes,
                                const std::vector<std::vector<uint16_t>>& data, size_t n) {
  std::vector<float> acc(n + 1, 0.f);
  bool set = false;
  for (const Push& push : pushes) {
    if (push.kind == Kind::kData) {
      if (set) {
        CombineIntoAccumulator(op, dtype, acc.data(), data[push.rank].data(), n);
      } else {
        StoreToAccumulator(dtype, acc.data(), data[push.rank].data(), n);
      }
      set = true;
    } else if (push.kind == Kind::kZeros && !set) {
      set = true;  // acc is zeros
    }
  }
  std::vector<uint16_t> out(n + 1);
  LoadFromAccumulator(dtype, acc.data(), out.data(), n);
  out.resize(n);
  return out;
}

// Runs `pushes` as round `round` of `key` (made with `op`) and checks its result against Reference.
void ExpectRound(KeyRound& key, ReduceOp op, uint32_t round, const std::vector<Push>& pushes, std::mt19937& gen,
                 const std::string& what) {
  const size_t n = key.num_elements();
  std::vector<std::vector<uint16_t>> data(key.num_workers());
  for (size_t i = 0; i < pushes.size(); ++i) {
    const Push& push = pushes[i];
    StatusOr<bool> completed = false;
    if (push.kind == Kind::kData) {
      data[push.rank] = RandomHalves(n, gen);
      std::memcpy(key.ReceiveBuffer(push.rank), data[push.rank].data(), n * 2);
      completed = key.Add(push.rank, round);
    } else if (push.kind == Kind::kZeros) {
      completed = key.AddZeros(push.rank, round);
    } else {
      completed = key.AddAbsent(push.rank, round);
    }
    ASSERT_TRUE(completed.ok()) << what << ": " << completed.status().ToString();
    ASSERT_EQ(completed.value(), i + 1 == pushes.size()) << what << ": push " << i << " of " << pushes.size();
  }
  const std::vector<uint16_t> expected = Reference(key.dtype(), op, pushes, data, n);
  // NaN payloads are bytes too: a bitwise comparison checks them.
  ASSERT_EQ(0, std::memcmp(key.result(round), expected.data(), n * 2)) << what;
  ASSERT_FALSE(key.result_is_zero(round) && expected != std::vector<uint16_t>(n, 0)) << what;
}

// Every order of `workers` pushes in which ranks in `zeros` push zeros (sums) or are absent (other ops).
std::vector<std::vector<Push>> Orders(int workers, const std::vector<int>& zeros, ReduceOp op) {
  std::vector<int> ranks(workers);
  for (int r = 0; r < workers; ++r) ranks[r] = r;
  std::vector<std::vector<Push>> orders;
  do {
    std::vector<Push> order;
    for (int r : ranks) {
      const bool empty = std::find(zeros.begin(), zeros.end(), r) != zeros.end();
      order.push_back({r, !empty ? Kind::kData : op == ReduceOp::kSum ? Kind::kZeros : Kind::kAbsent});
    }
    orders.push_back(order);
  } while (std::next_permutation(ranks.begin(), ranks.end()));
  return orders;
}

TEST(KeyRoundWideTest, EveryOrderOfPushesGivesTheSerialCallsBytes) {
  std::mt19937 gen(7);
  ChunkHelpers helpers(2);
  // Odd sizes; the largest is split over the helpers and over several blocks of the fused calls.
  const size_t sizes[] = {1, 1001, 3 * (256 << 10) / 4 + 17};
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (int workers = 1; workers <= 4; ++workers) {
        for (const std::vector<int>& zeros : std::vector<std::vector<int>>{{}, {0}, {workers - 1}}) {
          if (!zeros.empty() && workers == 1) continue;
          for (size_t n : sizes) {
            if (n > 1001 && workers > 3) continue;  // enough: every order of 3 covers first, middle and last
            KeyRound key(dtype, n, workers, nullptr, op, {}, 0, &helpers);
            uint32_t round = 0;
            for (const std::vector<Push>& order : Orders(workers, zeros, op)) {
              const std::string what = std::string(DataTypeName(dtype)) + " " + ReduceOpName(op) + ", " +
                                       std::to_string(workers) + " workers, " + std::to_string(n) +
                                       " elements, round " + std::to_string(round + 1);
              ExpectRound(key, op, ++round, order, gen, what);
            }
          }
        }
      }
    }
  }
}

// A worker whose push waits to be combined gets no buffer for another push (one the server refuses anyway:
// a worker pushes again only after its round completes), so the waiting data stays as it was pushed.
TEST(KeyRoundWideTest, AWaitingPushKeepsItsBufferUntilTheRoundCompletes) {
  KeyRound key(DataType::kFloat16, 3, 2);
  const std::vector<uint16_t> one(3, 0x3C00), two(3, 0x4000);  // 1.0 and 2.0
  std::memcpy(key.ReceiveBuffer(0), one.data(), 6);
  ASSERT_TRUE(key.Add(0, 1).ok());
  EXPECT_EQ(key.ReceiveBuffer(0), nullptr) << "worker 0's round-1 push waits in its buffer";
  EXPECT_FALSE(key.Add(0, 2).ok()) << "a push of the next round before this one completes is refused";
  ASSERT_NE(key.ReceiveBuffer(1), nullptr);
  std::memcpy(key.ReceiveBuffer(1), two.data(), 6);
  auto completed = key.Add(1, 1);
  ASSERT_TRUE(completed.ok() && completed.value());
  const std::vector<uint16_t> three(3, 0x4200);
  EXPECT_EQ(0, std::memcmp(key.result(1), three.data(), 6)) << "1 + 2, with nothing of the refused push";
  EXPECT_NE(key.ReceiveBuffer(0), nullptr) << "the round completed: worker 0 may push again";
  EXPECT_EQ(key.result_sole_contributor(1), -1);
  EXPECT_FALSE(key.result_is_zero(1));
}

TEST(KeyRoundWideTest, SharedBuffersGiveTheSameBytes) {
  auto arena = SharedArena::Create(size_t(64) << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  std::mt19937 gen(11);
  KeyRound key(DataType::kFloat16, 100003, 2, arena.value().get(), ReduceOp::kSum);
  ASSERT_TRUE(key.shared());
  for (uint32_t round = 1; round <= 4; ++round) {
    const int first = static_cast<int>(round % 2);  // the workers take turns at pushing first
    ExpectRound(key, ReduceOp::kSum, round, {{first, Kind::kData}, {1 - first, Kind::kData}}, gen,
                "round " + std::to_string(round));
  }
}

}  // namespace
}  // namespace bps
