#include "cc/reducer/parallel_reducer.h"

#include "cc/reducer/cpu_reducer.h"

namespace bps {
namespace {

// Chunks start at multiples of this many elements (whole cache lines for every dtype).
constexpr size_t kAlignElements = 64;

// Runs step(acc + begin, other + begin, end - begin) over [0, n) in chunks; `acc` holds accumulator
// elements, `other` dtype elements (char or const char, as the call reads or writes them).
template <typename Acc, typename Other, typename Step>
void Split(ChunkHelpers* helpers, DataType dtype, Acc* acc, Other* other, size_t n, Step step) {
  const size_t acc_size = DataTypeSize(AccumulatorType(dtype));
  const size_t other_size = DataTypeSize(dtype);
  if (helpers == nullptr) return step(acc, other, n);
  helpers->Run(n, kParallelGrainBytes / acc_size, kAlignElements, [&](size_t begin, size_t end) {
    step(acc + begin * acc_size, other + begin * other_size, end - begin);
  });
}

}  // namespace

void StoreToAccumulator(ChunkHelpers* helpers, DataType dtype, void* acc, const void* src, size_t n) {
  Split(helpers, dtype, static_cast<char*>(acc), static_cast<const char*>(src), n,
        [dtype](char* a, const char* s, size_t count) { StoreToAccumulator(dtype, a, s, count); });
}

void CombineIntoAccumulator(ChunkHelpers* helpers, ReduceOp op, DataType dtype, void* acc, const void* src,
                            size_t n) {
  Split(helpers, dtype, static_cast<char*>(acc), static_cast<const char*>(src), n,
        [op, dtype](char* a, const char* s, size_t count) { CombineIntoAccumulator(op, dtype, a, s, count); });
}

void LoadFromAccumulator(ChunkHelpers* helpers, DataType dtype, const void* acc, void* dst, size_t n) {
  Split(helpers, dtype, static_cast<const char*>(acc), static_cast<char*>(dst), n,
        [dtype](const char* a, char* d, size_t count) { LoadFromAccumulator(dtype, a, d, count); });
}

}  // namespace bps
