#include "cc/common/work_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <vector>

namespace bps {
namespace {

TEST(WorkThreadTest, AnIdleThreadLetsTheCallerRunTheTask) {
  WorkThread thread;
  std::thread::id ran_on;
  thread.RunHereOrPost([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// While the thread runs a task, what a caller gives it waits its turn: tasks run one at a time, in order.
TEST(WorkThreadTest, TasksGivenToABusyThreadRunAfterItsTaskInOrder) {
  WorkThread thread;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  auto task = [&](int i) {
    return [&, i] {
      if (running.fetch_add(1) != 0) overlapped = true;
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      }
      running.fetch_sub(1);
    };
  };
  thread.Post([&] {
    started.set_value();
    ASSERT_EQ(released.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  });
  started.get_future().wait();
  thread.RunHereOrPost(task(1));
  thread.Post(task(2));
  thread.RunHereOrPost(task(3));
  release.set_value();
  for (int i = 4; i < 200; ++i) (i % 2 ? thread.Post(task(i)) : thread.RunHereOrPost(task(i)));
  thread.Stop();
  std::vector<int> expected;
  for (int i = 1; i < 200; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected);
  EXPECT_FALSE(overlapped);
}

// A task a caller runs keeps the tick out until it is done.
TEST(WorkThreadTest, TheTickDoesNotRunDuringACallersTask) {
  std::atomic<bool> in_task{false};
  std::atomic<bool> overlapped{false};
  std::atomic<int> ticks{0};
  WorkThread thread(
      [&] {
        if (in_task) overlapped = true;
        ++ticks;
      },
      0.001);
  for (int i = 0; i < 50; ++i) {
    thread.RunHereOrPost([&] {
      in_task = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      in_task = false;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  thread.Stop();
  EXPECT_FALSE(overlapped);
  EXPECT_GT(ticks.load(), 0);
}

}  // namespace
}  // namespace bps
