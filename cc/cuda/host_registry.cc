#include "cc/cuda/host_registry.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "cc/common/logging.h"
#include "cc/common/shared_arena.h"

namespace bps {
namespace cuda {

HostRegistry& HostRegistry::OfProcess() {
  // Never destroyed: the unmap hook may run from destructors at exit.
  static HostRegistry* registry = new HostRegistry();
  return *registry;
}

HostRegistry::HostRegistry() : page_(static_cast<uintptr_t>(sysconf(_SC_PAGESIZE))) {
  SharedArenaView::SetUnmapHook([this](char* base, size_t size) { Unmapping(base, size); });
}

bool HostRegistry::Register(const void* data, size_t bytes, std::vector<const char*>* seams) {
  if (seams != nullptr) seams->clear();
  if (bytes == 0) return true;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page_ * page_;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + page_ - 1) / page_ * page_;
  std::lock_guard<std::mutex> lock(mu_);
  if (refused_) return false;
  // The gaps of [begin, end) between ranges registered already (registering a page twice fails).
  std::vector<std::pair<uintptr_t, uintptr_t>> gaps;
  uintptr_t at = begin;
  auto it = registered_.upper_bound(begin);
  if (it != registered_.begin()) {
    auto before = std::prev(it);
    if (before->second > at) at = before->second;
  }
  for (; at < end; ++it) {
    const uintptr_t next = it == registered_.end() ? end : std::min(it->first, end);
    if (next > at) gaps.emplace_back(at, next);
    if (it == registered_.end()) break;
    at = std::max(at, it->second);
  }
  for (const auto& gap : gaps) {
    auto known = foreign_.find(gap.first);
    if (known != foreign_.end() && known->second == gap.second) continue;  // found pinned before
    cudaError_t error = cudaHostRegister(reinterpret_cast<void*>(gap.first), gap.second - gap.first,
                                         cudaHostRegisterPortable);
    if (error == cudaErrorHostMemoryAlreadyRegistered) {
      // Pinned by someone else (not ours to unregister); copies work either way, cut at its edges.
      cudaGetLastError();
      foreign_[gap.first] = gap.second;
      continue;
    }
    if (error != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it so that the next CUDA call does not report it
      refused_ = true;
      BPS_LOG(Warning) << "cudaHostRegister of a same-host server's shared memory failed ("
                       << cudaGetErrorString(error) << "): GPU tensors are copied through pinned staging instead "
                       << "(correct, slower)";
      return false;
    }
    registered_[gap.first] = gap.second;
  }
  if (seams != nullptr) {
    // Every edge of a range inside the copy: where ours begin, and where the foreign ones begin and end.
    const uintptr_t first = reinterpret_cast<uintptr_t>(data), last = first + bytes;
    std::vector<uintptr_t> edges;
    for (auto r = registered_.upper_bound(first); r != registered_.end() && r->first < last; ++r) {
      edges.push_back(r->first);
    }
    for (const auto& [from, to] : foreign_) {
      for (uintptr_t edge : {from, to}) {
        if (edge > first && edge < last) edges.push_back(edge);
      }
    }
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    for (uintptr_t edge : edges) seams->push_back(reinterpret_cast<const char*>(edge));
  }
  return true;
}

void HostRegistry::Unmapping(char* base, size_t size) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(base);
  const uintptr_t end = begin + size;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = registered_.lower_bound(begin); it != registered_.end() && it->first < end;) {
    // At exit CUDA may be gone already; then the mapping goes anyway.
    if (cudaHostUnregister(reinterpret_cast<void*>(it->first)) != cudaSuccess) cudaGetLastError();
    it = registered_.erase(it);
  }
  for (auto it = foreign_.lower_bound(begin); it != foreign_.end() && it->first < end;) it = foreign_.erase(it);
}

}  // namespace cuda
}  // namespace bps
