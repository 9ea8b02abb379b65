// Element-wise summation for the parameter server: it accumulates every worker's partition of a key into one
// buffer, then writes the result back out in the key's dtype. float16 and bfloat16 are accumulated in float32
// and rounded to their own precision once, at the end, rather than after every worker's addition.
//
// Buffers must not overlap (the loops are compiled assuming so); any alignment is fine. Calls on distinct
// buffers may run concurrently. Integer sums wrap around like two's complement.
#pragma once

#include <cstddef>

#include "cc/common/dtype.h"
#include "cc/common/reduce_op.h"

namespace bps {

// Type the server accumulates a dtype in: float32 for float16/bfloat16, the dtype itself otherwise.
DataType AccumulatorType(DataType dtype);

// acc (AccumulatorType(dtype), n elements) = src (dtype, n elements)
void StoreToAccumulator(DataType dtype, void* acc, const void* src, size_t n);

// acc += src
void AddToAccumulator(DataType dtype, void* acc, const void* src, size_t n);

// acc = op(acc, src) element-wise: kSum is AddToAccumulator; kMin and kMax keep a NaN from either side;
// integer products wrap around like two's complement.
void CombineIntoAccumulator(ReduceOp op, DataType dtype, void* acc, const void* src, size_t n);

// dst (dtype) = acc, rounded once (round-to-nearest-even for float16/bfloat16; NaN stays NaN, overflow -> inf)
void LoadFromAccumulator(DataType dtype, const void* acc, void* dst, size_t n);

}  // namespace bps
