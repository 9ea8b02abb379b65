// A worker's TensorFlow tensors in memory a server on its host can map, so that the server reads a tensor
// where it lies and writes the sum where the worker wants it: no copy into the server's arena and none
// out of it (4 memcpys of every tensor's bytes per round with two workers, the most of a same-host
// push_pull's CPU).
//
// TensorFlow takes its CPU memory through posix_memalign. bpslaunch preloads jemalloc and, ahead of it,
// bps_tf's router (cc/preload/aligned_routing.cc). This file makes a jemalloc arena whose memory comes
// from a SharedArena (jemalloc's extent hooks, its documented interface for where an arena's memory comes
// from) and has the router send aligned allocations of kMinBytes or more there; every other allocation
// stays as it was. jemalloc keeps the arena's freed blocks for reuse as it does its other arenas' (pages
// it purges are given back to the system: a hole punched in the file).
//
// Without jemalloc 5.3 and the router there is no heap, and pushes copy as before. A child forked from
// the process (multiprocessing) gets the heap as memory of its own (SharedArena::MakePrivate): it never
// writes into memory its parent or a server sees, and its jemalloc takes new blocks elsewhere. The arena
// keeps its metadata outside the heap, so the child's allocator state is its own; the child reads its
// parent's tensors lazily (one its parent changes after the fork may change for the child: TensorFlow is
// not meant to run in a forked child).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "cc/common/shared_arena.h"

namespace bps {

class ShareableHeap {
 public:
  // Aligned allocations (posix_memalign, aligned_alloc) of at least this many bytes come from the heap:
  // every region of TensorFlow's BFC allocator (2 MiB and more).
  static constexpr size_t kMinBytes = size_t(1) << 20;

  // The process's heap, installed by the first call; null where it cannot be (see above; why is logged
  // once). Thread-safe.
  static ShareableHeap* Get();

  // Where [data, data + bytes) lies in the heap for a server's view of it (SharedArenaView::At), if it
  // lies wholly in it.
  std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const { return arena_->OffsetOf(data, bytes); }
  // What a server passes to SharedArenaView::Open.
  const std::string& locator() const { return arena_->locator(); }

 private:
  // A jemalloc arena on a new SharedArena, aligned allocations routed to it; null and `why` where not.
  static ShareableHeap* Install(std::string* why);
  explicit ShareableHeap(SharedArena* arena) : arena_(arena) {}
  SharedArena* const arena_;  // never freed: jemalloc uses its memory until the process ends
};

}  // namespace bps
