#include "cc/compress/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <unordered_set>

namespace bps {
namespace {

struct TopKRecord {
  uint32_t index;
  float value;
};
static_assert(sizeof(TopKRecord) == 8, "top-k records are packed");

// SplitMix64: small, fast, and the same on every platform (std's distributions are not).
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound).
  uint64_t Below(uint64_t bound) { return static_cast<uint64_t>((static_cast<__uint128_t>(Next()) * bound) >> 64); }

 private:
  uint64_t state_;
};

// The loops below are written branch-free, in independent lanes, so that the compiler vectorises them:
// signs are random, and a branch per element would be mispredicted half the time.

// The mean magnitude, summed in double over 8 lanes.
float MeanMagnitude(const float* values, uint64_t n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += std::fabs(values[i + k]);
  }
  double magnitude = 0;
  for (; i < n; ++i) magnitude += std::fabs(values[i]);
  for (double lane : lanes) magnitude += lane;
  return n ? static_cast<float>(magnitude / n) : 0.f;
}

// `scale` with the sign bit `negative` (0 or 1).
inline float Signed(uint32_t scale_bits, uint32_t negative) {
  const uint32_t bits = scale_bits | (negative << 31);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

void EncodeOneBit(float* values, uint64_t n, char* wire, bool feedback) {
  const float scale = MeanMagnitude(values, n);
  std::memcpy(wire, &scale, sizeof(scale));
  auto* bits = reinterpret_cast<uint8_t*>(wire + sizeof(scale));
  for (uint64_t j = 0; j < (n + 7) / 8; ++j) {
    uint8_t byte = 0;
    for (uint64_t b = 0; b < 8 && j * 8 + b < n; ++b) byte |= static_cast<uint8_t>(values[j * 8 + b] < 0) << b;
    bits[j] = byte;
  }
  if (!feedback) return;
  for (uint64_t i = 0; i < n; ++i) values[i] -= values[i] < 0 ? -scale : scale;
}

Status DecodeAddOneBit(const char* wire, uint64_t n, float* sum) {
  float scale;
  std::memcpy(&scale, wire, sizeof(scale));
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof(scale));
  scale_bits &= 0x7FFFFFFFu;  // a scale is a magnitude, whatever the wire says
  const auto* bits = reinterpret_cast<const uint8_t*>(wire + sizeof(scale));
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint32_t byte = bits[i / 8];
    for (uint32_t b = 0; b < 8; ++b) sum[i + b] += Signed(scale_bits, (byte >> b) & 1);
  }
  for (; i < n; ++i) sum[i] += Signed(scale_bits, (bits[i / 8] >> (i % 8)) & 1);
  return Status::OK();
}

// A magnitude to rank by: NaN ranks above everything (a NaN must not break the ordering nth_element needs).
inline float RankOf(float value) { return std::isnan(value) ? INFINITY : std::fabs(value); }

// The k indices of the largest magnitudes, exactly: ranks above the k-th largest, then ties to it by index.
// On a copy of the ranks, nth_element compares directly (faster than through indices).
std::vector<uint32_t> LargestIndicesExactly(const float* values, uint64_t n, uint64_t k) {
  std::vector<float> ranks(n);
  for (uint64_t i = 0; i < n; ++i) ranks[i] = RankOf(values[i]);
  std::nth_element(ranks.begin(), ranks.begin() + (k - 1), ranks.end(), std::greater<float>());
  const float kth = ranks[k - 1];
  uint64_t above = 0;
  for (uint64_t i = 0; i < n; ++i) above += RankOf(values[i]) > kth;
  uint64_t ties = k - std::min(above, k);
  std::vector<uint32_t> chosen;
  chosen.reserve(k);
  for (uint64_t i = 0; i < n && chosen.size() < k; ++i) {
    const float rank = RankOf(values[i]);
    if (rank > kth || (rank == kth && ties > 0 && ties--)) chosen.push_back(static_cast<uint32_t>(i));
  }
  return chosen;
}

