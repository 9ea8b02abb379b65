// Element-wise loops shared by the kernel sets. They are always inlined, so each copy is vectorised by the
// compiler for the instruction set of the function it lands in (baseline x86-64 or AVX2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cc/reducer/half.h"

#define BPS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace bps {
namespace loops {

template <typename T>
BPS_ALWAYS_INLINE void Add(T* __restrict acc, const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += src[i];
}

BPS_ALWAYS_INLINE void StoreBFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = BFloat16ToFloat(src[i]);
}

BPS_ALWAYS_INLINE void AddBFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += BFloat16ToFloat(src[i]);
}

BPS_ALWAYS_INLINE void LoadBFloat16(uint16_t* __restrict dst, const float* __restrict acc, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToBFloat16(acc[i]);
}

}  // namespace loops
}  // namespace bps
