// IEEE 754 binary16 ("half") and bfloat16 <-> binary32 conversions for one value.
// Narrowing rounds to nearest, ties to even, overflowing to inf; NaN stays NaN. They work on the bits, so the
// FP rounding mode and flush-to-zero settings of the calling thread do not change the result. FloatToHalf and
// HalfToFloat give the same bits as the F16C instructions, NaN payloads included.
#pragma once

#include <cstdint>
#include <cstring>

namespace bps {

inline uint32_t FloatToBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float HalfToFloat(uint16_t half) {
  const uint32_t sign = uint32_t{half & 0x8000u} << 16;
  const uint32_t exponent = (half >> 10) & 0x1f;
  const uint32_t mantissa = half & 0x3ff;
  if (exponent == 0x1f) {  // inf, or NaN made quiet (as F16C does)
    return BitsToFloat(sign | 0x7f800000 | (mantissa << 13) | (mantissa != 0 ? 0x400000 : 0));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, a normal float, so the product is exact
    return BitsToFloat(sign | FloatToBits(static_cast<float>(mantissa) * 0x1p-24f));
  }
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));  // rebias 15 -> 127
}

inline uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatToBits(value);
  const uint16_t sign = (bits >> 16) & 0x8000;
  const uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) {  // NaN: quiet, keeping the top payload bits (as F16C does)
    return sign | 0x7e00 | ((magnitude >> 13) & 0x3ff);
  }
  if (magnitude >= 0x477ff000) return sign | 0x7c00;  // >= 65520 (halfway past 65504) rounds to inf
  if (magnitude >= 0x38800000) {                      // normal half (>= 2^-14)
    // Rebias the exponent and round the 13 dropped bits to even; a carry correctly bumps the exponent.
    const uint32_t odd = (magnitude >> 13) & 1;
    return sign | ((magnitude - (112u << 23) + 0xfff + odd) >> 13);
  }
  if (magnitude < 0x33000000) return sign;  // below 2^-25, half the smallest subnormal: rounds to zero
  // Subnormal half: count in units of 2^-24, rounding the shifted-out bits to even.
  const uint32_t significand = (magnitude & 0x7fffff) | 0x800000;
  const uint32_t shift = 126 - (magnitude >> 23);  // 14..24
  const uint32_t rounded_down = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  const bool round_up = rest > halfway || (rest == halfway && (rounded_down & 1));
  return sign | (rounded_down + round_up);
}

inline float BFloat16ToFloat(uint16_t bfloat16) { return BitsToFloat(uint32_t{bfloat16} << 16); }

inline uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = FloatToBits(value);
  // NaN: truncate and set the quiet bit, since truncating a NaN whose payload sits in the low bits gives inf.
  if ((bits & 0x7fffffff) > 0x7f800000) return (bits >> 16) | 0x40;
  // Round the 16 dropped bits to even; the largest floats carry into the exponent and become inf.
  return (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
}

}  // namespace bps
