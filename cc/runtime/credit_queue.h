// The one scheduling point of a worker: ready partitions start in priority order (higher first, ties by
// lower key) while the bytes being pushed stay within the credit window (BYTEPS_SCHEDULING_CREDIT).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace bps {

struct ReadyPartition {
  int priority = 0;
  uint64_t key = 0;
  size_t bytes = 0;
  std::function<void()> start;  // begins the partition's push
};

class CreditQueue {
 public:
  // credit_bytes == 0: no limit.
  explicit CreditQueue(size_t credit_bytes) : credit_bytes_(credit_bytes) {}

  void Add(ReadyPartition partition);

  // Removes and returns the partitions that may start now, in order. A partition larger than the whole
  // window still starts when nothing else is in flight, so nothing waits forever.
  std::vector<ReadyPartition> TakeStartable();

  // Drops every waiting partition (their operations were abandoned).
  void Clear() { ready_.clear(); }

  // A started partition finished: its bytes leave the window.
  void Release(size_t bytes) { in_flight_ -= bytes; }

  void set_credit_bytes(size_t credit_bytes) { credit_bytes_ = credit_bytes; }
  size_t in_flight() const { return in_flight_; }
  size_t waiting() const { return ready_.size(); }

 private:
  struct Order {
    bool operator()(const ReadyPartition& a, const ReadyPartition& b) const {
      if (a.priority != b.priority) return a.priority < b.priority;
      return a.key > b.key;
    }
  };
  size_t credit_bytes_;
  size_t in_flight_ = 0;
  // A heap (std::push_heap/pop_heap), not a std::priority_queue, whose top can only be copied: a copy of a
  // partition's start function is an allocation per partition.
  std::vector<ReadyPartition> ready_;
};

}  // namespace bps
