#include "cc/reducer/parallel_reducer.h"

#include <algorithm>
#include <cstring>

#include "cc/reducer/cpu_reducer.h"

namespace bps {
namespace {

// Chunks start at multiples of this many elements (whole cache lines for every dtype).
constexpr size_t kAlignElements = 64;

// Runs fn(begin, end) over [0, n) in chunks: on the helpers, or fn(0, n) here without them.
template <typename Fn>
void ForChunks(ChunkHelpers* helpers, DataType dtype, size_t n, Fn fn) {
  if (helpers == nullptr) return fn(size_t(0), n);
  helpers->Run(n, kParallelGrainBytes / DataTypeSize(AccumulatorType(dtype)), kAlignElements, fn);
}

// Runs step(acc + begin, other + begin, end - begin) over [0, n) in chunks; `acc` holds accumulator
// elements, `other` dtype elements (char or const char, as the call reads or writes them).
template <typename Acc, typename Other, typename Step>
void Split(ChunkHelpers* helpers, DataType dtype, Acc* acc, Other* other, size_t n, Step step) {
  const size_t acc_size = DataTypeSize(AccumulatorType(dtype));
  const size_t other_size = DataTypeSize(dtype);
  ForChunks(helpers, dtype, n, [&](size_t begin, size_t end) {
    step(acc + begin * acc_size, other + begin * other_size, end - begin);
  });
}

// Bytes of accumulator in one block of a fused call: with its inputs and output (up to 2.5 times as many
// bytes in all), well inside any core's L1 cache.
constexpr size_t kBlockBytes = 8 << 10;

// Runs step(begin, count) over [begin, end) in blocks of at most kBlockBytes of accumulator.
template <typename Step>
void ForBlocks(DataType dtype, size_t begin, size_t end, Step step) {
  const size_t block = kBlockBytes / DataTypeSize(AccumulatorType(dtype));
  for (size_t i = begin; i < end; i += block) step(i, std::min(block, end - i));
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

void CombineTwoIntoAccumulator(ChunkHelpers* helpers, ReduceOp op, DataType dtype, void* acc, const void* a,
                               const void* b, size_t n) {
  const size_t wide = DataTypeSize(AccumulatorType(dtype)), narrow = DataTypeSize(dtype);
  char* out = static_cast<char*>(acc);
  const char* first = static_cast<const char*>(a);
  const char* second = static_cast<const char*>(b);
  ForChunks(helpers, dtype, n, [&](size_t begin, size_t end) {
    ForBlocks(dtype, begin, end, [&](size_t i, size_t count) {
      StoreToAccumulator(dtype, out + i * wide, first + i * narrow, count);
      CombineIntoAccumulator(op, dtype, out + i * wide, second + i * narrow, count);
    });
  });
}

void CombineAndLoad(ChunkHelpers* helpers, ReduceOp op, DataType dtype, const void* acc, const void* src,
                    void* dst, size_t n) {
  const size_t wide = DataTypeSize(AccumulatorType(dtype)), narrow = DataTypeSize(dtype);
  const char* sum = static_cast<const char*>(acc);
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  ForChunks(helpers, dtype, n, [&](size_t begin, size_t end) {
    // The block's accumulator is combined in a copy: the accumulator itself is never written back.
    alignas(64) char block[kBlockBytes];
    ForBlocks(dtype, begin, end, [&](size_t i, size_t count) {
      std::memcpy(block, sum + i * wide, count * wide);
      CombineIntoAccumulator(op, dtype, block, in + i * narrow, count);
      LoadFromAccumulator(dtype, block, out + i * narrow, count);
    });
  });
}

void CombineTwoAndLoad(ChunkHelpers* helpers, ReduceOp op, DataType dtype, const void* a, const void* b,
                       void* dst, size_t n) {
  const size_t narrow = DataTypeSize(dtype);
  const char* first = static_cast<const char*>(a);
  const char* second = static_cast<const char*>(b);
  char* out = static_cast<char*>(dst);
  ForChunks(helpers, dtype, n, [&](size_t begin, size_t end) {
    alignas(64) char block[kBlockBytes];
    ForBlocks(dtype, begin, end, [&](size_t i, size_t count) {
      StoreToAccumulator(dtype, block, first + i * narrow, count);
      CombineIntoAccumulator(op, dtype, block, second + i * narrow, count);
      LoadFromAccumulator(dtype, block, out + i * narrow, count);
    });
  });
}

}  // namespace bps
