// Test data shared by the multi-rank tests: small integers, exact in every dtype, different per rank, so
// sums across ranks can be checked exactly.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "cc/common/dtype.h"
#include "cc/reducer/half.h"

namespace bps {
namespace test_data {

inline double Value(int rank, uint64_t i) { return static_cast<double>((i * 7 + rank * 3) % 17) - 8; }

inline double SumOverRanks(int ranks, uint64_t i) {
  double sum = 0;
  for (int r = 0; r < ranks; ++r) sum += Value(r, i);
  return sum;
}

inline void Write(DataType dtype, double v, char* p) {
  switch (dtype) {
    case DataType::kFloat16: { uint16_t h = FloatToHalf(float(v)); std::memcpy(p, &h, 2); break; }
    case DataType::kBFloat16: { uint16_t h = FloatToBFloat16(float(v)); std::memcpy(p, &h, 2); break; }
    case DataType::kFloat32: { float f = float(v); std::memcpy(p, &f, 4); break; }
    case DataType::kFloat64: std::memcpy(p, &v, 8); break;
    case DataType::kInt32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
    case DataType::kInt64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
  }
}

inline double Read(DataType dtype, const char* p) {
  switch (dtype) {
    case DataType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); return HalfToFloat(h); }
    case DataType::kBFloat16: { uint16_t h; std::memcpy(&h, p, 2); return BFloat16ToFloat(h); }
    case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
    case DataType::kFloat64: { double d; std::memcpy(&d, p, 8); return d; }
    case DataType::kInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DataType::kInt64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
  }
  return 0;
}

// Rank `rank`'s n values of dtype, as bytes.
inline std::vector<char> Fill(DataType dtype, int rank, uint64_t n) {
  std::vector<char> bytes(n * DataTypeSize(dtype));
  for (uint64_t i = 0; i < n; ++i) Write(dtype, Value(rank, i), bytes.data() + i * DataTypeSize(dtype));
  return bytes;
}

// The index of the first element that is not the sum over `ranks`, or n if all are.
inline uint64_t FirstMismatch(DataType dtype, const std::vector<char>& bytes, int ranks, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    if (Read(dtype, bytes.data() + i * DataTypeSize(dtype)) != SumOverRanks(ranks, i)) return i;
  }
  return n;
}

constexpr DataType kAllTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                  DataType::kFloat64, DataType::kInt32,   DataType::kInt64};

}  // namespace test_data
}  // namespace bps
