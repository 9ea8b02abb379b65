// A worker's use of the shared memory (cc/common/shared_arena.h) of the servers on its own host: a push to
// such a server is copied straight into the server's arena, and its sum may be read back from there, so the
// data crosses in one memcpy instead of the transport. A server names its arena in a reply; this worker maps
// it then. Each successful reply says where this worker's next push of the key goes.
//
// Pushes in place: where this process has a shareable heap (cc/common/shareable_heap.h) and the caller
// keeps a push's memory until its server can no longer write there (after a failure too), a push whose
// input and output both lie in the heap names their offsets instead, and the server reads and writes
// them there (ShareMode::kInPlace). The heap is named to each server on this host with the first pushes;
// the server's reply says whether it maps it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/chunk_helpers.h"
#include "cc/common/shareable_heap.h"
#include "cc/common/shared_arena.h"
#include "cc/common/status.h"
#include "cc/ps/message.h"

namespace bps {

// Given with a push_pull by a caller that can keep its input and output: null, it cannot (its pushes never go
// in place); else set once any of its pushes went in place, and the caller must then keep both (unused)
// after a failure, since a same-host server that is slow, or completes a round after this worker gave up
// on it, may still write there.
using InPlaceMark = std::shared_ptr<std::atomic<bool>>;

class SharedPushes {
 public:
  // How a push goes.
  struct Plan {
    ShareMode share = ShareMode::kNone;
    char* destination = nullptr;  // where to copy the pushed bytes; null: they go through the transport
    uint64_t in_place_input = Message::kNoOffset;  // kInPlace: the offsets of input and output in the heap
    uint64_t in_place_output = Message::kNoOffset;
    const std::string* heap = nullptr;  // the heap's locator, to name in the push (null: nothing to name)
  };

  // `enabled`: BYTEPS_SHARED_MEMORY; `in_place`: BYTEPS_IN_PLACE_PUSHES.
  SharedPushes(bool enabled, bool in_place);

  // Copies a push into its place in an arena (PlanPush's destination), or a sum out of it. A large copy is
  // split over a few threads: one thread's memcpy reaches a fraction of a many-core host's memory bandwidth.
  void Copy(void* destination, const void* source, size_t bytes);

  // The job's servers by rank: their names (for messages) and whether each is on this worker's host.
  void SetServers(std::vector<std::string> names, std::vector<bool> on_this_host);

  // Whether pushes to `server` may go through its shared memory (it is on this host, and its arena is not
  // known to be unusable).
  bool MayShare(int server);

  // How this worker's next push of `key` (`bytes` from `input`, or zeros where it is null; the sum into
  // `output`) to `server` goes. An offset the server gave is good for one push only. `may_go_in_place`:
  // the caller keeps `input` and `output` after a failure (InPlaceMark).
  Plan PlanPush(int server, uint64_t key, size_t bytes, const void* input, void* output, bool may_go_in_place);
  // What `server` answered to a push that named this process's heap: whether it maps it.
  void TakeHeapAnswer(int server, bool mapped);

  // Takes what `reply` (to a push of `key` to `server`) says about shared memory: maps the arena it names,
  // notes where the next push goes, and copies a sum that stayed in the arena into `destination` (Copy).
  // With `sum_in_arena` it copies nothing and says where in the arena the sum is (null: not there), for a
  // mover to take it to what `destination` stands for.
  Status TakeReply(int server, uint64_t key, const Message& reply, void* destination, size_t bytes,
                   const char** sum_in_arena = nullptr);

  // The servers forgot their keys (the generation ended or broke): no offset holds any more.
  void ForgetOffsets();

 private:
  // A server's arena, once mapped; a view, once set, stays until this object goes.
  struct Arena {
    bool unusable = false;  // mapping failed (another PID namespace, permissions): use the transport
    std::unique_ptr<SharedArenaView> view;
    enum class Heap : uint8_t { kUnknown, kMapped, kUnmapped };
    Heap heap = Heap::kUnknown;  // whether the server maps this process's heap
  };

  // Helpers of one large copy: up to kCopyThreads threads in all, no more than the cores, the caller included.
  static constexpr int kCopyThreads = 4;
  static int CopyHelpers();

  const bool enabled_;
  ShareableHeap* const heap_;  // null: no pushes in place
  ChunkHelpers copy_helpers_;
  std::mutex mu_;
  std::vector<std::string> names_;
  std::vector<bool> on_this_host_;
  std::vector<Arena> arenas_;  // by server rank
  std::vector<Arena> retired_;  // of servers an elastic job no longer has, or that changed rank
  // key -> arena offset of this worker's next push, from the key's last reply. A key lives on one server,
  // and this process is its only pusher on this host (a per-machine key has one per machine).
  std::map<uint64_t, uint64_t> next_receive_;
};

}  // namespace bps
