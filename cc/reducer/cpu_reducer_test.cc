#include "cc/reducer/cpu_reducer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cc/reducer/cpu_reducer_internal.h"
#include "cc/reducer/half.h"

namespace bps {
namespace {

constexpr DataType kAllTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                  DataType::kFloat64, DataType::kInt32,    DataType::kInt64};

enum class KernelSet { kAvx2F16C, kPortable };

const char* KernelSetName(KernelSet set) { return set == KernelSet::kAvx2F16C ? "avx2_f16c" : "portable"; }

void PrintTo(KernelSet set, std::ostream* out) { *out << KernelSetName(set); }

// Selects a kernel set (fixtures restore CPU detection afterwards); false if this CPU cannot run the set.
bool UseKernelSet(KernelSet set) {
  internal::ForcePortableKernels(set == KernelSet::kPortable);
  return std::string(internal::ActiveKernelsName()) == KernelSetName(set);
}

// n elements of a dtype, starting one element into the allocation so vector loops also meet misaligned data.
class Buffer {
 public:
  Buffer(DataType dtype, size_t n) : dtype_(dtype), n_(n), storage_((n + 1) * DataTypeSize(dtype)) {}

  void* data() { return storage_.data() + DataTypeSize(dtype_); }
  const void* data() const { return storage_.data() + DataTypeSize(dtype_); }
  size_t size() const { return n_; }

  template <typename T>
  T Get(size_t i) const {
    T value;
    std::memcpy(&value, static_cast<const uint8_t*>(data()) + i * sizeof(T), sizeof(T));
    return value;
  }

  template <typename T>
  void Set(size_t i, T value) {
    std::memcpy(static_cast<uint8_t*>(data()) + i * sizeof(T), &value, sizeof(T));
  }

  // Raw bits of element i, zero-extended.
  uint64_t Bits(size_t i) const {
    uint64_t bits = 0;
    std::memcpy(&bits, static_cast<const uint8_t*>(data()) + i * DataTypeSize(dtype_), DataTypeSize(dtype_));
    return bits;
  }

