// A worker's large allocations in memory a server on its host can map, so that the server reads a tensor
// where it lies and writes the sum where the worker wants it: no copy into the server's arena and none
// out of it (4 memcpys of every tensor's bytes per round with two workers, the most of a same-host
// push_pull's CPU).
//
// TensorFlow's CPU tensors come from its allocator, and that from malloc. jemalloc (which bpslaunch
// preloads) serves every block of opt.oversize_threshold bytes or more (8 MB by default) from an arena of
// its own; this file backs that arena with a SharedArena through jemalloc's extent hooks (its documented
// interface for where an arena's memory comes from), leaving every other allocation as it was. The
// arena's memory is taken once and kept by jemalloc for reuse; pages it purges are given back to the
// system (a hole punched in the file).
//
// Where the process's malloc is not jemalloc 5, or it refuses the hooks, there is no heap and pushes copy
// as before. A child forked from the process (multiprocessing) keeps its parent's allocations as a copy of
// its own (SharedArena::MakePrivate): it never writes into memory its parent or a server sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "cc/common/shared_arena.h"

namespace bps {

class ShareableHeap {
 public:
  // The process's heap, installed by the first call; null where it cannot be (see above; why is logged
  // once). Thread-safe.
  static ShareableHeap* Get();

  // Where [data, data + bytes) lies in the heap for a server's view of it (SharedArenaView::At), if it
  // lies wholly in it.
  std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const { return arena_->OffsetOf(data, bytes); }
  // What a server passes to SharedArenaView::Open.
  const std::string& locator() const { return arena_->locator(); }
  // Allocations of at least this many bytes come from the heap.
  size_t min_bytes() const { return min_bytes_; }

 private:
  // Backs jemalloc's arena for large blocks with a new SharedArena; null and `why` where it cannot.
  static ShareableHeap* Install(std::string* why);
  ShareableHeap(SharedArena* arena, size_t min_bytes) : arena_(arena), min_bytes_(min_bytes) {}
  SharedArena* const arena_;  // never freed: jemalloc uses its memory until the process ends
  const size_t min_bytes_;
};

}  // namespace bps
