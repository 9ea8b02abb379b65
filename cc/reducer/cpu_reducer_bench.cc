// Throughput of AddToAccumulator, per kernel set, against a plain scalar loop the compiler may not vectorise,
// and split over the server's default summing threads (parallel_reducer.h) next to one thread's memcpy and
// a split one: whether more threads than one reach more of the machine's memory bandwidth.
// One JSON line per case; gbps counts the bytes of the dtype summed into the accumulator (or copied) per
// second (the gradient bytes a server reduces), and vs_scalar is the speedup over the scalar loop in the same
// run.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cc/common/chunk_helpers.h"
#include "cc/common/config.h"

#include "cc/reducer/cpu_reducer.h"
#include "cc/reducer/cpu_reducer_internal.h"
#include "cc/reducer/half.h"
#include "cc/reducer/parallel_reducer.h"

namespace bps {
namespace {

__attribute__((noinline, optimize("no-tree-vectorize"))) void ScalarAdd(float* acc, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += src[i];
}

__attribute__((noinline, optimize("no-tree-vectorize"))) void ScalarAdd(float* acc, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += HalfToFloat(src[i]);
}

// Best of several passes: the machine is shared, and the fastest pass is the least disturbed one.
template <typename Pass>
double BestGigabytesPerSecond(size_t bytes, Pass pass) {
  double best_seconds = 1e30;
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds < best_seconds) best_seconds = seconds;
  }
  return bytes / best_seconds / 1e9;
}

template <typename Wire>
void Run(DataType dtype, Wire one, size_t bytes) {
  const size_t n = bytes / sizeof(Wire);
  std::vector<Wire> src(n, one);
  std::vector<float> acc(n, 0.0f);
  const double scalar = BestGigabytesPerSecond(bytes, [&] { ScalarAdd(acc.data(), src.data(), n); });
  std::printf("{\"dtype\":\"%s\",\"bytes\":%zu,\"impl\":\"scalar_loop\",\"gbps\":%.2f,\"vs_scalar\":1.00}\n",
              DataTypeName(dtype), bytes, scalar);
  for (bool portable : {false, true}) {
    internal::ForcePortableKernels(portable);
    const double gbps = BestGigabytesPerSecond(bytes, [&] { AddToAccumulator(dtype, acc.data(), src.data(), n); });
    std::printf("{\"dtype\":\"%s\",\"bytes\":%zu,\"impl\":\"%s\",\"gbps\":%.2f,\"vs_scalar\":%.2f}\n",
                DataTypeName(dtype), bytes, internal::ActiveKernelsName(), gbps, gbps / scalar);
  }
  internal::ForcePortableKernels(false);
  const int threads = DefaultSumThreads();
  if (threads > 1) {
    ChunkHelpers helpers(threads - 1);
    const double gbps = BestGigabytesPerSecond(
        bytes, [&] { CombineIntoAccumulator(&helpers, ReduceOp::kSum, dtype, acc.data(), src.data(), n); });
    std::printf("{\"dtype\":\"%s\",\"bytes\":%zu,\"impl\":\"%s\",\"threads\":%d,\"gbps\":%.2f,\"vs_scalar\":%.2f}\n",
                DataTypeName(dtype), bytes, internal::ActiveKernelsName(), threads, gbps, gbps / scalar);
  }
}

// memcpy of `bytes` on one thread and split over the default summing threads' count.
void RunCopy(size_t bytes) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  const int threads = DefaultSumThreads();
  ChunkHelpers helpers(threads - 1);
  for (ChunkHelpers* split : {static_cast<ChunkHelpers*>(nullptr), &helpers}) {
    if (split != nullptr && threads == 1) break;
    const double gbps = BestGigabytesPerSecond(bytes, [&] {
      if (split == nullptr) return static_cast<void>(std::memcpy(to.data(), from.data(), bytes));
      split->Run(bytes, kParallelGrainBytes, 4096, [&](size_t begin, size_t end) {
        std::memcpy(to.data() + begin, from.data() + begin, end - begin);
      });
    });
    std::printf("{\"dtype\":\"bytes\",\"bytes\":%zu,\"impl\":\"memcpy\",\"threads\":%d,\"gbps\":%.2f}\n", bytes,
                split == nullptr ? 1 : threads, gbps);
  }
}

}  // namespace
}  // namespace bps

int main() {
  // 4 MB is the default partition a server sums; 64 MB does not fit in any cache.
  for (size_t bytes : {size_t{4} << 20, size_t{64} << 20}) {
    bps::Run(bps::DataType::kFloat32, 1.0f, bytes);
    bps::Run(bps::DataType::kFloat16, bps::FloatToHalf(1.0f), bytes);
    bps::RunCopy(bytes);
  }
  return 0;
}
