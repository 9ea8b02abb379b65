#include "cc/reducer/parallel_reducer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cc/reducer/cpu_reducer.h"

namespace bps {
namespace {

constexpr DataType kAllTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                  DataType::kFloat64, DataType::kInt32,    DataType::kInt64};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};

// Random bytes of n elements of `dtype` (any bit pattern: NaNs and infinities too), plus one spare element at
// the front so that chunks meet misaligned data.
std::vector<char> RandomBytes(DataType dtype, size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<char> bytes((n + 1) * DataTypeSize(dtype));
  for (char& b : bytes) b = static_cast<char>(gen());
  return bytes;
}

char* Elements(std::vector<char>& bytes, DataType dtype) { return bytes.data() + DataTypeSize(dtype); }

// Sizes below, at and above the point where a call is split, odd ones included, and zero.
std::vector<size_t> Sizes(DataType dtype) {
  const size_t grain = kParallelGrainBytes / DataTypeSize(AccumulatorType(dtype));
  return {0, 1, 63, 2 * grain - 1, 2 * grain, 2 * grain + 1, 5 * grain + 37, 40 * grain + 3};
}

// Every call, split over helpers, gives exactly the serial call's bytes.
TEST(ParallelReducerTest, SameBytesAsSerial) {
  ChunkHelpers helpers(3);
  for (DataType dtype : kAllTypes) {
    const DataType wide = AccumulatorType(dtype);
    for (size_t n : Sizes(dtype)) {
      SCOPED_TRACE(std::string(DataTypeName(dtype)) + ", " + std::to_string(n) + " elements");
      std::vector<char> src = RandomBytes(dtype, n, 1);
      std::vector<char> serial((n + 1) * DataTypeSize(wide)), parallel(serial.size());
      StoreToAccumulator(dtype, Elements(serial, wide), Elements(src, dtype), n);
      StoreToAccumulator(&helpers, dtype, Elements(parallel, wide), Elements(src, dtype), n);
      ASSERT_EQ(serial, parallel) << "store";
      for (ReduceOp op : kAllOps) {
        std::vector<char> more = RandomBytes(dtype, n, 2 + static_cast<int>(op));
        CombineIntoAccumulator(op, dtype, Elements(serial, wide), Elements(more, dtype), n);
        CombineIntoAccumulator(&helpers, op, dtype, Elements(parallel, wide), Elements(more, dtype), n);
        // NaN payloads are bytes too: a bitwise comparison checks them.
        ASSERT_EQ(0, std::memcmp(serial.data(), parallel.data(), serial.size())) << ReduceOpName(op);
      }
      std::vector<char> out_serial((n + 1) * DataTypeSize(dtype)), out_parallel(out_serial.size());
      LoadFromAccumulator(dtype, Elements(serial, wide), Elements(out_serial, dtype), n);
      LoadFromAccumulator(&helpers, dtype, Elements(parallel, wide), Elements(out_parallel, dtype), n);
      ASSERT_EQ(out_serial, out_parallel) << "load";
    }
  }
}

// The fused calls give exactly the bytes of the separate serial calls they stand for, split or not.
TEST(ParallelReducerTest, FusedCallsGiveTheSeparateCallsBytes) {
  ChunkHelpers helpers(3);
  for (DataType dtype : kAllTypes) {
    const DataType wide = AccumulatorType(dtype);
    const size_t wide_size = DataTypeSize(wide), size = DataTypeSize(dtype);
    for (size_t n : Sizes(dtype)) {
      for (ReduceOp op : kAllOps) {
        SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " + ReduceOpName(op) + ", " + std::to_string(n) +
                     " elements");
        std::vector<char> a = RandomBytes(dtype, n, 3), b = RandomBytes(dtype, n, 4), c = RandomBytes(dtype, n, 5);
        // Separate serial calls: acc = op(a, b); two = load(acc); three = load(op(acc, c)).
        std::vector<char> acc((n + 1) * wide_size), two((n + 1) * size), three((n + 1) * size);
        StoreToAccumulator(dtype, Elements(acc, wide), Elements(a, dtype), n);
        CombineIntoAccumulator(op, dtype, Elements(acc, wide), Elements(b, dtype), n);
        LoadFromAccumulator(dtype, Elements(acc, wide), Elements(two, dtype), n);
        std::vector<char> acc_then_c = acc;
        CombineIntoAccumulator(op, dtype, Elements(acc_then_c, wide), Elements(c, dtype), n);
        LoadFromAccumulator(dtype, Elements(acc_then_c, wide), Elements(three, dtype), n);
        for (ChunkHelpers* pool : {static_cast<ChunkHelpers*>(nullptr), &helpers}) {
          std::vector<char> fused_acc(acc.size());
          CombineTwoIntoAccumulator(pool, op, dtype, Elements(fused_acc, wide), Elements(a, dtype),
                                    Elements(b, dtype), n);
          ASSERT_EQ(0, std::memcmp(acc.data() + wide_size, fused_acc.data() + wide_size, n * wide_size));
          std::vector<char> out(two.size());
          CombineTwoAndLoad(pool, op, dtype, Elements(a, dtype), Elements(b, dtype), Elements(out, dtype), n);
          ASSERT_EQ(0, std::memcmp(two.data() + size, out.data() + size, n * size));
          const std::vector<char> acc_before = fused_acc;
          CombineAndLoad(pool, op, dtype, Elements(fused_acc, wide), Elements(c, dtype), Elements(out, dtype), n);
          ASSERT_EQ(0, std::memcmp(three.data() + size, out.data() + size, n * size));
          ASSERT_EQ(acc_before, fused_acc) << "CombineAndLoad leaves the accumulator as it was";
        }
      }
    }
  }
}

// No helpers (a server with one summing thread) and a null pool are the serial calls.
TEST(ParallelReducerTest, WithoutHelpers) {
  ChunkHelpers none(0);
  const size_t n = 3 * kParallelGrainBytes / 4 + 5;
  std::vector<float> acc(n, 1.5f), src(n, 2.f);
  CombineIntoAccumulator(&none, ReduceOp::kSum, DataType::kFloat32, acc.data(), src.data(), n);
  CombineIntoAccumulator(nullptr, ReduceOp::kSum, DataType::kFloat32, acc.data(), src.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], 5.5f) << i;
}

}  // namespace
}  // namespace bps
