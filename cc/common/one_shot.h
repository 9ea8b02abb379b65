// A value delivered once by one thread and awaited, with a timeout, by another.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

namespace bps {

template <typename T>
class OneShot {
 public:
  // Later calls are ignored: the first answer wins.
  void Set(T value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (value_) return;
    value_ = std::move(value);
    cv_.notify_all();
  }

  // The value, or nothing if `timeout_s` passed first.
  std::optional<T> Wait(double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return value_.has_value(); });
    return value_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;
};

}  // namespace bps
