// A server's answer to one PUSH_MANY: each member push is parked and answered on its own key's summing thread,
// as a single PUSH is; the answers are collected here and leave as one PULL_REPLY_MANY once the last member is
// answered, so a worker's fused pushes cost one reply between them.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

class FusedReply {
 public:
  FusedReply(Transport* transport, PeerId peer, size_t members)
      : transport_(transport), peer_(peer), body_(), remaining_(members) {
    body_.members.resize(members);
    payloads_.resize(members);
  }

  // The answer of member `index` (a PULL_REPLY and its payload, copied); the last one sends the reply.
  void Set(size_t index, const Message& reply, const void* payload, size_t bytes);

 private:
  Transport* const transport_;
  const PeerId peer_;
  std::mutex mu_;
  FusedBody body_;
  std::vector<std::string> payloads_;
  size_t remaining_;
};

}  // namespace bps
