// A worker's compression of one partition of a tensor, round after round. Nesterov momentum and the error
// feedback (what earlier encodings dropped) are state that lives from one round to the next, per partition.
#pragma once

#include <cstdint>
#include <vector>

#include "cc/common/status.h"
#include "cc/compress/compression_spec.h"

namespace bps {

class PartitionCompressor {
 public:
  PartitionCompressor(const CompressionSpec& spec, uint64_t key, uint64_t count);

  size_t encoded_bytes() const { return push_.size(); }
  // Folds `gradient[0, count)` into the momentum and the error feedback and encodes the result for `round`.
  void Compress(const float* gradient, uint32_t round);
  const char* encoded_push() const { return push_.data(); }
  // Where the server's encoded sum is received.
  char* encoded_sum() { return pull_.data(); }
  // Decodes the received sum of `round` into `output[0, count)`; an error if the server sent a malformed one.
  Status Decompress(float* output, uint32_t round) const;

  // The state between rounds (checkpoints), element-wise: this partition's part of a tensor-sized
  // `momentum` and `carried` (cc/runtime/compression_state.h), starting at the partition's `offset`.
  void SaveState(uint64_t offset, float* momentum, float* carried) const;
  void LoadState(uint64_t offset, const float* momentum, const float* carried);

 private:
  const CompressionSpec spec_;
  const uint64_t key_;
  const uint64_t count_;
  std::vector<float> momentum_;  // with momentum only
  std::vector<float> carried_;   // the value encoded; with error feedback, what the encoding dropped stays here
  std::vector<char> push_;
  std::vector<char> pull_;
};

}  // namespace bps
