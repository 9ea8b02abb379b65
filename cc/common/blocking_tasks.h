// A thread for tasks that block for a while (a GPU copy waited for), so that the thread handing them over
// goes on meanwhile. Tasks run in order, except that one posted while Drain() joins the thread may start on
// a new thread before the old one has finished. The thread starts on first use; once stopped, a task runs
// on its caller: none is ever dropped.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "cc/common/work_thread.h"

namespace bps {

class BlockingTasks {
 public:
  BlockingTasks() = default;
  ~BlockingTasks() { Stop(); }
  BlockingTasks(const BlockingTasks&) = delete;
  BlockingTasks& operator=(const BlockingTasks&) = delete;

  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopped_) {
        if (!thread_) thread_ = std::make_unique<WorkThread>();
        thread_->Post(std::move(task));
        return;
      }
    }
    task();
  }

  // Runs what is queued, then joins the thread; a later task starts a new one.
  void Drain() { Join(/*for_good=*/false); }
  // Runs what is queued, then joins the thread; a later task runs on its caller.
  void Stop() { Join(/*for_good=*/true); }

 private:
  void Join(bool for_good) {
    std::unique_ptr<WorkThread> thread;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = stopped_ || for_good;
      thread.swap(thread_);
    }
    if (thread) thread->Stop();
  }

  std::mutex mu_;
  std::unique_ptr<WorkThread> thread_;
  bool stopped_ = false;
};

}  // namespace bps
