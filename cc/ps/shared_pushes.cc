#include "cc/ps/shared_pushes.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "cc/common/config.h"
#include "cc/common/logging.h"

namespace bps {

SharedPushes::SharedPushes(bool enabled, bool in_place)
    : enabled_(enabled),
      heap_(enabled && in_place ? ShareableHeap::Get() : nullptr),
      copy_helpers_(enabled ? CopyHelpers() : 0) {}

void SharedPushes::SetServers(std::vector<std::string> names, std::vector<bool> on_this_host) {
  std::lock_guard<std::mutex> lock(mu_);
  if (names != names_) {
    // The servers changed (an elastic job): ranks name other servers now. The old views stay mapped.
    for (Arena& arena : arenas_) retired_.push_back(std::move(arena));
    arenas_.clear();
    next_receive_.clear();
  }
  arenas_.resize(names.size());
  names_ = std::move(names);
  on_this_host_ = std::move(on_this_host);
}

bool SharedPushes::MayShare(int server) {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_ && server < static_cast<int>(arenas_.size()) && on_this_host_[server] &&
         !arenas_[server].unusable;
}

SharedPushes::Plan SharedPushes::PlanPush(int server, uint64_t key, size_t bytes, const void* input, void* output,
                                          bool may_go_in_place) {
  Plan plan;
  const bool has_data = input != nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled_ || server >= static_cast<int>(arenas_.size()) || !on_this_host_[server]) return plan;
  const Arena& arena = arenas_[server];
  if (arena.unusable) return plan;
  if (heap_ != nullptr && arena.heap == Arena::Heap::kMapped && may_go_in_place && has_data) {
    auto from = heap_->OffsetOf(input, bytes);
    auto to = heap_->OffsetOf(output, bytes);
    if (from && to) {
      plan.share = ShareMode::kInPlace;
      plan.in_place_input = *from;
      plan.in_place_output = *to;
      plan.heap = &heap_->locator();
      return plan;
    }
  }
  if (heap_ != nullptr && arena.heap == Arena::Heap::kUnknown) plan.heap = &heap_->locator();
  plan.share = arena.view ? ShareMode::kMapped : ShareMode::kOffer;
  // An offset is good for one push: the server may make that buffer the round's running sum, and only a
  // successful reply says where the next push goes. After a failed round the next push takes the transport.
  auto it = next_receive_.find(key);
  if (it == next_receive_.end()) return plan;
  if (arena.view && has_data) plan.destination = arena.view->At(it->second, bytes);
  next_receive_.erase(it);
  return plan;
}

Status SharedPushes::TakeReply(int server, uint64_t key, const Message& reply, void* destination, size_t bytes,
                               const char** sum_in_arena) {
  if (sum_in_arena != nullptr) *sum_in_arena = nullptr;
  if (reply.shared_receive == Message::kNoOffset) return Status::OK();
  const SharedArenaView* view = nullptr;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    name = names_[server];
    Arena& arena = arenas_[server];
    if (!arena.view && !arena.unusable && !reply.text.empty()) {
      auto opened = SharedArenaView::Open(reply.text);
      if (opened.ok()) {
        arena.view = std::move(opened.value());
      } else {
        arena.unusable = true;
        BPS_LOG(Info) << name << " is on this host, but its shared memory cannot be mapped ("
                      << opened.status().message() << "): tensors go through the transport";
      }
    }
    view = arena.view.get();
    if (view != nullptr) next_receive_[key] = reply.shared_receive;
  }
  if (reply.shared_result == Message::kNoOffset) return Status::OK();
  const char* sum = view == nullptr ? nullptr : view->At(reply.shared_result, bytes);
  if (sum == nullptr) return Internal("the sum from " + name + " is not in its shared memory");
  if (sum_in_arena != nullptr) {
    *sum_in_arena = sum;
    return Status::OK();
  }
  Copy(destination, sum, bytes);
  return Status::OK();
}

int SharedPushes::CopyHelpers() { return std::min(DefaultSumThreads(), kCopyThreads) - 1; }

void SharedPushes::Copy(void* destination, const void* source, size_t bytes) {
  // Below 2 x 1 MB a copy stays on the calling thread: waking a helper costs more than it saves.
  constexpr size_t kGrainBytes = 1 << 20;
  constexpr size_t kAlignBytes = 4096;
  copy_helpers_.Run(bytes, kGrainBytes, kAlignBytes, [&](size_t begin, size_t end) {
    std::memcpy(static_cast<char*>(destination) + begin, static_cast<const char*>(source) + begin, end - begin);
  });
}

void SharedPushes::TakeHeapAnswer(int server, bool mapped) {
  std::lock_guard<std::mutex> lock(mu_);
  if (server >= static_cast<int>(arenas_.size())) return;
  arenas_[server].heap = mapped ? Arena::Heap::kMapped : Arena::Heap::kUnmapped;
}

void SharedPushes::ForgetOffsets() {
  std::lock_guard<std::mutex> lock(mu_);
  next_receive_.clear();
}

}  // namespace bps
