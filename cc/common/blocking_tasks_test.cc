#include "cc/common/blocking_tasks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace bps {
namespace {

// A task that blocks does not hold up its caller; the tasks run in order, on another thread.
TEST(BlockingTasksTest, TasksRunInOrderOnAThreadOfTheirOwn) {
  BlockingTasks tasks;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<int> order;
  std::promise<std::thread::id> ran_on;
  tasks.Post([&] {
    ran_on.set_value(std::this_thread::get_id());
    released.wait_for(std::chrono::seconds(10));
    order.push_back(1);
  });
  tasks.Post([&] { order.push_back(2); });
  release.set_value();  // reached while the first task blocks
  tasks.Drain();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST(BlockingTasksTest, DrainRunsWhatIsQueuedAndLaterTasksStillRunElsewhere) {
  BlockingTasks tasks;
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) tasks.Post([&] { ran++; });
  tasks.Drain();
  EXPECT_EQ(ran.load(), 50);
  std::promise<std::thread::id> ran_on;
  tasks.Post([&] { ran_on.set_value(std::this_thread::get_id()); });
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST(BlockingTasksTest, AfterStopATaskRunsOnItsCaller) {
  BlockingTasks tasks;
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) tasks.Post([&] { ran++; });
  tasks.Stop();
  EXPECT_EQ(ran.load(), 10);
  std::thread::id ran_on;
  tasks.Post([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace bps
