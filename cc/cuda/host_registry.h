// Host memory of other processes registered with CUDA, so that the GPU copies straight into and out of it:
// the blocks of same-host servers' shared arenas (cc/common/shared_arena.h) that this process's GPU pushes
// go to. An arena is a huge MAP_NORESERVE reservation and is never registered whole: each block's pages
// are registered the first time a copy touches them (once, not per step), and let go when the view of the
// arena is unmapped (SharedArenaView's unmap hook).
//
// A block the server discarded (its pages punched out) is never handed out again; its registration (and
// the pages it pins) stays until the view is unmapped: a leak bounded by the blocks a job ever used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace bps {
namespace cuda {

class HostRegistry {
 public:
  // The process's registry (installs the unmap hook the first time).
  static HostRegistry& OfProcess();

  // Whether the GPU can copy straight into or out of [data, data + bytes): its pages are registered now
  // (those that were not, registered here; pages that something else pinned are left to it). False if CUDA
  // refused, logged the first time; from then on every call says false, and callers copy through pinned
  // staging instead. `seams` (if given) gets the addresses inside the range where one registration ends and
  // another begins, in order: CUDA refuses a copy that spans two registrations, so callers cut copies there.
  bool Register(const void* data, size_t bytes, std::vector<const char*>* seams = nullptr);

 private:
  HostRegistry();
  // Unregisters what lies in [base, base + size), a mapping about to go.
  void Unmapping(char* base, size_t size);

  const uintptr_t page_;
  std::mutex mu_;
  std::map<uintptr_t, uintptr_t> registered_;  // begin -> end of each registered range, page-aligned
  std::map<uintptr_t, uintptr_t> foreign_;     // ranges found pinned by something else, likewise
  bool refused_ = false;
};

}  // namespace cuda
}  // namespace bps
