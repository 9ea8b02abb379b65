// How contributions to a tensor combine. Values are part of the wire format: append only.
#pragma once

#include <cstdint>

namespace bps {

enum class ReduceOp : uint8_t {
  kSum = 0,
  kMin = 1,
  kMax = 2,
  kProduct = 3,
};

constexpr int kNumReduceOps = 4;

inline const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
  }
  return "unknown";
}

inline bool IsValidReduceOp(int value) { return value >= 0 && value < kNumReduceOps; }

}  // namespace bps
