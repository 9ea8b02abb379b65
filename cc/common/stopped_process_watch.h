// Tells whether this process was stopped (SIGSTOP, a paused machine) a moment ago: a thread notes the time
// every quarter second, so a stop shows as a gap between two notes. A peer that loses this process for most
// of `timeout_s` removes it; knowing that it was stopped (rather than that the peer failed) decides whether
// it may join again.
#pragma once

#include <algorithm>
#include <atomic>

#include "cc/common/clock.h"
#include "cc/common/work_thread.h"

namespace bps {

class StoppedProcessWatch {
 public:
  explicit StoppedProcessWatch(double timeout_s) : timeout_s_(timeout_s) {}

  // Whether this process was stopped just before `now` for longer than half the timeout, or woke from such
  // a stop less than the timeout ago. Whichever runs first after a stop, the watch or the caller, sees it.
  bool JustStopped(double now) const {
    const double last = last_alive_, woke = woke_at_;
    return now - last > gap() || (woke >= 0 && now - woke < timeout_s_);
  }

  // What the watch's thread does every quarter second (tests call it with times of their own).
  void NoteAlive(double now) {
    const double last = last_alive_.exchange(now);
    if (now - last > gap()) woke_at_ = now;
  }

 private:
  double gap() const { return std::max(1.0, timeout_s_ / 2); }

  const double timeout_s_;
  std::atomic<double> last_alive_{NowSeconds()};
  std::atomic<double> woke_at_{-1};
  // Declared last: it stops before the members it uses go.
  WorkThread ticks_{[this] { NoteAlive(NowSeconds()); }, 0.25};
};

}  // namespace bps
