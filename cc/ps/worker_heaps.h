// A server's views of the shareable heaps (cc/common/shareable_heap.h) of the workers on its host, one per
// connection: a push in place names offsets in its worker's heap, which the server reads and writes there.
// A view is opened the first time a connection names its heap and kept until the connection goes; a heap
// that cannot be mapped (another PID namespace or user) is remembered as such. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cc/common/shared_arena.h"
#include "cc/transport/transport.h"

namespace bps {

class WorkerHeaps {
 public:
  // The view of the heap `locator` names for connection `peer` (opened now if new), or null where it
  // cannot be mapped. Holders keep the mapping alive after the connection goes.
  std::shared_ptr<const SharedArenaView> Map(PeerId peer, const std::string& locator);
  void Forget(PeerId peer);

 private:
  struct Heap {
    std::string locator;
    std::shared_ptr<const SharedArenaView> view;  // null: it cannot be mapped
  };
  std::mutex mu_;
  std::unordered_map<PeerId, Heap> heaps_;
};

}  // namespace bps
