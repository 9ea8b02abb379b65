#include "cc/compress/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

namespace bps {
namespace {

CompressionSpec Spec(const std::string& text) {
  auto spec = CompressionSpec::Parse(text);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.value();
}

std::vector<float> Gaussian(uint64_t n, int seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

std::vector<float> RoundTrip(const CompressionSpec& spec, std::vector<float> values, uint64_t seed,
                             std::vector<float>* residual = nullptr) {
  std::vector<char> wire(EncodedBytes(spec, values.size()));
  Encode(spec, values.data(), values.size(), seed, wire.data(), residual != nullptr);
  if (residual) *residual = values;
  std::vector<float> out(values.size(), -7.f);
  Status decoded = Decode(spec, wire.data(), wire.size(), values.size(), seed, out.data());
  EXPECT_TRUE(decoded.ok()) << decoded.message();
  return out;
}

TEST(CompressionSpecTest, ParsesWhatUsersWrite) {
  EXPECT_FALSE(Spec("none").on());
  EXPECT_FALSE(Spec("").on());
  EXPECT_EQ(Spec("onebit").kind, CodecKind::kOneBit);
  CompressionSpec topk = Spec("topk:0.01,momentum=0.9,ef=0");
  EXPECT_EQ(topk.kind, CodecKind::kTopK);
  EXPECT_FLOAT_EQ(topk.ratio, 0.01f);
  EXPECT_FLOAT_EQ(topk.momentum, 0.9f);
  EXPECT_FALSE(topk.error_feedback);
  EXPECT_EQ(Spec("randomk:0.5").kind, CodecKind::kRandomK);
  EXPECT_EQ(Spec("onebit,momentum=0.9").ToString(), "onebit(momentum=0.900000)");
}

TEST(CompressionSpecTest, RefusesWithAHint) {
  for (const char* bad : {"twobit", "topk", "topk:0", "topk:1.5", "randomk:x", "onebit:0.1", "onebit,momentum=1",
                          "onebit,ef=2", "onebit,speed=3", "none,momentum=0.9"}) {
    auto spec = CompressionSpec::Parse(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_NE(spec.status().message().find("topk:RATIO"), std::string::npos) << spec.status().message();
  }
}

TEST(CodecTest, SizesOnTheWire) {
  EXPECT_EQ(EncodedBytes(Spec("onebit"), 1000), 4u + 125u);
  EXPECT_EQ(EncodedBytes(Spec("onebit"), 1001), 4u + 126u);
  EXPECT_EQ(EncodedBytes(Spec("topk:0.01"), 1000), 10u * 8u);
  EXPECT_EQ(EncodedBytes(Spec("topk:0.01"), 1), 8u);  // at least one element
  EXPECT_EQ(EncodedBytes(Spec("randomk:0.01"), 1000), 10u * 4u);
  EXPECT_EQ(EncodedBytes(Spec("randomk:0.01"), 0), 0u);
}

TEST(CodecTest, OneBitKeepsSignsAndMeanMagnitude) {
  for (uint64_t n : {1u, 7u, 8u, 9u, 1000u, 4097u}) {
    std::vector<float> v = Gaussian(n, n);
    double magnitude = 0;
    for (float x : v) magnitude += std::fabs(x);
    const float scale = static_cast<float>(magnitude / n);
    std::vector<float> residual;
    std::vector<float> out = RoundTrip(Spec("onebit"), v, 0, &residual);
    for (uint64_t i = 0; i < n; ++i) {
      EXPECT_EQ(out[i], v[i] < 0 ? -scale : scale) << i;
      EXPECT_FLOAT_EQ(residual[i], v[i] - out[i]) << i;
    }
  }
}

TEST(CodecTest, TopKSendsTheLargestMagnitudes) {
  std::vector<float> v = {0.5f, -9.f, 3.f, 0.f, -4.f, 8.f, 1.f, 2.f, -0.25f, 7.f};
  std::vector<float> residual;
  std::vector<float> out = RoundTrip(Spec("topk:0.3"), v, 0, &residual);
  EXPECT_EQ(out, (std::vector<float>{0, -9.f, 0, 0, 0, 8.f, 0, 0, 0, 7.f}));
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(residual[i] + out[i], v[i]);
}

TEST(CodecTest, TopKTiesGoToTheLowerIndexAndNaNsRankFirst) {
  std::vector<float> ties = {1.f, -2.f, 2.f, 2.f, -1.f};
  EXPECT_EQ(RoundTrip(Spec("topk:0.4"), ties, 0), (std::vector<float>{0, -2.f, 2.f, 0, 0}));
  // A sum with NaNs (a peer that sent them) must not break the selection; NaNs are picked first.
  std::vector<float> nans(1000, 1.f);
  nans[10] = NAN;
  nans[500] = NAN;
  nans[999] = 5.f;
  std::vector<float> out = RoundTrip(Spec("topk:0.003"), nans, 0);
  EXPECT_TRUE(std::isnan(out[10]) && std::isnan(out[500]));
  EXPECT_EQ(out[999], 5.f);
}

// The sampled threshold must give exactly the largest k, also when many values are equal.
TEST(CodecTest, TopKOfLargePartitionsIsExact) {
  for (int zeros_percent : {0, 50, 99}) {
    const uint64_t n = 100000;
    std::vector<float> v = Gaussian(n, zeros_percent);
    for (uint64_t i = 0; i < n; ++i) {
      if (static_cast<int>(i % 100) < zeros_percent) v[i] = 0.f;
    }
    for (double ratio : {0.001, 0.01, 0.1}) {
      const uint64_t k = KeptElements(Spec("topk:" + std::to_string(ratio)), n);
      std::vector<uint32_t> order(n);
      for (uint32_t i = 0; i < n; ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
      std::vector<float> expected(n, 0.f);
      for (uint64_t j = 0; j < k; ++j) expected[order[j]] = v[order[j]];
      EXPECT_EQ(RoundTrip(Spec("topk:" + std::to_string(ratio)), v, 0), expected)
          << zeros_percent << "% zeros, ratio " << ratio;
    }
  }
}

TEST(CodecTest, RandomKIndicesAreDistinctSortedAndShared) {
  for (uint64_t n : {10u, 1000u, 100000u}) {
    for (double ratio : {0.001, 0.1, 0.3, 1.0}) {
      CompressionSpec spec = Spec("randomk:" + std::to_string(ratio));
      const uint64_t k = KeptElements(spec, n);
      std::vector<uint32_t> a = RandomIndices(PartitionSeed(5, 3), n, k);
      ASSERT_EQ(a.size(), k);
      EXPECT_EQ(std::set<uint32_t>(a.begin(), a.end()).size(), k);
      EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
      EXPECT_LT(a.back(), n);
      EXPECT_EQ(a, RandomIndices(PartitionSeed(5, 3), n, k));
      if (k < n) EXPECT_NE(a, RandomIndices(PartitionSeed(5, 4), n, k));
    }
  }
}

TEST(CodecTest, RandomKSumsExactlyOverWorkers) {
  // Every worker sends the same indices, so the sum of decoded pushes is the decoding of summed values.
  CompressionSpec spec = Spec("randomk:0.05");
  const uint64_t n = 2000, seed = PartitionSeed(11, 1);
  std::vector<float> sum(n, 0.f), reference(n, 0.f);
  std::vector<uint32_t> indices = RandomIndices(seed, n, KeptElements(spec, n));
  for (int worker = 0; worker < 3; ++worker) {
    std::vector<float> v = Gaussian(n, worker);
    for (uint32_t i : indices) reference[i] += v[i];
    std::vector<char> wire(EncodedBytes(spec, n));
    Encode(spec, v.data(), n, seed, wire.data(), false);
    ASSERT_TRUE(DecodeAdd(spec, wire.data(), wire.size(), n, seed, sum.data()).ok());
  }
  EXPECT_EQ(sum, reference);
}

TEST(CodecTest, ErrorFeedbackLosesNothingOverRounds) {
  // Decoded pushes plus the final residual add up to the inputs: what compression drops is only delayed.
  for (const char* text : {"onebit", "topk:0.05", "randomk:0.05"}) {
    CompressionSpec spec = Spec(text);
    const uint64_t n = 500;
    std::vector<double> sent(n, 0), given(n, 0);
    std::vector<float> residual(n, 0.f);
    for (uint32_t round = 1; round <= 40; ++round) {
      std::vector<float> g = Gaussian(n, round);
      for (uint64_t i = 0; i < n; ++i) {
        given[i] += g[i];
        residual[i] += g[i];
      }
      std::vector<float> out = RoundTrip(spec, residual, PartitionSeed(1, round), &residual);
      for (uint64_t i = 0; i < n; ++i) sent[i] += out[i];
    }
    for (uint64_t i = 0; i < n; ++i) EXPECT_NEAR(sent[i] + residual[i], given[i], 1e-3) << text << " " << i;
  }
}

TEST(CodecTest, RefusesPayloadsThatLie) {
  std::vector<float> sum(10, 0.f);
  std::vector<char> short_wire(3);
  EXPECT_FALSE(DecodeAdd(Spec("onebit"), short_wire.data(), short_wire.size(), 10, 0, sum.data()).ok());
  struct {
    uint32_t index;
    float value;
  } record{10, 1.f};  // one past the end
  Status bad = DecodeAdd(Spec("topk:0.1"), reinterpret_cast<const char*>(&record), sizeof(record), 10, 0, sum.data());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("element 10"), std::string::npos);
  EXPECT_EQ(sum, std::vector<float>(10, 0.f));
}

}  // namespace
}  // namespace bps
