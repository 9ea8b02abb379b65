#include "cc/common/process_set.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

TEST(ProcessSetTest, EmptySetHoldsEveryWorker) {
  EXPECT_TRUE(InProcessSet({}, 0));
  EXPECT_TRUE(InProcessSet({}, 7));
  EXPECT_TRUE(CheckInProcessSet({}, 3, "push_pull of 'w'").ok());
}

TEST(ProcessSetTest, ListedRanksOnly) {
  const std::vector<int32_t> evens = {0, 2, 4};
  EXPECT_TRUE(InProcessSet(evens, 2));
  EXPECT_FALSE(InProcessSet(evens, 1));
  EXPECT_FALSE(InProcessSet(evens, 5));
}

TEST(ProcessSetTest, OutsiderGetsAnErrorNamingWhatAndWho) {
  Status status = CheckInProcessSet({0, 2}, 1, "push_pull of 'w'");
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "push_pull of 'w': worker 1 is not in its process set");
}

}  // namespace
}  // namespace bps
