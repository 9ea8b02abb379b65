#include "cc/reducer/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace bps {
namespace {

// An independent reference, written from the formats' definitions: the value of each non-negative code, in
// double. The inf code stands for the next power of two past the largest finite value, because IEEE rounding
// overflows to inf exactly where it would round to that power.
double HalfCodeValue(uint16_t code) {
  const int exponent = code >> 10;
  const int mantissa = code & 0x3ff;
  if (exponent == 0x1f) return 65536.0;
  return exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
}

double BFloat16CodeValue(uint16_t code) {
  const int exponent = code >> 7;
  const int mantissa = code & 0x7f;
  if (exponent == 0xff) return std::ldexp(1.0, 128);
  return exponent == 0 ? std::ldexp(mantissa, -133) : std::ldexp(128 + mantissa, exponent - 134);
}

struct Format {
  uint16_t inf_code;
  double (*code_value)(uint16_t);
};
constexpr Format kHalf = {0x7c00, HalfCodeValue};
constexpr Format kBFloat16 = {0x7f80, BFloat16CodeValue};

// Nearest code to a non-NaN float by search over the ordered codes; ties go to the even code.
uint16_t RoundReference(const Format& format, float value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(value));
  if (magnitude >= format.code_value(format.inf_code)) return sign | format.inf_code;
  uint16_t below = 0, above = format.inf_code;  // code_value(below) <= magnitude < code_value(above)
  while (above - below > 1) {
    const uint16_t middle = (below + above) / 2;
    (format.code_value(middle) <= magnitude ? below : above) = middle;
  }
  const double distance_below = magnitude - format.code_value(below);
  const double distance_above = format.code_value(above) - magnitude;
  if (distance_below != distance_above) return sign | (distance_below < distance_above ? below : above);
  return sign | (below % 2 == 0 ? below : above);
}

std::string Hex(uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", bits);
  return text;
}

// Floats that reach every rounding case: all sign/exponent/top-mantissa combinations with the dropped bits just
// below, at and just above the halfway point, plus every tie position of the subnormal float16 range.
std::vector<float> RoundingProbes(int kept_mantissa_bits) {
  const int dropped = 23 - kept_mantissa_bits;
  const uint32_t halfway = 1u << (dropped - 1);
  const uint32_t low_patterns[] = {0, 1, halfway - 1, halfway, halfway + 1, (1u << dropped) - 1};
  std::vector<float> probes;
  for (uint32_t high = 0; high < (0x7f800000u >> dropped); ++high) {
    for (uint32_t low : low_patterns) {
      for (uint32_t sign : {0u, 0x80000000u}) probes.push_back(BitsToFloat(sign | (high << dropped) | low));
    }
  }
  for (uint32_t exponent = 100; exponent <= 113; ++exponent) {
    for (uint32_t mantissa_high = 0; mantissa_high < (1u << 13); ++mantissa_high) {
      for (uint32_t low : {0u, 1u, 0x3ffu}) {
        probes.push_back(BitsToFloat((exponent << 23) | (mantissa_high << 10) | low));
      }
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) probes.push_back(BitsToFloat(rng() & 0x7f7fffff));  // finite only
  return probes;
}

TEST(HalfTest, EveryHalfConvertsToItsExactValue) {
  for (uint32_t code = 0; code < 0x10000; ++code) {
    const float value = HalfToFloat(code);
    const bool negative = code & 0x8000;
    if ((code & 0x7fff) > 0x7c00) {
      EXPECT_TRUE(std::isnan(value)) << Hex(code);
    } else {
      const double expected = (code & 0x7fff) == 0x7c00 ? INFINITY : HalfCodeValue(code & 0x7fff);
      EXPECT_EQ(static_cast<double>(value), negative ? -expected : expected) << Hex(code);
    }
    EXPECT_EQ(std::signbit(value), negative) << Hex(code);
  }
}

TEST(HalfTest, RoundsNamedCases) {
  const struct {
    float value;
    uint16_t expected;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},  // max finite
      {65519.996f, 0x7bff},  // just below the halfway point to 65536
      {65520.0f, 0x7c00},  // halfway, ties to the even code: inf
      {1e6f, 0x7c00},  // overflow
      {-1e6f, 0xfc00},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {0x1p-14f, 0x0400},  // smallest normal
      {0x1p-14f - 0x1p-25f, 0x0400},  // halfway between largest subnormal 0x03ff and 0x0400: even
      {0x1p-24f, 0x0001},  // smallest subnormal
      {0x1p-25f, 0x0000},  // halfway between 0 and 0x0001: even, zero
      {-0x1p-25f, 0x8000},
      {0x1.000002p-25f, 0x0001},  // just past halfway
      {0x3p-25f, 0x0002},  // halfway between 0x0001 and 0x0002: even
      {0x5p-25f, 0x0002},  // halfway between 0x0002 and 0x0003: even
      {1.0f + 0x1p-11f, 0x3c00},  // halfway between 1 and its successor: even
      {1.0f + 0x3p-11f, 0x3c02},  // halfway between 0x3c01 and 0x3c02: even
      {0x1.002002p0f, 0x3c01},  // just past halfway
      {0x1p-149f, 0x0000},  // float subnormals vanish
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FloatToHalf(c.value), c.expected) << c.value;
  }
}