// The k indices of the largest magnitudes, ascending; ties go to the lower index, so the choice is the same
// wherever it is made. A threshold estimated from an evenly spaced sample keeps about 2k candidates in one
// pass, and the top k are chosen among them: exact whenever at least k lie strictly above the threshold (all
// of the top k then do). Otherwise (many equal values, such as zeros) the exact method runs on everything.
std::vector<uint32_t> LargestIndices(const float* values, uint64_t n, uint64_t k) {
  if (k == 0) return {};
  if (k * 4 >= n) return LargestIndicesExactly(values, n, k);
  const uint64_t sample_size = std::min<uint64_t>(n, 4096);
  std::vector<float> sample(sample_size);
  for (uint64_t j = 0; j < sample_size; ++j) sample[j] = RankOf(values[j * n / sample_size]);
  const uint64_t position = std::min<uint64_t>(sample_size - 1, 2 * k * sample_size / n);
  std::nth_element(sample.begin(), sample.begin() + position, sample.end(), std::greater<float>());
  const float threshold = sample[position];
  std::vector<uint32_t> candidates;
  candidates.reserve(3 * k);
  for (uint64_t i = 0; i < n; ++i) {
    if (RankOf(values[i]) > threshold) candidates.push_back(static_cast<uint32_t>(i));
  }
  if (candidates.size() < k) return LargestIndicesExactly(values, n, k);
  auto before = [values](uint32_t a, uint32_t b) {
    const float x = RankOf(values[a]), y = RankOf(values[b]);
    return x > y || (x == y && a < b);
  };
  std::nth_element(candidates.begin(), candidates.begin() + (k - 1), candidates.end(), before);
  candidates.resize(k);
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

void EncodeSelected(const std::vector<uint32_t>& indices, float* values, char* wire, bool with_indices, bool feedback) {
  for (size_t j = 0; j < indices.size(); ++j) {
    const uint32_t i = indices[j];
    if (with_indices) {
      TopKRecord record{i, values[i]};
      std::memcpy(wire + j * sizeof(record), &record, sizeof(record));
    } else {
      std::memcpy(wire + j * sizeof(float), &values[i], sizeof(float));
    }
    if (feedback) values[i] = 0;
  }
}

Status CheckTopK(const char* wire, uint64_t n, uint64_t k) {
  for (uint64_t j = 0; j < k; ++j) {
    TopKRecord record;
    std::memcpy(&record, wire + j * sizeof(record), sizeof(record));
    if (record.index >= n) {
      return InvalidArgument("a top-k payload names element " + std::to_string(record.index) + " of a partition of " +
                             std::to_string(n));
    }
  }
  return Status::OK();
}

Status DecodeAddTopK(const char* wire, uint64_t n, uint64_t k, float* sum) {
  for (uint64_t j = 0; j < k; ++j) {
    TopKRecord record;
    std::memcpy(&record, wire + j * sizeof(record), sizeof(record));
    if (record.index >= n) return CheckTopK(wire, n, k);
    sum[record.index] += record.value;
  }
  return Status::OK();
}

}  // namespace

uint64_t KeptElements(const CompressionSpec& spec, uint64_t n) {
  if (n == 0) return 0;
  // Rounded, not ceiled: a float ratio such as 0.3f is a hair above 0.3.
  const auto k = static_cast<uint64_t>(std::llround(static_cast<double>(spec.ratio) * n));
  return std::min<uint64_t>(n, std::max<uint64_t>(1, k));
}

size_t EncodedBytes(const CompressionSpec& spec, uint64_t n) {
  switch (spec.kind) {
    case CodecKind::kNone: return n * sizeof(float);
    case CodecKind::kOneBit: return sizeof(float) + (n + 7) / 8;
    case CodecKind::kTopK: return KeptElements(spec, n) * sizeof(TopKRecord);
    case CodecKind::kRandomK: return KeptElements(spec, n) * sizeof(float);
  }
  return 0;
}

