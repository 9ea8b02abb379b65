// What a compressed tensor carries from one round to the next, for checkpoints: the worker's momentum and
// error feedback, and the server's error feedback of the pulled sum. Element-wise over the whole tensor, so
// that a job resumed with other partitions (more servers, another BYTEPS_PARTITION_BYTES) takes it as well.
#pragma once

#include <string>
#include <vector>

#include "cc/common/status.h"
#include "cc/ps/message.h"

namespace bps {

struct CompressionState {
  TensorSpec spec;               // the tensor's, with its compression
  std::vector<float> momentum;   // spec.compression.momentum != 0: num_elements() floats, else none
  std::vector<float> carried;    // spec.compression.error_feedback: what this worker's encodings dropped
  // The server's residual, error feedback only, kept by the tensor's first contributor; empty elsewhere.
  std::vector<float> server_residual;

  // An empty state of `spec`'s sizes; `with_server` sizes the server's residual too (error feedback only).
  static CompressionState Empty(const TensorSpec& spec, bool with_server);

  std::string Encode() const;
  // Checks what it reads (a checkpoint file may be damaged or come from elsewhere): sizes that fit the spec.
  static StatusOr<CompressionState> Decode(const std::string& bytes);
};

}  // namespace bps
