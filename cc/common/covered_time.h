// The length of the union of time intervals that are reported as they end: the time during which at least
// one of them was running (overlapping push_pulls count once).
#pragma once

#include <algorithm>
#include <deque>
#include <utility>

namespace bps {

class CoveredTime {
 public:
  // [begin, end] ran; `end` is no earlier than any earlier interval's end (clamped to it otherwise).
  void Add(double begin, double end) {
    if (!recent_.empty()) end = std::max(end, recent_.back().second);
    begin = std::min(begin, end);
    // The intervals that this one reaches back into are merged with it.
    while (!recent_.empty() && recent_.back().second >= begin) {
      begin = std::min(begin, recent_.back().first);
      total_ -= recent_.back().second - recent_.back().first;
      recent_.pop_back();
    }
    recent_.emplace_back(begin, end);
    total_ += end - begin;
    // An interval reaching back past this many disjoint ones would be counted twice where it overlaps the
    // forgotten ones; intervals here last at most a step's push_pull, so that does not happen.
    if (recent_.size() > kRemembered) recent_.pop_front();
  }

  double total() const { return total_; }

 private:
  static constexpr size_t kRemembered = 1024;
  std::deque<std::pair<double, double>> recent_;  // disjoint, in order
  double total_ = 0;
};

}  // namespace bps
