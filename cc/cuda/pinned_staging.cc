#include "cc/cuda/pinned_staging.h"

#include "cc/cuda/cuda_status.h"

namespace bps {
namespace cuda {

PinnedStaging::~PinnedStaging() {
  for (auto& entry : buffers_) cudaFreeHost(entry.second.data);
}

StatusOr<void*> PinnedStaging::Get(const std::string& name, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer& buffer = buffers_[name];
  if (buffer.bytes >= bytes && buffer.data != nullptr) return buffer.data;
  if (buffer.data != nullptr) {
    cudaFreeHost(buffer.data);
    total_bytes_ -= buffer.bytes;
  }
  buffer = Buffer();
  void* data = nullptr;
  // Portable: usable by copies from any device of the process.
  BPS_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&data, bytes > 0 ? bytes : 1, cudaHostAllocPortable));
  buffer.data = data;
  buffer.bytes = bytes;
  total_bytes_ += bytes;
  return data;
}

}  // namespace cuda
}  // namespace bps