 private:
  DataType dtype_;
  size_t n_;
  std::vector<uint8_t> storage_;
};

bool IsNan(DataType dtype, uint64_t bits) {
  switch (dtype) {
    case DataType::kFloat16: return (bits & 0x7fff) > 0x7c00;
    case DataType::kBFloat16: return (bits & 0x7fff) > 0x7f80;
    case DataType::kFloat32: return (bits & 0x7fffffff) > 0x7f800000;
    case DataType::kFloat64: return (bits & ~(uint64_t{1} << 63)) > 0x7ff0000000000000;
    case DataType::kInt32:
    case DataType::kInt64: return false;
  }
  return false;
}

// Half the elements are raw random bits (every special value and wrap-around), half look like gradients.
Buffer RandomInput(DataType dtype, size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> gradient(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-30, 10);
  Buffer buffer(dtype, n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = rng();
    if (bits & 1) {
      std::memcpy(static_cast<uint8_t*>(buffer.data()) + i * DataTypeSize(dtype), &bits, DataTypeSize(dtype));
      continue;
    }
    const float value = std::ldexp(gradient(rng), scale(rng));
    switch (dtype) {
      case DataType::kFloat16: buffer.Set(i, FloatToHalf(value)); break;
      case DataType::kBFloat16: buffer.Set(i, FloatToBFloat16(value)); break;
      case DataType::kFloat32: buffer.Set(i, value); break;
      case DataType::kFloat64: buffer.Set(i, static_cast<double>(value) * (1 + 0x1p-40)); break;
      case DataType::kInt32: buffer.Set(i, static_cast<int32_t>(value * 1000)); break;
      case DataType::kInt64: buffer.Set(i, static_cast<int64_t>(value * 1000)); break;
    }
  }
  return buffer;
}

// The scalar reference: per element, the workers' values added in order in the accumulator type, rounded once.
template <typename Wire, typename Acc, typename Widen, typename Narrow>
Buffer ReferenceSum(DataType dtype, const std::vector<Buffer>& workers, Widen widen, Narrow narrow) {
  Buffer sum(dtype, workers[0].size());
  for (size_t i = 0; i < sum.size(); ++i) {
    Acc acc = widen(workers[0].Get<Wire>(i));
    for (size_t w = 1; w < workers.size(); ++w) acc += widen(workers[w].Get<Wire>(i));
    sum.Set<Wire>(i, narrow(acc));
  }
  return sum;
}

Buffer ReferenceSum(DataType dtype, const std::vector<Buffer>& workers) {
  const auto same = [](auto value) { return value; };
  switch (dtype) {
    case DataType::kFloat16: return ReferenceSum<uint16_t, float>(dtype, workers, HalfToFloat, FloatToHalf);
    case DataType::kBFloat16:
      return ReferenceSum<uint16_t, float>(dtype, workers, BFloat16ToFloat, FloatToBFloat16);
    case DataType::kFloat32: return ReferenceSum<float, float>(dtype, workers, same, same);
    case DataType::kFloat64: return ReferenceSum<double, double>(dtype, workers, same, same);
    // Unsigned, because that is where wrap-around is defined.
    case DataType::kInt32: return ReferenceSum<uint32_t, uint32_t>(dtype, workers, same, same);
    case DataType::kInt64: return ReferenceSum<uint64_t, uint64_t>(dtype, workers, same, same);
  }
  return Buffer(dtype, 0);
}

// What the server does with one key: store the first worker's partition, add the others, load the sum.
Buffer ReduceLikeServer(DataType dtype, const std::vector<Buffer>& workers) {
  const size_t n = workers[0].size();
  Buffer acc(AccumulatorType(dtype), n);
  StoreToAccumulator(dtype, acc.data(), workers[0].data(), n);
  for (size_t w = 1; w < workers.size(); ++w) AddToAccumulator(dtype, acc.data(), workers[w].data(), n);
  Buffer sum(dtype, n);
  LoadFromAccumulator(dtype, acc.data(), sum.data(), n);
  return sum;
}

// Bit-exact, except that any NaN matches any NaN (which NaN payload an addition keeps is not specified).
void ExpectSameElements(DataType dtype, const Buffer& actual, const Buffer& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const uint64_t got = actual.Bits(i), want = expected.Bits(i);
    if (got == want || (IsNan(dtype, got) && IsNan(dtype, want))) continue;
    FAIL() << DataTypeName(dtype) << " element " << i << " of " << actual.size() << ": got 0x" << std::hex << got
           << ", want 0x" << want;
  }
}

Buffer MakeBuffer(DataType dtype, const std::vector<uint64_t>& bits) {
  Buffer buffer(dtype, bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    std::memcpy(static_cast<uint8_t*>(buffer.data()) + i * DataTypeSize(dtype), &bits[i], DataTypeSize(dtype));
  }
  return buffer;
}

class KernelSetTest : public ::testing::TestWithParam<KernelSet> {
 protected:
  void SetUp() override {
    if (!UseKernelSet(GetParam())) GTEST_SKIP() << "this CPU lacks AVX2 or F16C";
  }
  void TearDown() override { internal::ForcePortableKernels(false); }
};

class SumTest : public ::testing::TestWithParam<std::tuple<KernelSet, DataType, size_t>> {
 protected:
  void SetUp() override {
    if (!UseKernelSet(std::get<0>(GetParam()))) GTEST_SKIP() << "this CPU lacks AVX2 or F16C";
  }
  void TearDown() override { internal::ForcePortableKernels(false); }
};

TEST_P(SumTest, ThreeWorkersMatchScalarReference) {
  const DataType dtype = std::get<1>(GetParam());
  const size_t n = std::get<2>(GetParam());
  std::mt19937_64 rng(n * 31 + static_cast<int>(dtype));
  std::vector<Buffer> workers;
  for (int w = 0; w < 3; ++w) workers.push_back(RandomInput(dtype, n, rng));
  ExpectSameElements(dtype, ReduceLikeServer(dtype, workers), ReferenceSum(dtype, workers));
}

