// A thread that runs posted tasks in order, and a periodic `tick` (for timeout checks) when idle.
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
    cv_.notify_one();
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
      bool woke = cv_.wait_for(lock, std::chrono::duration<double>(tick_seconds_),
                               [this] { return stop_ || !tasks_.empty(); });
      if (!woke) {
        lock.unlock();
        if (tick_) tick_();
        lock.lock();
        continue;
      }
      if (tasks_.empty()) return;  // stopping, and drained
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::function<void()> tick_;
  double tick_seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bps
