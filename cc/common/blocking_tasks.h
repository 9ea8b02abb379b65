// A few threads for tasks that block for a while (a GPU copy waited for), so that the thread handing them
// over goes on and several such tasks run at once. The threads start on first use; tasks go to them in
// turn. Once stopped, a task runs on its caller: none is ever dropped.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cc/common/work_thread.h"

namespace bps {

class BlockingTasks {
 public:
  explicit BlockingTasks(int threads) : count_(threads) {}
  ~BlockingTasks() { Stop(); }
  BlockingTasks(const BlockingTasks&) = delete;
  BlockingTasks& operator=(const BlockingTasks&) = delete;

  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopped_) {
        if (threads_.empty()) {
          for (int i = 0; i < count_; ++i) threads_.push_back(std::make_unique<WorkThread>());
        }
        threads_[next_++ % threads_.size()]->Post(std::move(task));
        return;
      }
    }
    task();
  }

  // Runs what is queued, then joins the threads; a later task starts new ones.
  void Drain() { Join(/*for_good=*/false); }
  // Runs what is queued, then joins the threads; a later task runs on its caller.
  void Stop() { Join(/*for_good=*/true); }

 private:
  void Join(bool for_good) {
    std::vector<std::unique_ptr<WorkThread>> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = stopped_ || for_good;
      threads.swap(threads_);
    }
    for (auto& thread : threads) thread->Stop();
  }

  const int count_;
  std::mutex mu_;
  std::vector<std::unique_ptr<WorkThread>> threads_;
  size_t next_ = 0;
  bool stopped_ = false;
};

}  // namespace bps
