#include "cc/reducer/cpu_reducer.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "cc/common/logging.h"
#include "cc/reducer/cpu_reducer_internal.h"
#include "cc/reducer/half.h"
#include "cc/reducer/kernels.h"

namespace bps {
namespace {

std::atomic<bool> force_portable{false};

bool CpuHasAvx2AndF16C() {
  __builtin_cpu_init();  // harmless if done already; needed when called before static constructors ran
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

const Kernels& ActiveKernels() {
  static const bool fast_path_available = CpuHasAvx2AndF16C();
  const bool use_fast_path = fast_path_available && !force_portable.load(std::memory_order_relaxed);
  return use_fast_path ? kAvx2F16CKernels : kPortableKernels;
}

[[noreturn]] void DieOnInvalidType(DataType dtype) {
  BPS_LOG(Fatal) << "cpu reducer: invalid dtype " << static_cast<int>(dtype);
  __builtin_unreachable();  // the fatal log aborts
}

void Copy(DataType dtype, void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n * DataTypeSize(dtype));
}

}  // namespace

DataType AccumulatorType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16: return DataType::kFloat32;
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kInt32:
    case DataType::kInt64: return dtype;
  }
  DieOnInvalidType(dtype);
}

void StoreToAccumulator(DataType dtype, void* acc, const void* src, size_t n) {
  const Kernels& kernels = ActiveKernels();
  auto* acc_float = static_cast<float*>(acc);
  auto* src_16 = static_cast<const uint16_t*>(src);
  switch (dtype) {
    case DataType::kFloat16: return kernels.store_float16(acc_float, src_16, n);
    case DataType::kBFloat16: return kernels.store_bfloat16(acc_float, src_16, n);
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kInt32:
    case DataType::kInt64: return Copy(dtype, acc, src, n);
  }
  DieOnInvalidType(dtype);
}

void AddToAccumulator(DataType dtype, void* acc, const void* src, size_t n) {
  const Kernels& kernels = ActiveKernels();
  switch (dtype) {
    case DataType::kFloat16:
      return kernels.add_float16(static_cast<float*>(acc), static_cast<const uint16_t*>(src), n);
    case DataType::kBFloat16:
      return kernels.add_bfloat16(static_cast<float*>(acc), static_cast<const uint16_t*>(src), n);
    case DataType::kFloat32:
      return kernels.add_float32(static_cast<float*>(acc), static_cast<const float*>(src), n);
    case DataType::kFloat64:
      return kernels.add_float64(static_cast<double*>(acc), static_cast<const double*>(src), n);
    // Signed overflow is undefined behaviour; unsigned addition wraps, which is two's complement.
    case DataType::kInt32:
      return kernels.add_uint32(static_cast<uint32_t*>(acc), static_cast<const uint32_t*>(src), n);
    case DataType::kInt64:
      return kernels.add_uint64(static_cast<uint64_t*>(acc), static_cast<const uint64_t*>(src), n);
  }
  DieOnInvalidType(dtype);
}

namespace {

template <typename T>
T Combine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kMin: return (b < a || b != b) ? b : a;  // b != b: NaN wins
    case ReduceOp::kMax: return (b > a || b != b) ? b : a;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kSum:
    case ReduceOp::kWeights: return a + b;  // changes of weights add up
  }
  return a;
}

template <typename T>
void CombineLoop(ReduceOp op, T* __restrict acc, const T* __restrict src, size_t n) {
  switch (op) {  // one loop per op, so that each is vectorised
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = Combine(ReduceOp::kMin, acc[i], src[i]);
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = Combine(ReduceOp::kMax, acc[i], src[i]);
      return;
    default:
      for (size_t i = 0; i < n; ++i) acc[i] = Combine(op, acc[i], src[i]);
  }
}

// float16/bfloat16 sources into a float32 accumulator.
template <float (*ToFloat)(uint16_t)>
void CombineHalfLoop(ReduceOp op, float* acc, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = Combine(op, acc[i], ToFloat(src[i]));
}

}  // namespace

void CombineIntoAccumulator(ReduceOp op, DataType dtype, void* acc, const void* src, size_t n) {
  if (op == ReduceOp::kSum) return AddToAccumulator(dtype, acc, src, n);
  switch (dtype) {
    case DataType::kFloat16:
      return CombineHalfLoop<HalfToFloat>(op, static_cast<float*>(acc), static_cast<const uint16_t*>(src), n);
    case DataType::kBFloat16:
      return CombineHalfLoop<BFloat16ToFloat>(op, static_cast<float*>(acc), static_cast<const uint16_t*>(src), n);
    case DataType::kFloat32:
      return CombineLoop(op, static_cast<float*>(acc), static_cast<const float*>(src), n);
    case DataType::kFloat64:
      return CombineLoop(op, static_cast<double*>(acc), static_cast<const double*>(src), n);
    case DataType::kInt32:
      if (op == ReduceOp::kProduct) {  // unsigned: wraps instead of overflowing
        return CombineLoop(op, static_cast<uint32_t*>(acc), static_cast<const uint32_t*>(src), n);
      }
      return CombineLoop(op, static_cast<int32_t*>(acc), static_cast<const int32_t*>(src), n);
    case DataType::kInt64:
      if (op == ReduceOp::kProduct) {
        return CombineLoop(op, static_cast<uint64_t*>(acc), static_cast<const uint64_t*>(src), n);
      }
      return CombineLoop(op, static_cast<int64_t*>(acc), static_cast<const int64_t*>(src), n);
  }
  DieOnInvalidType(dtype);
}

void LoadFromAccumulator(DataType dtype, const void* acc, void* dst, size_t n) {
  const Kernels& kernels = ActiveKernels();
  auto* acc_float = static_cast<const float*>(acc);
  auto* dst_16 = static_cast<uint16_t*>(dst);
  switch (dtype) {
    case DataType::kFloat16: return kernels.load_float16(dst_16, acc_float, n);
    case DataType::kBFloat16: return kernels.load_bfloat16(dst_16, acc_float, n);
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kInt32:
    case DataType::kInt64: return Copy(dtype, dst, acc, n);
  }
  DieOnInvalidType(dtype);
}

namespace internal {

void ForcePortableKernels(bool force) { force_portable.store(force, std::memory_order_relaxed); }

const char* ActiveKernelsName() { return ActiveKernels().name; }

}  // namespace internal
}  // namespace bps
