#include "cc/common/kept_after_failure.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

// Counts its own destruction: the memory it stands for was let go.
struct Holder {
  explicit Holder(int* freed) : freed(freed) {}
  ~Holder() { ++*freed; }
  int* freed;
};

TEST(KeptAfterFailure, KeptUntilTheServersDrained) {
  KeptAfterFailure kept;
  int freed = 0;
  kept.Keep(std::make_shared<Holder>(&freed), 100);
  kept.Keep(std::make_shared<Holder>(&freed), 28);
  EXPECT_EQ(kept.bytes(), 128u);
  EXPECT_EQ(freed, 0);
  kept.ServersDrained();
  EXPECT_EQ(freed, 2);
  EXPECT_EQ(kept.bytes(), 0u);
  kept.Keep(std::make_shared<Holder>(&freed), 7);  // a later failure waits for a later drain
  EXPECT_EQ(freed, 2);
  kept.ServersDrained();
  EXPECT_EQ(freed, 3);
}

TEST(KeptAfterFailure, NothingGoesOnceAServerWasLost) {
  KeptAfterFailure kept;
  int freed = 0;
  kept.Keep(std::make_shared<Holder>(&freed), 100);
  kept.KeepForever();
  kept.Keep(std::make_shared<Holder>(&freed), 50);  // the lost server's round may be the one that failed
  kept.ServersDrained();
  EXPECT_EQ(freed, 0);
  EXPECT_EQ(kept.bytes(), 150u);
}

}  // namespace
}  // namespace bps
