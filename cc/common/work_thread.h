// A thread that runs posted tasks in order, and a periodic `tick` (for timeout checks) when idle.
// A caller may also run a task itself when the thread has nothing to do (RunHereOrPost): that saves the
// thread's wake-up, a context switch dearer than a short task. Either way, tasks and ticks run one at a
// time, in the order they were given.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace bps {

class WorkThread {
 public:
  explicit WorkThread(std::function<void()> tick = nullptr, double tick_seconds = 1.0)
      : tick_(std::move(tick)), tick_seconds_(tick_seconds), thread_([this] { Loop(); }) {}
  ~WorkThread() { Stop(); }

  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    if (waiting_) cv_.notify_one();  // a busy thread finds it when its current tasks are done
  }

  // Runs `task` on the calling thread if nothing is queued or running, else posts it.
  void RunHereOrPost(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (running_ || !tasks_.empty()) {
        tasks_.push_back(std::move(task));
        if (waiting_) cv_.notify_one();
        return;
      }
      running_ = true;
    }
    task();
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    if (waiting_ && (stop_ || !tasks_.empty())) cv_.notify_one();  // what was posted meanwhile waited for us
  }

  // Runs what is queued, then joins.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      waiting_ = true;
      bool woke = cv_.wait_for(lock, std::chrono::duration<double>(tick_seconds_),
                               [this] { return !running_ && (stop_ || !tasks_.empty()); });
      waiting_ = false;
      if (!woke) {
        if (running_) continue;  // a caller runs a task: the tick waits for the next quiet moment
        running_ = true;
        lock.unlock();
        if (tick_) tick_();
        lock.lock();
        running_ = false;
        continue;
      }
      if (tasks_.empty()) return;  // stopping, and drained
      std::deque<std::function<void()>> batch;  // all that is queued, for one wake-up
      batch.swap(tasks_);
      running_ = true;
      lock.unlock();
      for (auto& task : batch) task();
      lock.lock();
      running_ = false;
    }
  }

  std::function<void()> tick_;
  double tick_seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  bool waiting_ = false;  // the thread sleeps on cv_
  bool running_ = false;  // a task or tick runs, on the thread or on a caller
  std::thread thread_;
};

}  // namespace bps
