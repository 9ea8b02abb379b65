// Conversions at the TensorFlow boundary: dtypes, shapes and statuses. Only cc/tf sees TensorFlow.
#pragma once

#include <string>
#include <vector>

#include "cc/common/dtype.h"
#include "cc/common/status.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.pb.h"

namespace bps {
namespace tf_adapter {

inline bool ToCoreDtype(tensorflow::DataType tf_type, DataType* out) {
  switch (tf_type) {
    case tensorflow::DT_HALF: *out = DataType::kFloat16; return true;
    case tensorflow::DT_BFLOAT16: *out = DataType::kBFloat16; return true;
    case tensorflow::DT_FLOAT: *out = DataType::kFloat32; return true;
    case tensorflow::DT_DOUBLE: *out = DataType::kFloat64; return true;
    case tensorflow::DT_INT32: *out = DataType::kInt32; return true;
    case tensorflow::DT_INT64: *out = DataType::kInt64; return true;
    default: return false;
  }
}

inline std::vector<int64_t> Shape(const tensorflow::Tensor& t) {
  std::vector<int64_t> dims;
  for (int i = 0; i < t.dims(); ++i) dims.push_back(t.dim_size(i));
  return dims;
}

inline absl::Status ToTfStatus(const Status& s) {
  if (s.ok()) return absl::OkStatus();
  switch (s.code()) {
    case Code::kInvalidArgument: return absl::InvalidArgumentError(s.message());
    case Code::kFailedPrecondition: return absl::FailedPreconditionError(s.message());
    case Code::kDeadlineExceeded: return absl::DeadlineExceededError(s.message());
    case Code::kUnavailable: return absl::UnavailableError(s.message());
    case Code::kAborted: return absl::AbortedError(s.message());
    case Code::kUnauthenticated: return absl::UnauthenticatedError(s.message());
    default: return absl::InternalError(s.message());
  }
}

}  // namespace tf_adapter
}  // namespace bps