uint64_t PartitionSeed(uint64_t key, uint32_t round) {
  Random mix(key * 0x100000001B3ull ^ round);
  return mix.Next();
}

std::vector<uint32_t> RandomIndices(uint64_t seed, uint64_t n, uint64_t k) {
  Random random(seed);
  std::vector<uint32_t> chosen;
  if (k * 4 >= n) {
    // Many of them: the first k of a partial shuffle.
    std::vector<uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    for (uint64_t i = 0; i < k; ++i) std::swap(all[i], all[i + random.Below(n - i)]);
    chosen.assign(all.begin(), all.begin() + k);
  } else {
    // Few: Floyd's sampling draws k distinct indices in k steps.
    std::unordered_set<uint32_t> seen;
    seen.reserve(k * 2);
    for (uint64_t j = n - k; j < n; ++j) {
      const auto t = static_cast<uint32_t>(random.Below(j + 1));
      const uint32_t pick = seen.count(t) ? static_cast<uint32_t>(j) : t;
      seen.insert(pick);
      chosen.push_back(pick);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

void Encode(const CompressionSpec& spec, float* values, uint64_t n, uint64_t seed, char* wire, bool feedback) {
  switch (spec.kind) {
    case CodecKind::kNone:
      std::memcpy(wire, values, n * sizeof(float));
      if (feedback) std::memset(values, 0, n * sizeof(float));
      return;
    case CodecKind::kOneBit: return EncodeOneBit(values, n, wire, feedback);
    case CodecKind::kTopK:
      return EncodeSelected(LargestIndices(values, n, KeptElements(spec, n)), values, wire, true, feedback);
    case CodecKind::kRandomK:
      return EncodeSelected(RandomIndices(seed, n, KeptElements(spec, n)), values, wire, false, feedback);
  }
}

Status CheckEncoded(const CompressionSpec& spec, const char* wire, size_t bytes, uint64_t n) {
  if (bytes != EncodedBytes(spec, n)) {
    return InvalidArgument("a " + spec.ToString() + " payload of " + std::to_string(bytes) + " bytes for " +
                           std::to_string(n) + " elements; expected " + std::to_string(EncodedBytes(spec, n)));
  }
  return spec.kind == CodecKind::kTopK ? CheckTopK(wire, n, KeptElements(spec, n)) : Status::OK();
}

Status DecodeAdd(const CompressionSpec& spec, const char* wire, size_t bytes, uint64_t n, uint64_t seed, float* sum) {
  if (bytes != EncodedBytes(spec, n)) return CheckEncoded(spec, wire, bytes, n);
  switch (spec.kind) {
    case CodecKind::kNone: {
      const auto* in = reinterpret_cast<const float*>(wire);
      for (uint64_t i = 0; i < n; ++i) sum[i] += in[i];
      return Status::OK();
    }
    case CodecKind::kOneBit: return DecodeAddOneBit(wire, n, sum);
    case CodecKind::kTopK: return DecodeAddTopK(wire, n, KeptElements(spec, n), sum);
    case CodecKind::kRandomK: {
      std::vector<uint32_t> indices = RandomIndices(seed, n, KeptElements(spec, n));
      for (size_t j = 0; j < indices.size(); ++j) {
        float value;
        std::memcpy(&value, wire + j * sizeof(float), sizeof(float));
        sum[indices[j]] += value;
      }
      return Status::OK();
    }
  }
  return InvalidArgument("unknown compression");
}

Status Decode(const CompressionSpec& spec, const char* wire, size_t bytes, uint64_t n, uint64_t seed, float* out) {
  std::memset(out, 0, n * sizeof(float));
  return DecodeAdd(spec, wire, bytes, n, seed, out);
}

}  // namespace bps
