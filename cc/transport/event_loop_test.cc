#include "cc/transport/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace bps {
namespace {

// Work posted while the thread is about to sleep must wake it: the thread rings only then, so a lost ring
// would leave a task waiting for the whole (here long) epoll timeout. Tasks posted one at a time, each
// after the last ran, from several threads, must all run at once.
TEST(EventLoopTest, WorkPostedAsTheThreadFallsAsleepWakesIt) {
  EventLoop loop("the test's thread");
  ASSERT_TRUE(loop.Start([&loop] {
    epoll_event events[4];
    while (true) {
      loop.RunPosted();
      if (!loop.running()) return;
      loop.Wait(events, 4, 30000);
    }
  }).ok());
  std::atomic<int> ran{0};
  auto ping_pong = [&](int times) {
    for (int i = 0; i < times; ++i) {
      std::promise<void> done;
      loop.Post([&done, &ran] {
        ++ran;
        done.set_value();
      });
      // A lost wake-up stalls here for the loop's 30 s timeout.
      ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready) << "task " << i;
    }
  };
  std::thread a(ping_pong, 3000), b(ping_pong, 3000);
  ping_pong(3000);
  a.join();
  b.join();
  EXPECT_EQ(ran.load(), 9000);
  EXPECT_TRUE(loop.Stop([&loop] { loop.Exit(); }));
}

}  // namespace
}  // namespace bps
