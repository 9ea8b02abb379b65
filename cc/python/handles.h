// Completion state of asynchronous push_pulls started from Python, looked up by integer handle.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "cc/common/status.h"

namespace bps {

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;

  void Set(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    status = s;
    done = true;
    cv.notify_all();
  }
  bool Done() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }
  // True once done; waits at most `seconds`.
  bool WaitFor(double seconds) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done; });
  }
};

class HandleTable {
 public:
  int64_t Add(std::shared_ptr<Completion> c) {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t id = next_++;
    table_[id] = std::move(c);
    return id;
  }
  std::shared_ptr<Completion> Get(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(id);
    return it == table_.end() ? nullptr : it->second;
  }
  void Remove(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    table_.erase(id);
  }

 private:
  std::mutex mu_;
  std::map<int64_t, std::shared_ptr<Completion>> table_;
  int64_t next_ = 1;
};

}  // namespace bps
