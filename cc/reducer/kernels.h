// The summation loops for one instruction set. cpu_reducer.cc picks a set at run time, so the library runs on
// any x86-64 machine and still uses AVX2/F16C where they exist.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bps {

struct Kernels {
  const char* name;
  void (*add_float32)(float* acc, const float* src, size_t n);
  void (*add_float64)(double* acc, const double* src, size_t n);
  void (*add_uint32)(uint32_t* acc, const uint32_t* src, size_t n);
  void (*add_uint64)(uint64_t* acc, const uint64_t* src, size_t n);
  void (*store_float16)(float* acc, const uint16_t* src, size_t n);
  void (*add_float16)(float* acc, const uint16_t* src, size_t n);
  void (*load_float16)(uint16_t* dst, const float* acc, size_t n);
  void (*store_bfloat16)(float* acc, const uint16_t* src, size_t n);
  void (*add_bfloat16)(float* acc, const uint16_t* src, size_t n);
  void (*load_bfloat16)(uint16_t* dst, const float* acc, size_t n);
};

extern const Kernels kPortableKernels;  // baseline x86-64 (SSE2) loops, scalar float16 conversion
extern const Kernels kAvx2F16CKernels;  // AVX2 loops, F16C float16 conversion

}  // namespace bps
