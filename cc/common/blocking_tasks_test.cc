#include "cc/common/blocking_tasks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace bps {
namespace {

// Two tasks that each wait for the other finish only if they run at once, on different threads.
TEST(BlockingTasksTest, TasksRunAtOnceOnThreadsOtherThanTheCallers) {
  BlockingTasks tasks(2);
  std::promise<void> first_started, second_started;
  std::shared_future<void> first = first_started.get_future().share();
  std::shared_future<void> second = second_started.get_future().share();
  std::promise<std::thread::id> ran_on;
  std::atomic<int> met{0};
  tasks.Post([&] {
    first_started.set_value();
    if (second.wait_for(std::chrono::seconds(10)) == std::future_status::ready) met++;
    ran_on.set_value(std::this_thread::get_id());
  });
  tasks.Post([&] {
    second_started.set_value();
    if (first.wait_for(std::chrono::seconds(10)) == std::future_status::ready) met++;
  });
  tasks.Drain();
  EXPECT_EQ(met.load(), 2);
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST(BlockingTasksTest, DrainRunsWhatIsQueuedAndLaterTasksStillRunElsewhere) {
  BlockingTasks tasks(3);
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) tasks.Post([&] { ran++; });
  tasks.Drain();
  EXPECT_EQ(ran.load(), 50);
  std::promise<std::thread::id> ran_on;
  tasks.Post([&] { ran_on.set_value(std::this_thread::get_id()); });
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST(BlockingTasksTest, AfterStopATaskRunsOnItsCaller) {
  BlockingTasks tasks(2);
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
