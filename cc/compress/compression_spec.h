// How a tensor's gradients are compressed on the wire, as the user chose it (BYTEPS_COMPRESSION, or
// `compression=` in Python) and as every worker and server of the tensor must agree on.
#pragma once

#include <cstdint>
#include <string>

#include "cc/common/status.h"

namespace bps {

enum class CodecKind : uint8_t {
  kNone = 0,
  kOneBit = 1,   // the sign of each element and one scale (the mean magnitude): 32x fewer bytes
  kTopK = 2,     // the `ratio` of elements largest in magnitude, with their indices
  kRandomK = 3,  // `ratio` of the elements at indices every peer draws from the same seed: values only
};

struct CompressionSpec {
  CodecKind kind = CodecKind::kNone;
  float ratio = 1;             // kTopK, kRandomK: the fraction of elements sent, in (0, 1]
  float momentum = 0;          // worker side: Nesterov momentum folded in before compressing; 0: none
  bool error_feedback = true;  // keep what compression dropped and add it to the next round's push

  bool on() const { return kind != CodecKind::kNone; }
  // "onebit", "topk(ratio=0.01)", "onebit(momentum=0.9, no error feedback)"; "none" when off.
  std::string ToString() const;
  Status Validate() const;
  bool operator==(const CompressionSpec& o) const {
    return kind == o.kind && ratio == o.ratio && momentum == o.momentum && error_feedback == o.error_feedback;
  }
  bool operator!=(const CompressionSpec& o) const { return !(*this == o); }

  // Reads "none", "onebit", "topk:0.01", "randomk:0.05", each optionally followed by ",momentum=0.9" and
  // ",ef=0" (error feedback off), as BYTEPS_COMPRESSION and the Python API spell them.
  static StatusOr<CompressionSpec> Parse(const std::string& text);
};

}  // namespace bps
