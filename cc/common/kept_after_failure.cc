#include "cc/common/kept_after_failure.h"

#include <utility>

namespace bps {

KeptAfterFailure& KeptAfterFailure::OfProcess() {
  static auto* kept = new KeptAfterFailure();  // never destroyed: memory a server may write is never freed
  return *kept;
}

void KeptAfterFailure::Keep(std::shared_ptr<void> holder, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  kept_.push_back(Entry{std::move(holder), bytes});
  bytes_ += bytes;
}

void KeptAfterFailure::ServersDrained() {
  std::vector<Entry> released;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (forever_) return;
    released.swap(kept_);
    bytes_ = 0;
  }
  // The holders' memory is freed here, outside the lock (their owners' deleters may take locks of their own).
}

void KeptAfterFailure::KeepForever() {
  std::lock_guard<std::mutex> lock(mu_);
  forever_ = true;
}

uint64_t KeptAfterFailure::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace bps
