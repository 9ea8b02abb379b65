#include "cc/ps/fused_inboxes.h"

#include <new>
#include <utility>

namespace bps {

void* FusedInboxes::Allocate(PeerId from, size_t length) {
  try {
    std::vector<char> buffer(length);
    void* data = buffer.data();
    std::lock_guard<std::mutex> lock(mu_);
    buffers_[from].emplace(data, std::move(buffer));  // a moved vector keeps its storage
    return data;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

std::vector<char> FusedInboxes::Take(PeerId from, const void* payload) {
  std::lock_guard<std::mutex> lock(mu_);
  auto peer = buffers_.find(from);
  if (peer == buffers_.end() || payload == nullptr) return {};
  auto it = peer->second.find(payload);
  if (it == peer->second.end()) return {};
  std::vector<char> taken = std::move(it->second);
  peer->second.erase(it);
  if (peer->second.empty()) buffers_.erase(peer);
  return taken;
}

void FusedInboxes::Forget(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.erase(peer);
}

}  // namespace bps
