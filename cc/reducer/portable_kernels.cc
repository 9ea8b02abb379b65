// Kernels for any x86-64 CPU: the compiler vectorises the loops with SSE2; float16 goes one value at a time.
#include "cc/reducer/half.h"
#include "cc/reducer/kernels.h"
#include "cc/reducer/loops.h"

namespace bps {
namespace {

template <typename T>
void Add(T* __restrict acc, const T* __restrict src, size_t n) {
  loops::Add(acc, src, n);
}

void StoreFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = HalfToFloat(src[i]);
}

void AddFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += HalfToFloat(src[i]);
}

void LoadFloat16(uint16_t* __restrict dst, const float* __restrict acc, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToHalf(acc[i]);
}

void StoreBFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  loops::StoreBFloat16(acc, src, n);
}

void AddBFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  loops::AddBFloat16(acc, src, n);
}

void LoadBFloat16(uint16_t* __restrict dst, const float* __restrict acc, size_t n) {
  loops::LoadBFloat16(dst, acc, n);
}

}  // namespace

const Kernels kPortableKernels = {
    "portable",
    Add<float>,
    Add<double>,
    Add<uint32_t>,
    Add<uint64_t>,
    StoreFloat16,
    AddFloat16,
    LoadFloat16,
    StoreBFloat16,
    AddBFloat16,
    LoadBFloat16,
};

}  // namespace bps
