// The CPU reducer's calls (cpu_reducer.h) with one call's elements spread over ChunkHelpers, so that a
// server's sum of one large partition uses every idle core instead of one. Each element is still combined
// by the same kernel, in the same order of contributions: results are those of the serial calls, bit for bit.
// `helpers` may be null (serial). Small calls stay on the calling thread: waking a helper costs more.
#pragma once

#include <cstddef>

#include "cc/common/chunk_helpers.h"
#include "cc/common/dtype.h"
#include "cc/common/reduce_op.h"

namespace bps {

// Accumulator bytes below which a call is not split.
constexpr size_t kParallelGrainBytes = 256 << 10;

void StoreToAccumulator(ChunkHelpers* helpers, DataType dtype, void* acc, const void* src, size_t n);
void CombineIntoAccumulator(ChunkHelpers* helpers, ReduceOp op, DataType dtype, void* acc, const void* src,
                            size_t n);
void LoadFromAccumulator(ChunkHelpers* helpers, DataType dtype, const void* acc, void* dst, size_t n);

// The same calls run one after another over each block of a few thousand elements, whose accumulator part
// stays in the core's cache in between: memory sees each input read once and each output written once. For
// a wide accumulator (16-bit floats in float32) a round of two contributions otherwise reads and writes the
// accumulator three times. Bytes are exactly those of the separate calls.
//
// acc = op(a, b): StoreToAccumulator(a), then CombineIntoAccumulator(b).
void CombineTwoIntoAccumulator(ChunkHelpers* helpers, ReduceOp op, DataType dtype, void* acc, const void* a,
                               const void* b, size_t n);
// dst = op(acc, src) in dtype, acc left as it was: CombineIntoAccumulator(src), then LoadFromAccumulator.
void CombineAndLoad(ChunkHelpers* helpers, ReduceOp op, DataType dtype, const void* acc, const void* src,
                    void* dst, size_t n);
// dst = op(a, b) in dtype: StoreToAccumulator(a), CombineIntoAccumulator(b), then LoadFromAccumulator.
void CombineTwoAndLoad(ChunkHelpers* helpers, ReduceOp op, DataType dtype, const void* a, const void* b,
                       void* dst, size_t n);

}  // namespace bps
