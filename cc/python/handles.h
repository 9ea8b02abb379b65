// Completion state of asynchronous push_pulls started from Python, looked up by integer handle. A small
// push_pull's Python call costs a few microseconds, so the table recycles its completions: starting one
// allocates nothing, and the engine's callback holds a plain pointer (a closure that fits in
// std::function's own storage).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

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

// A handle names a slot (its low 32 bits) and the slot's use (the high bits), so that a handle that was
// waited for already is unknown rather than another push_pull's.
class HandleTable {
 public:
  struct Added {
    int64_t handle;
    Completion* completion;  // alive until Remove(handle), which comes after its Set
  };

  Added Add() {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t index;
    if (free_.empty()) {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      index = free_.back();
      free_.pop_back();
    }
    Slot& slot = slots_[index];
    if (slot.completion == nullptr) slot.completion = std::make_shared<Completion>();
    slot.in_use = true;
    return {Handle(index, slot.use), slot.completion.get()};
  }

  std::shared_ptr<Completion> Get(int64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* slot = Find(handle);
    return slot == nullptr ? nullptr : slot->completion;
  }

  // After the completion's Set: its slot serves a later push_pull.
  void Remove(int64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* slot = Find(handle);
    if (slot == nullptr) return;
    slot->in_use = false;
    slot->use = (slot->use + 1) & 0x7fffffff;
    // Reused only when nobody else holds it (another thread waiting on the same handle keeps the old one).
    if (slot->completion.use_count() == 1) {
      slot->completion->done = false;
      slot->completion->status = Status::OK();
    } else {
      slot->completion.reset();
    }
    free_.push_back(static_cast<uint32_t>(slot - slots_.data()));
  }

 private:
  struct Slot {
    std::shared_ptr<Completion> completion;
    uint32_t use = 0;
    bool in_use = false;
  };

  static int64_t Handle(uint32_t index, uint32_t use) { return (static_cast<int64_t>(use) << 32) | index; }

  Slot* Find(int64_t handle) {
    if (handle < 0) return nullptr;
    const uint64_t index = static_cast<uint64_t>(handle) & 0xffffffffu;
    if (index >= slots_.size()) return nullptr;
    Slot& slot = slots_[index];
    if (!slot.in_use || Handle(static_cast<uint32_t>(index), slot.use) != handle) return nullptr;
    return &slot;
  }

  std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace bps
