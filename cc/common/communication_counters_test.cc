#include "cc/common/communication_counters.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

// rounds_behind is what every gradient partition allows: a worker may skip a round only when the servers
// completed it for all of them.
TEST(CommunicationCountersTest, RoundsBehindIsTheFewestOverTheKeys) {
  CommunicationCounters counters;
  EXPECT_EQ(counters.Totals().rounds_behind, 0u);
  counters.Behind(1, 3);
  EXPECT_EQ(counters.Totals().rounds_behind, 3u);
  counters.Behind(2, 1);
  EXPECT_EQ(counters.Totals().rounds_behind, 1u);
  counters.Behind(2, 4);  // key 2's newer reply replaces its older one
  EXPECT_EQ(counters.Totals().rounds_behind, 3u);
  counters.Behind(1, 0);
  EXPECT_EQ(counters.Totals().rounds_behind, 0u);
  counters.Behind(1, 5);
  EXPECT_EQ(counters.Totals().rounds_behind, 4u);
}

TEST(CommunicationCountersTest, KeysEquallyFarBehindAreCountedApart) {
  CommunicationCounters counters;
  counters.Behind(1, 2);
  counters.Behind(2, 2);
  counters.Behind(1, 5);  // key 2 is still 2 behind
  EXPECT_EQ(counters.Totals().rounds_behind, 2u);
  counters.Behind(2, 6);
  EXPECT_EQ(counters.Totals().rounds_behind, 5u);
}

TEST(CommunicationCountersTest, ANewEngineForgetsTheRoundsBehind) {
  CommunicationCounters counters;
  counters.Behind(1, 3);
  counters.ForgetRoundsBehind();
  EXPECT_EQ(counters.Totals().rounds_behind, 0u);
  counters.Behind(2, 1);  // the old key 1 no longer holds the minimum
  EXPECT_EQ(counters.Totals().rounds_behind, 1u);
}

}  // namespace
}  // namespace bps
