#include "cc/common/covered_time.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

TEST(CoveredTimeTest, OverlappingIntervalsCountOnceAndGapsNotAtAll) {
  CoveredTime covered;
  covered.Add(1.0, 2.0);
  covered.Add(1.5, 3.0);  // overlaps the first: [1, 3]
  EXPECT_DOUBLE_EQ(covered.total(), 2.0);
  covered.Add(4.0, 5.0);  // after a gap
  EXPECT_DOUBLE_EQ(covered.total(), 3.0);
  covered.Add(3.5, 5.0);  // fills part of the gap: [1, 3] and [3.5, 5]
  EXPECT_DOUBLE_EQ(covered.total(), 3.5);
  covered.Add(0.0, 6.0);  // covers everything so far
  EXPECT_DOUBLE_EQ(covered.total(), 6.0);
}

TEST(CoveredTimeTest, ALateEndIsClampedToTheLatestAndNothingIsNegative) {
  CoveredTime covered;
  covered.Add(10.0, 12.0);
  covered.Add(11.0, 11.5);  // ended "before" the last one: counted as ending with it
  EXPECT_DOUBLE_EQ(covered.total(), 2.0);
  covered.Add(20.0, 19.0);  // begin after end: empty
  EXPECT_DOUBLE_EQ(covered.total(), 2.0);
}

TEST(CoveredTimeTest, ManyDisjointIntervalsAddUp) {
  CoveredTime covered;
  for (int i = 0; i < 5000; ++i) covered.Add(i, i + 0.5);
  EXPECT_DOUBLE_EQ(covered.total(), 2500.0);
}

}  // namespace
}  // namespace bps
