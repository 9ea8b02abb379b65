// Where the payloads of fused messages (PUSH_MANY, PULL_REPLY_MANY) land until their message is handled,
// to be copied out member by member. Each payload has a buffer of its own: a transport may be receiving
// several payloads from one peer at once (UCX's rendezvous) before it hands over their messages.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "cc/transport/transport.h"

namespace bps {

class FusedInboxes {
 public:
  // A buffer of `length` bytes for a payload from `from`; null when there is no memory for it.
  void* Allocate(PeerId from, size_t length);
  // The buffer Allocate gave for `payload` from `from`, now the caller's; empty if there is none.
  std::vector<char> Take(PeerId from, const void* payload);
  // `peer` is gone: what it was sending is dropped.
  void Forget(PeerId peer);

 private:
  std::mutex mu_;
  std::map<PeerId, std::map<const void*, std::vector<char>>> buffers_;
};

}  // namespace bps
