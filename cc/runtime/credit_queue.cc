#include "cc/runtime/credit_queue.h"

#include <algorithm>
#include <utility>

namespace bps {

void CreditQueue::Add(ReadyPartition partition) {
  ready_.push_back(std::move(partition));
  std::push_heap(ready_.begin(), ready_.end(), Order());
}

std::vector<ReadyPartition> CreditQueue::TakeStartable() {
  std::vector<ReadyPartition> startable;
  while (!ready_.empty()) {
    const ReadyPartition& top = ready_.front();
    bool fits = credit_bytes_ == 0 || in_flight_ + top.bytes <= credit_bytes_ || in_flight_ == 0;
    if (!fits) break;
    in_flight_ += top.bytes;
    std::pop_heap(ready_.begin(), ready_.end(), Order());
    startable.push_back(std::move(ready_.back()));
    ready_.pop_back();
  }
  return startable;
}

}  // namespace bps
