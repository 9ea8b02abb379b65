#include "cc/common/chunk_helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace bps {
namespace {

// The ranges one Run handed out, checked to cover [0, n) once each, aligned and at least `grain` long.
void ExpectCover(int helpers, size_t n, size_t grain, size_t align) {
  ChunkHelpers pool(helpers);
  std::mutex mu;
  std::vector<std::pair<size_t, size_t>> ranges;
  std::vector<int> hits(n, 0);
  pool.Run(n, grain, align, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) ++hits[i];  // disjoint ranges: no two threads touch one element
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(begin, end);
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "element " << i << " of " << n;
  std::sort(ranges.begin(), ranges.end());
  for (size_t r = 0; r < ranges.size(); ++r) {
    EXPECT_LT(ranges[r].first, ranges[r].second);
    EXPECT_EQ(ranges[r].first % align, 0u);
    if (r + 1 < ranges.size()) {
      EXPECT_GE(ranges[r].second - ranges[r].first, grain);
    }
  }
  if (n < 2 * std::max(grain, align) || helpers == 0) {
    EXPECT_LE(ranges.size(), 1u);
  }
}

TEST(ChunkHelpersTest, CoversEveryElementOnce) {
  for (int helpers : {0, 1, 3}) {
    for (size_t n : {0, 1, 7, 63, 64, 65, 1000, 4097, 100003}) {
      ExpectCover(helpers, n, /*grain=*/64, /*align=*/16);
      ExpectCover(helpers, n, /*grain=*/1, /*align=*/1);
    }
  }
}

TEST(ChunkHelpersTest, HelpersTakePartWhenIdle) {
  ChunkHelpers pool(2);
  std::mutex mu;
  std::set<std::thread::id> threads;
  // Chunks that take long enough for an idle helper to wake up and take some.
  for (int attempt = 0; attempt < 50 && threads.size() < 2; ++attempt) {
    pool.Run(64, 1, 1, [&](size_t, size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    });
  }
  EXPECT_GE(threads.size(), 2u);
}

// Callers on several threads at once (a server's summing threads share the helpers): each call's ranges
// are its own, and none waits forever on helpers that are busy with another call.
TEST(ChunkHelpersTest, ConcurrentCallers) {
  ChunkHelpers pool(2);
  constexpr size_t kN = 50000;
  std::vector<std::thread> callers;
  std::vector<std::vector<int>> data(4, std::vector<int>(kN, 0));
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        pool.Run(kN, 1000, 8, [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) data[c][i] += 1;
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < 4; ++c) {
    for (size_t i = 0; i < kN; ++i) ASSERT_EQ(data[c][i], 20) << "caller " << c << " element " << i;
  }
}

}  // namespace
}  // namespace bps
