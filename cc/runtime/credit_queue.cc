#include "cc/runtime/credit_queue.h"

namespace bps {

void CreditQueue::Add(ReadyPartition partition) { ready_.push(std::move(partition)); }

std::vector<ReadyPartition> CreditQueue::TakeStartable() {
  std::vector<ReadyPartition> startable;
  while (!ready_.empty()) {
    const ReadyPartition& top = ready_.top();
    bool fits = credit_bytes_ == 0 || in_flight_ + top.bytes <= credit_bytes_ || in_flight_ == 0;
    if (!fits) break;
    in_flight_ += top.bytes;
    startable.push_back(top);
    ready_.pop();
  }
  return startable;
}

}  // namespace bps
