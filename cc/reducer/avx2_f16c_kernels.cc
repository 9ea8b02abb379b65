// Kernels for CPUs with AVX2 and F16C (Intel Haswell, AMD Excavator and later). Only the functions below are
// compiled for AVX2, through the target attribute, so the rest of the binary still runs on any x86-64 CPU.
#include <immintrin.h>

#include <cstring>

#include "cc/reducer/kernels.h"
#include "cc/reducer/loops.h"

#define BPS_AVX2_F16C __attribute__((target("avx2,f16c")))

namespace bps {
namespace {

template <typename T>
BPS_AVX2_F16C void Add(T* __restrict acc, const T* __restrict src, size_t n) {
  loops::Add(acc, src, n);
}

BPS_AVX2_F16C void StoreBFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  loops::StoreBFloat16(acc, src, n);
}

BPS_AVX2_F16C void AddBFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  loops::AddBFloat16(acc, src, n);
}

BPS_AVX2_F16C void LoadBFloat16(uint16_t* __restrict dst, const float* __restrict acc, size_t n) {
  loops::LoadBFloat16(dst, acc, n);
}

// The float16 kernels work on 8 lanes. They run the last n % 8 elements through zero-padded copies, so those
// take the same instructions as the rest.
constexpr size_t kLanes = 8;

template <typename Dst, typename Src>
void RunOnPaddedTail(void (*kernel)(Dst*, const Src*, size_t), Dst* dst, const Src* src, size_t count) {
  Dst dst_lanes[kLanes] = {};
  Src src_lanes[kLanes] = {};
  std::memcpy(dst_lanes, dst, count * sizeof(Dst));
  std::memcpy(src_lanes, src, count * sizeof(Src));
  kernel(dst_lanes, src_lanes, kLanes);
  std::memcpy(dst, dst_lanes, count * sizeof(Dst));
}

BPS_AVX2_F16C inline __m256 LoadHalves(const uint16_t* src) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
}

BPS_AVX2_F16C void StoreFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm256_storeu_ps(acc + i, LoadHalves(src + i));
  if (i < n) RunOnPaddedTail(StoreFloat16, acc + i, src + i, n - i);
}

BPS_AVX2_F16C void AddFloat16(float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), LoadHalves(src + i)));
  }
  if (i < n) RunOnPaddedTail(AddFloat16, acc + i, src + i, n - i);
}

BPS_AVX2_F16C void LoadFloat16(uint16_t* __restrict dst, const float* __restrict acc, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    // The rounding mode is in the instruction, so the thread's MXCSR rounding setting does not matter.
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(acc + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), halves);
  }
  if (i < n) RunOnPaddedTail(LoadFloat16, dst + i, acc + i, n - i);
}

}  // namespace

const Kernels kAvx2F16CKernels = {
    "avx2_f16c",
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
