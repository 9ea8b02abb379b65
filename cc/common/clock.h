// Monotonic time in seconds, and deadlines for the timeouts every wait must have.
#pragma once

#include <chrono>

namespace bps {

inline double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

class Deadline {
 public:
  explicit Deadline(double timeout_s) : end_(NowSeconds() + timeout_s) {}
  bool expired() const { return NowSeconds() >= end_; }
  double remaining() const {
    double left = end_ - NowSeconds();
    return left > 0 ? left : 0;
  }

 private:
  double end_;
};

}  // namespace bps
