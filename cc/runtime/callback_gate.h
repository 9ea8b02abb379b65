// The way into an engine for the callbacks it hands its client. The client (the worker's connections, its
// requests in flight) outlives an engine in elastic jobs and across shutdown() and init(), so a callback
// may come after a shutdown that gave up waiting for it (a reply that came late, a send that failed long
// after): once the engine closes its gate, such a callback does nothing, and closing waits (up to a
// timeout) for those already running.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "cc/common/clock.h"

namespace bps {

class CallbackGate {
 public:
  // Held while a callback runs; false when the gate was closed.
  class Entry {
   public:
    explicit Entry(CallbackGate& gate) : gate_(gate) {
      gate_.inside_.fetch_add(1);  // before the check: Close() then waits for this callback
      open_ = !gate_.closed_.load();
    }
    ~Entry() { gate_.inside_.fetch_sub(1); }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    explicit operator bool() const { return open_; }

   private:
    CallbackGate& gate_;
    bool open_;
  };

  // No callback enters from now on; waits at most `timeout_s` for those inside to return. False if some
  // are still inside (a callback blocked in user code).
  bool Close(double timeout_s) {
    closed_.store(true);
    Deadline deadline(timeout_s);
    while (inside_.load() > 0) {
      if (deadline.expired()) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

  bool closed() const { return closed_.load(); }

 private:
  std::atomic<int> inside_{0};
  std::atomic<bool> closed_{false};
};

// `callback` behind `gate`: it runs only while the gate is open.
template <typename Callback>
auto Gated(const std::shared_ptr<CallbackGate>& gate, Callback callback) {
  return [gate, callback = std::move(callback)](auto&&... args) mutable {
    CallbackGate::Entry entry(*gate);
    if (entry) callback(std::forward<decltype(args)>(args)...);
  };
}

}  // namespace bps
