// How contributions to a tensor combine. Values are part of the wire format: append only.
#pragma once

#include <cstdint>
#include <string>

namespace bps {

enum class ReduceOp : uint8_t {
  kSum = 0,
  kMin = 1,
  kMax = 2,
  kProduct = 3,
  // Asynchronous training: the servers keep the tensor (a model's weights). A worker's first push sets it,
  // later pushes are changes added to it, and every reply is the tensor as it is then (cc/ps/async_store.h).
  kWeights = 4,
};

constexpr int kNumReduceOps = 5;

inline const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
    case ReduceOp::kWeights: return "weights";
  }
  return "unknown";
}

// The op named `name` ("sum", "min", "max", "product", "weights"); false if there is none.
inline bool ParseReduceOp(const std::string& name, ReduceOp* op) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (name == ReduceOpName(static_cast<ReduceOp>(i))) {
      *op = static_cast<ReduceOp>(i);
      return true;
    }
  }
  return false;
}

inline bool IsValidReduceOp(int value) { return value >= 0 && value < kNumReduceOps; }

}  // namespace bps
