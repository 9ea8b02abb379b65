#include "cc/runtime/partition_compressor.h"

#include <algorithm>

#include "cc/compress/codec.h"

namespace bps {

PartitionCompressor::PartitionCompressor(const CompressionSpec& spec, uint64_t key, uint64_t count)
    : spec_(spec),
      key_(key),
      count_(count),
      momentum_(spec.momentum != 0 ? count : 0, 0.f),
      carried_(count, 0.f),
      push_(EncodedBytes(spec, count)),
      pull_(EncodedBytes(spec, count)) {}

void PartitionCompressor::Compress(const float* gradient, uint32_t round) {
  float* value = carried_.data();
  if (!spec_.error_feedback) std::fill(carried_.begin(), carried_.end(), 0.f);
  const float mu = spec_.momentum;
  if (mu != 0) {
    // Nesterov: m = mu * m + g, then send g + mu * m. Compressing the momentum-corrected gradient (and
    // leaving momentum out of the optimizer) is what keeps sparse or 1-bit updates converging.
    float* m = momentum_.data();
    for (uint64_t i = 0; i < count_; ++i) {
      m[i] = mu * m[i] + gradient[i];
      value[i] += gradient[i] + mu * m[i];
    }
  } else {
    for (uint64_t i = 0; i < count_; ++i) value[i] += gradient[i];
  }
  Encode(spec_, value, count_, PartitionSeed(key_, round), push_.data(), spec_.error_feedback);
}

Status PartitionCompressor::Decompress(float* output, uint32_t round) const {
  return Decode(spec_, pull_.data(), pull_.size(), count_, PartitionSeed(key_, round), output);
}

// Without error feedback `carried_` is scratch, rebuilt every round: only momentum is state then.
void PartitionCompressor::SaveState(uint64_t offset, float* momentum, float* carried) const {
  if (!momentum_.empty()) std::copy(momentum_.begin(), momentum_.end(), momentum + offset);
  if (spec_.error_feedback) std::copy(carried_.begin(), carried_.end(), carried + offset);
}

void PartitionCompressor::LoadState(uint64_t offset, const float* momentum, const float* carried) {
  if (!momentum_.empty()) std::copy(momentum + offset, momentum + offset + count_, momentum_.begin());
  if (spec_.error_feedback) std::copy(carried + offset, carried + offset + count_, carried_.begin());
}

}  // namespace bps
