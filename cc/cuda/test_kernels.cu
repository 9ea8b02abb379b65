#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cc/cuda/test_kernels.h"

namespace bps {
namespace cuda {
namespace {

__device__ double PatternValue(int rank, uint64_t i) { return static_cast<double>((i * 7 + rank * 3) % 17) - 8; }

template <typename T>
__device__ T FromDouble(double v) { return static_cast<T>(v); }
template <>
__device__ __half FromDouble<__half>(double v) { return __float2half(static_cast<float>(v)); }
template <>
__device__ __nv_bfloat16 FromDouble<__nv_bfloat16>(double v) { return __float2bfloat16(static_cast<float>(v)); }

template <typename T>
__device__ double ToDouble(T v) { return static_cast<double>(v); }
template <>
__device__ double ToDouble<__half>(__half v) { return __half2float(v); }
template <>
__device__ double ToDouble<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__global__ void Fill(T* data, uint64_t count, int rank) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count; i += uint64_t(gridDim.x) * blockDim.x) {
    data[i] = FromDouble<T>(PatternValue(rank, i));
  }
}

template <typename T>
__global__ void CountMismatches(const T* data, uint64_t count, int ranks, unsigned long long* mismatches) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count; i += uint64_t(gridDim.x) * blockDim.x) {
    double expected = 0;
    for (int r = 0; r < ranks; ++r) expected += PatternValue(r, i);
    if (ToDouble<T>(data[i]) != expected) ++local;
  }
  if (local) atomicAdd(mismatches, local);
}

// Holds its stream until the host sets *release (mapped pinned memory): a GPU that seems hung.
__global__ void SpinUntilReleased(const volatile int* release) {
  while (*release == 0) {
  }
}

constexpr int kThreads = 256;
constexpr int kBlocks = 1024;

template <template <typename> class Launcher, typename... Args>
cudaError_t Dispatch(DataType dtype, Args... args) {
  switch (dtype) {
    case DataType::kFloat16: return Launcher<__half>::Run(args...);
    case DataType::kBFloat16: return Launcher<__nv_bfloat16>::Run(args...);
    case DataType::kFloat32: return Launcher<float>::Run(args...);
    case DataType::kFloat64: return Launcher<double>::Run(args...);
    case DataType::kInt32: return Launcher<int32_t>::Run(args...);
    case DataType::kInt64: return Launcher<int64_t>::Run(args...);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
struct FillLauncher {
  static cudaError_t Run(void* data, uint64_t count, int rank, cudaStream_t stream) {
    Fill<T><<<kBlocks, kThreads, 0, stream>>>(static_cast<T*>(data), count, rank);
    return cudaGetLastError();
  }
};

template <typename T>
struct CheckLauncher {
  static cudaError_t Run(const void* data, uint64_t count, int ranks, unsigned long long* mismatches,
                         cudaStream_t stream) {
    CountMismatches<T><<<kBlocks, kThreads, 0, stream>>>(static_cast<const T*>(data), count, ranks, mismatches);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t LaunchFill(DataType dtype, void* data, uint64_t count, int rank, cudaStream_t stream) {
  return Dispatch<FillLauncher>(dtype, data, count, rank, stream);
}

cudaError_t LaunchCountMismatches(DataType dtype, const void* data, uint64_t count, int ranks,
                                  unsigned long long* mismatches, cudaStream_t stream) {
  return Dispatch<CheckLauncher>(dtype, data, count, ranks, mismatches, stream);
}

cudaError_t LaunchSpinUntilReleased(const volatile int* release, cudaStream_t stream) {
  SpinUntilReleased<<<1, 1, 0, stream>>>(release);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace bps