TEST(HalfTest, NanStaysNan) {
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0xff801000u}) {
    const uint16_t half = FloatToHalf(BitsToFloat(bits));
    EXPECT_GT(half & 0x7fff, 0x7c00) << Hex(bits);  // a NaN even when the payload sits in dropped bits
    EXPECT_EQ(half & 0x8000, (bits >> 16) & 0x8000) << Hex(bits);
  }
}

TEST(HalfTest, MatchesReferenceRounding) {
  for (float value : RoundingProbes(10)) {
    ASSERT_EQ(FloatToHalf(value), RoundReference(kHalf, value)) << Hex(FloatToBits(value));
  }
}

TEST(BFloat16Test, EveryBFloat16ConvertsToItsExactValue) {
  for (uint32_t code = 0; code < 0x10000; ++code) {
    const float value = BFloat16ToFloat(code);
    const bool negative = code & 0x8000;
    if ((code & 0x7fff) > 0x7f80) {
      EXPECT_TRUE(std::isnan(value)) << Hex(code);
    } else {
      const double expected = (code & 0x7fff) == 0x7f80 ? INFINITY : BFloat16CodeValue(code & 0x7fff);
      EXPECT_EQ(static_cast<double>(value), negative ? -expected : expected) << Hex(code);
    }
    EXPECT_EQ(std::signbit(value), negative) << Hex(code);
  }
}

TEST(BFloat16Test, RoundsNamedCases) {
  const struct {
    uint32_t float_bits;
    uint16_t expected;
  } cases[] = {
      {0x00000000, 0x0000},  // +0
      {0x80000000, 0x8000},  // -0
      {0x3f800000, 0x3f80},  // 1
      {0x3f808000, 0x3f80},  // halfway between 1 and its successor: even
      {0x3f818000, 0x3f82},  // halfway between 0x3f81 and 0x3f82: even
      {0x3f808001, 0x3f81},  // just past halfway
      {0x7f7f7fff, 0x7f7f},  // just below halfway past the max finite: max finite
      {0x7f7f8000, 0x7f80},  // halfway past the max finite: even, inf
      {0x7f7fffff, 0x7f80},  // FLT_MAX overflows
      {0xff7fffff, 0xff80},
      {0x7f800000, 0x7f80},  // inf
      {0xff800000, 0xff80},
      {0x00008000, 0x0000},  // halfway between 0 and the smallest subnormal: even, zero
      {0x00018000, 0x0002},  // halfway between subnormals 0x0001 and 0x0002: even
      {0x00010000, 0x0001},  // smallest subnormal
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FloatToBFloat16(BitsToFloat(c.float_bits)), c.expected) << Hex(c.float_bits);
  }
}

TEST(BFloat16Test, NanStaysNan) {
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0xff80ffffu}) {
    const uint16_t bfloat16 = FloatToBFloat16(BitsToFloat(bits));
    EXPECT_GT(bfloat16 & 0x7fff, 0x7f80) << Hex(bits);  // a NaN even when the payload sits in dropped bits
    EXPECT_EQ(bfloat16 & 0x8000, (bits >> 16) & 0x8000) << Hex(bits);
  }
}

TEST(BFloat16Test, MatchesReferenceRounding) {
  for (float value : RoundingProbes(7)) {
    ASSERT_EQ(FloatToBFloat16(value), RoundReference(kBFloat16, value)) << Hex(FloatToBits(value));
  }
}

}  // namespace
}  // namespace bps