TEST_P(SumTest, OneWorkerRoundTripsUnchanged) {
  const DataType dtype = std::get<1>(GetParam());
  const size_t n = std::get<2>(GetParam());
  std::mt19937_64 rng(n * 17 + static_cast<int>(dtype));
  std::vector<Buffer> workers;
  workers.push_back(RandomInput(dtype, n, rng));
  ExpectSameElements(dtype, ReduceLikeServer(dtype, workers), workers[0]);
}

std::string SumTestName(const ::testing::TestParamInfo<SumTest::ParamType>& info) {
  return std::string(KernelSetName(std::get<0>(info.param))) + "_" + DataTypeName(std::get<1>(info.param)) + "_" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndSizes, SumTest,
                         ::testing::Combine(::testing::Values(KernelSet::kAvx2F16C, KernelSet::kPortable),
                                            ::testing::ValuesIn(kAllTypes),
                                            ::testing::Values(0, 1, 7, 15, 16, 17, 1000003)),
                         SumTestName);

TEST(AccumulatorTypeTest, HalfTypesWidenToFloat32) {
  EXPECT_EQ(AccumulatorType(DataType::kFloat16), DataType::kFloat32);
  EXPECT_EQ(AccumulatorType(DataType::kBFloat16), DataType::kFloat32);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    EXPECT_EQ(AccumulatorType(dtype), dtype);
  }
}

TEST(CpuReducerDeathTest, InvalidTypeAborts) {
  const DataType invalid = static_cast<DataType>(kNumDataTypes);
  float acc = 0, src = 0;
  EXPECT_DEATH(AddToAccumulator(invalid, &acc, &src, 1), "invalid dtype 6");
}

TEST_P(KernelSetTest, EmptyBuffersMayBeNull) {
  for (DataType dtype : kAllTypes) {
    StoreToAccumulator(dtype, nullptr, nullptr, 0);
    AddToAccumulator(dtype, nullptr, nullptr, 0);
    LoadFromAccumulator(dtype, nullptr, nullptr, 0);
  }
}

TEST_P(KernelSetTest, HalfSumsRoundOnceAtTheEnd) {
  // Half an ulp twice: rounding after each addition would tie back to 1 both times; the float32 sum does not.
  ExpectSameElements(DataType::kFloat16,
                     ReduceLikeServer(DataType::kFloat16, {MakeBuffer(DataType::kFloat16, {0x3c00}),
                                                           MakeBuffer(DataType::kFloat16, {0x1000}),  // 2^-11
                                                           MakeBuffer(DataType::kFloat16, {0x1000})}),
                     MakeBuffer(DataType::kFloat16, {0x3c01}));
  ExpectSameElements(DataType::kBFloat16,
                     ReduceLikeServer(DataType::kBFloat16, {MakeBuffer(DataType::kBFloat16, {0x3f80}),
                                                            MakeBuffer(DataType::kBFloat16, {0x3b80}),  // 2^-8
                                                            MakeBuffer(DataType::kBFloat16, {0x3b80})}),
                     MakeBuffer(DataType::kBFloat16, {0x3f81}));
}

