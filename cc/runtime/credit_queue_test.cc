#include "cc/runtime/credit_queue.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

std::vector<uint64_t> Keys(const std::vector<ReadyPartition>& parts) {
  std::vector<uint64_t> keys;
  for (const auto& p : parts) keys.push_back(p.key);
  return keys;
}

TEST(CreditQueueTest, HigherPriorityFirstThenLowerKey) {
  CreditQueue queue(0);
  queue.Add({0, 5, 10, nullptr});
  queue.Add({2, 9, 10, nullptr});
  queue.Add({2, 3, 10, nullptr});
  queue.Add({-1, 1, 10, nullptr});
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{3, 9, 5, 1}));
}

TEST(CreditQueueTest, CreditBoundsBytesInFlight) {
  CreditQueue queue(25);
  for (uint64_t k = 0; k < 5; ++k) queue.Add({0, k, 10, nullptr});
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(queue.in_flight(), 20u);
  EXPECT_TRUE(queue.TakeStartable().empty());
  queue.Release(10);
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{2}));
  queue.Release(10);
  queue.Release(10);
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{3, 4}));
}

TEST(CreditQueueTest, OversizedPartitionStartsWhenAlone) {
  CreditQueue queue(8);
  queue.Add({0, 1, 100, nullptr});
  queue.Add({0, 2, 4, nullptr});
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{1}));
  queue.Release(100);
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{2}));
}

TEST(CreditQueueTest, LateHighPriorityOvertakesWaitingWork) {
  CreditQueue queue(10);
  queue.Add({0, 1, 10, nullptr});
  queue.Add({0, 2, 10, nullptr});
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{1}));
  queue.Add({5, 7, 10, nullptr});
  queue.Release(10);
  EXPECT_EQ(Keys(queue.TakeStartable()), (std::vector<uint64_t>{7}));
}

}  // namespace
}  // namespace bps
