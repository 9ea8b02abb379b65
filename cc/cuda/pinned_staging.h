// Pinned host buffers that GPU tensors are staged through on their way to and from the servers:
// allocated once per tensor name and reused every step (pinned allocation is slow, pinned copies fast).
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "cc/common/status.h"

namespace bps {
namespace cuda {

class PinnedStaging {
 public:
  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();

  // A pinned buffer of at least `bytes` for `name` (the same one on every call with that name).
  StatusOr<void*> Get(const std::string& name, size_t bytes);

  size_t total_bytes() const { return total_bytes_; }

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  std::mutex mu_;
  std::map<std::string, Buffer> buffers_;
  size_t total_bytes_ = 0;
};

}  // namespace cuda
}  // namespace bps
