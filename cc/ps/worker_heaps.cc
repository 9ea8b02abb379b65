#include "cc/ps/worker_heaps.h"

#include <utility>

#include "cc/common/logging.h"

namespace bps {

std::shared_ptr<const SharedArenaView> WorkerHeaps::Map(PeerId peer, const std::string& locator) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = heaps_.find(peer);
    if (it != heaps_.end() && it->second.locator == locator) return it->second.view;
  }
  // Opened outside the lock: mapping takes system calls, and one connection's pushes come one at a time.
  std::shared_ptr<const SharedArenaView> view;
  auto opened = SharedArenaView::Open(locator);
  if (opened.ok()) {
    view = std::move(opened.value());
  } else {
    BPS_LOG(Info) << "a worker's memory cannot be mapped (" << opened.status().message()
                  << "): its pushes are copied";
  }
  std::lock_guard<std::mutex> lock(mu_);
  heaps_[peer] = Heap{locator, view};
  return view;
}

void WorkerHeaps::Forget(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  heaps_.erase(peer);
}

}  // namespace bps