TEST_P(KernelSetTest, HalfSpecialValues) {
  // Per column: overflow to inf, inf - inf, NaN + 1, -0 + -0, subnormal + subnormal, max + -max.
  const std::vector<Buffer> halves = {MakeBuffer(DataType::kFloat16, {0x7bff, 0x7c00, 0x7e00, 0x8000, 0x0001, 0x7bff}),
                                      MakeBuffer(DataType::kFloat16, {0x7bff, 0xfc00, 0x3c00, 0x8000, 0x0001, 0xfbff})};
  ExpectSameElements(DataType::kFloat16, ReduceLikeServer(DataType::kFloat16, halves),
                     MakeBuffer(DataType::kFloat16, {0x7c00, 0x7e00, 0x7e00, 0x8000, 0x0002, 0x0000}));
  const std::vector<Buffer> bfloat16s = {
      MakeBuffer(DataType::kBFloat16, {0x7f7f, 0x7f80, 0x7fc0, 0x8000, 0x0001, 0x7f7f}),
      MakeBuffer(DataType::kBFloat16, {0x7f7f, 0xff80, 0x3f80, 0x8000, 0x0001, 0xff7f})};
  ExpectSameElements(DataType::kBFloat16, ReduceLikeServer(DataType::kBFloat16, bfloat16s),
                     MakeBuffer(DataType::kBFloat16, {0x7f80, 0x7fc0, 0x7fc0, 0x8000, 0x0002, 0x0000}));
}

TEST_P(KernelSetTest, IntegersWrapAround) {
  ExpectSameElements(DataType::kInt32,
                     ReduceLikeServer(DataType::kInt32, {MakeBuffer(DataType::kInt32, {0x7fffffff, 0x80000000}),
                                                         MakeBuffer(DataType::kInt32, {1, 0xffffffff})}),
                     MakeBuffer(DataType::kInt32, {0x80000000, 0x7fffffff}));
  ExpectSameElements(DataType::kInt64,
                     ReduceLikeServer(DataType::kInt64, {MakeBuffer(DataType::kInt64, {0x7fffffffffffffff}),
                                                         MakeBuffer(DataType::kInt64, {1})}),
                     MakeBuffer(DataType::kInt64, {0x8000000000000000}));
}

// Floats that reach every rounding case of both narrowings: all combinations of the top 20 bits with the low 12
// bits around the halfway points (which those top bits place at bit 12 for float16, 15 for bfloat16, and higher
// for float16 subnormals), plus random bit patterns. (All 2^32 floats were checked once; it takes 20 s.)
std::vector<float> NarrowingProbes() {
  std::vector<float> probes;
  for (uint32_t high = 0; high < (1u << 20); ++high) {
    for (uint32_t low : {0x000u, 0x001u, 0x7ffu, 0x800u, 0x801u, 0xfffu}) {
      probes.push_back(BitsToFloat((high << 12) | low));
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 22); ++i) probes.push_back(BitsToFloat(rng()));
  return probes;
}

// The vector conversions must give exactly the scalar functions' bits, which half_test checks against the
// formats' definitions.
TEST_P(KernelSetTest, ConversionsMatchScalarFunctions) {
  std::vector<uint16_t> codes(1 << 16);
  std::vector<float> widened(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = i;
  StoreToAccumulator(DataType::kFloat16, widened.data(), codes.data(), codes.size());
  for (size_t i = 0; i < codes.size(); ++i) ASSERT_EQ(FloatToBits(widened[i]), FloatToBits(HalfToFloat(i))) << i;
  StoreToAccumulator(DataType::kBFloat16, widened.data(), codes.data(), codes.size());
  for (size_t i = 0; i < codes.size(); ++i) ASSERT_EQ(FloatToBits(widened[i]), FloatToBits(BFloat16ToFloat(i))) << i;

  const std::vector<float> floats = NarrowingProbes();
  std::vector<uint16_t> halves(floats.size()), bfloat16s(floats.size());
  LoadFromAccumulator(DataType::kFloat16, floats.data(), halves.data(), floats.size());
  LoadFromAccumulator(DataType::kBFloat16, floats.data(), bfloat16s.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(halves[i], FloatToHalf(floats[i])) << "float bits " << FloatToBits(floats[i]);
    ASSERT_EQ(bfloat16s[i], FloatToBFloat16(floats[i])) << "float bits " << FloatToBits(floats[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(BothKernelSets, KernelSetTest,
                         ::testing::Values(KernelSet::kAvx2F16C, KernelSet::kPortable),
                         [](const ::testing::TestParamInfo<KernelSet>& info) { return KernelSetName(info.param); });

}  // namespace
}  // namespace bps
