#include "cc/common/stopped_process_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace bps {
namespace {

TEST(StoppedProcessWatchTest, RunningProcessWasNotStopped) {
  StoppedProcessWatch watch(/*timeout_s=*/10);
  EXPECT_FALSE(watch.JustStopped(NowSeconds()));
}

TEST(StoppedProcessWatchTest, GapLongerThanHalfTheTimeoutIsAStop) {
  StoppedProcessWatch watch(/*timeout_s=*/10);
  const double now = NowSeconds();
  EXPECT_FALSE(watch.JustStopped(now + 4)) << "under half the timeout is a slow tick, not a stop";
  EXPECT_TRUE(watch.JustStopped(now + 6));
}

TEST(StoppedProcessWatchTest, WakingFromAStopIsRememberedForTheTimeout) {
  StoppedProcessWatch watch(/*timeout_s=*/2);
  watch.NoteAlive(NowSeconds() - 5);  // as if the last note was taken 5 s ago: the next tick sees a gap
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(watch.JustStopped(NowSeconds())) << "ticking again, but woke less than the timeout ago";
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(watch.JustStopped(NowSeconds())) << "the wake is older than the timeout";
}

}  // namespace
}  // namespace bps
