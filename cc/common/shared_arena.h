// Memory a server shares with the worker processes on its host.
//
// Between processes of one host the fastest way to move a tensor is a plain memcpy into memory both can
// see: UCX's single-copy path (`cma`, process_vm_readv) pins every page and ran at 6.7-7.2 GB/s here,
// a warm memcpy at 16-19 GB/s. A server allocates its keys' buffers from a SharedArena; a worker on the
// same host maps the arena (SharedArenaView), copies its push into its receive buffer and copies the sum
// out, and only headers cross the transport.
//
// The arena is a memfd: it has no name to leak when a process dies. A peer opens it through
// /proc/<pid>/fd/<fd> (same user, same PID namespace); a random token in its first page tells a peer that
// it opened the right file, so a PID that means another process elsewhere fails cleanly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cc/common/status.h"

namespace bps {

class SharedArena {
 public:
  // Reserves `capacity` bytes of address space; memory is used only as blocks are written. `name` is the
  // file's name in /proc/<pid>/maps.
  static StatusOr<std::unique_ptr<SharedArena>> Create(size_t capacity, const char* name = "bps_tf_server");
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  struct Block {
    char* data;
    uint64_t offset;  // where a view finds it
  };
  // A page-aligned block of at least `bytes` (>= 1), or nothing when the arena is full. Thread-safe.
  // Blocks live until discarded, or as long as the arena.
  std::optional<Block> Allocate(size_t bytes);
  // The same with the block's address a multiple of `alignment` (a power of two).
  std::optional<Block> AllocateAligned(size_t bytes, size_t alignment);
  // Gives the memory of a block of `bytes` (as allocated) back to the system. Its addresses are never
  // handed out again, so a late write by a peer that still holds the offset (a worker that was frozen while
  // the server dropped the round) lands in no live block. Thread-safe.
  void Discard(const Block& block, size_t bytes);

  // What a peer passes to SharedArenaView::Open.
  const std::string& locator() const { return locator_; }
  // Where [data, data + bytes) lies for a peer (the offset SharedArenaView::At takes), if it lies wholly
  // in this arena and the arena is still shared.
  std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const;
  // Whether `data` is in this arena's reservation (shared or made private).
  bool Holds(const void* data) const;
  // In a child process forked from the owner: the arena becomes this process's own, at the same addresses,
  // so that the child's writes never reach its parent: the child reads the file's pages until it writes
  // them (a page its parent changes later changes for the child too, unless the child wrote it first).
  // The child allocates nothing more from it (Allocate says it is full; the reservation past the allocated
  // part is left inaccessible, which costs no memory however the system counts it). Peers' views see the
  // parent's memory still; OffsetOf finds nothing from then on. Not thread-safe: call with no other
  // thread using the arena (a fork handler).
  void MakePrivate();

 private:
  SharedArena(int fd, char* base, size_t capacity, std::string locator);

  const int fd_;
  char* const base_;
  const size_t capacity_;
  const std::string locator_;
  std::mutex mu_;
  size_t used_;
  bool private_ = false;
};

// Another process's SharedArena, mapped into this one.
class SharedArenaView {
 public:
  // Runs `hook(base, size)` (process-wide; null: nothing) just before any view is unmapped, so that whoever
  // registered parts of the mapping elsewhere (a GPU driver's pinning) lets them go first. Set once by the
  // code that registers; this file knows nothing of who that is.
  static void SetUnmapHook(std::function<void(char* base, size_t size)> hook);

  static StatusOr<std::unique_ptr<SharedArenaView>> Open(const std::string& locator);
  ~SharedArenaView();
  SharedArenaView(const SharedArenaView&) = delete;
  SharedArenaView& operator=(const SharedArenaView&) = delete;

  // The block at `offset`, or nullptr when [offset, offset + bytes) is outside the arena.
  char* At(uint64_t offset, size_t bytes) const;

 private:
  SharedArenaView(char* base, size_t size) : base_(base), size_(size) {}
  char* const base_;
  const size_t size_;
};

}  // namespace bps
