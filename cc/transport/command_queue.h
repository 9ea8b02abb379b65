// Work handed to a transport's one thread by other threads: a queue and an eventfd that wakes the thread's
// poll when something is queued. Only the owning thread runs the queued work.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "cc/common/status.h"

namespace bps {

class CommandQueue {
 public:
  CommandQueue() : wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~CommandQueue() {
    if (wake_fd_ >= 0) close(wake_fd_);
  }
  CommandQueue(const CommandQueue&) = delete;
  CommandQueue& operator=(const CommandQueue&) = delete;

  // Readable when work is queued: the owning thread polls it.
  int wake_fd() const { return wake_fd_; }

  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      commands_.push_back(std::move(fn));
    }
    uint64_t one = 1;
    ssize_t unused = write(wake_fd_, &one, sizeof(one));
    (void)unused;  // the counter cannot overflow in practice; a missed wake-up costs one poll timeout
  }

  // Runs fn on the owning thread and waits for its result, at most a minute. fn must capture by value:
  // after a timeout the caller is gone while fn may still run. `owner` names the thread in the error.
  Status RunOnThread(std::function<Status()> fn, const std::string& owner) {
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> result = done->get_future();
    Post([fn = std::move(fn), done] { done->set_value(fn()); });
    if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      return Internal(owner + " did not answer within 60 s");
    }
    return result.get();
  }

  // On the owning thread: runs what is queued (and clears the wake-up).
  void RunAll() {
    uint64_t drained;
    ssize_t unused = read(wake_fd_, &drained, sizeof(drained));
    (void)unused;  // nothing to drain is fine
    std::deque<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(commands_);
    }
    for (auto& fn : batch) fn();
  }

  bool empty() {
    std::lock_guard<std::mutex> lock(mu_);
    return commands_.empty();
  }

 private:
  const int wake_fd_;
  std::mutex mu_;
  std::deque<std::function<void()>> commands_;
};

}  // namespace bps
