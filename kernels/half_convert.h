#pragma once
// Portable IEEE binary16 (fp16) and bfloat16 <-> fp32 conversions on raw 16-bit patterns.
//
// Narrowing rounds to nearest, ties to even, like the hardware conversions the CUDA kernel uses
// (__float2half_rn, __float2bfloat16_rn), so the CPU reference and the GPU agree bit for bit on
// every finite and infinite value:
// - overflow rounds to infinity (fp16: |x| >= 65520; bf16: carries out of the largest exponent);
// - results below the normal range become subnormals (or zero), correctly rounded;
// - fp32 subnormals are honoured, never flushed to zero;
// - a NaN stays a NaN of the same sign; it is made quiet and keeps the top payload bits.
// Widening is exact for every pattern (NaN payloads kept).
//
// Host code only: device code uses the CUDA intrinsics. Tested over all 65536 patterns in
// tests/kernels/test_half_convert.cpp against a table-search reference.

#include <bit>
#include <cstdint>

namespace zerosim::kernels {

[[nodiscard]] constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  if (exp == 0x1Fu) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);  // signed zero
  // Subnormal: value = mant * 2^-24. Shift the leading one into the implicit-bit position.
  std::uint32_t exp32 = 113;  // biased fp32 exponent of 2^-14, the fp16 subnormal scale
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --exp32;
  }
  return std::bit_cast<float>(sign | (exp32 << 23) | ((mant & 0x3FFu) << 13));
}

[[nodiscard]] constexpr std::uint16_t float_to_half_bits(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u)  // NaN: quiet, top 9 payload bits kept
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x1FFu));
  if (ax >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 -> inf
  const std::uint32_t exp = ax >> 23;  // biased fp32 exponent
  std::uint32_t mant = ax & 0x7FFFFFu;
  std::uint32_t h = 0;
  std::uint32_t rem = 0;
  std::uint32_t halfway = 0;
  if (exp >= 113) {  // normal fp16 result (a carry may still round it up to the next binade)
    h = ((exp - 112u) << 10) | (mant >> 13);
    rem = mant & 0x1FFFu;
    halfway = 0x1000u;
  } else {
    if (exp < 102) return sign;  // |x| < 2^-25: rounds to zero (2^-25 itself is handled below)
    // fp16 subnormal: count of 2^-24 units = (mant | implicit one) * 2^(exp - 126).
    mant |= 0x800000u;
    const std::uint32_t shift = 126u - exp;  // 14..24
    h = mant >> shift;
    rem = mant & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
  }
  if (rem > halfway || (rem == halfway && (h & 1u) != 0)) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

[[nodiscard]] constexpr float bf16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

[[nodiscard]] constexpr std::uint16_t float_to_bf16_bits(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: quiet, sign and top payload bits kept
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest even; a carry out of the mantissa
  // bumps the exponent, and out of the largest finite binade gives infinity, as it should.
  const std::uint32_t rounded = x + 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

}  // namespace zerosim::kernels
