// fp16 / bf16 <-> fp32 conversions (kernels/half_convert.h) against an independent reference:
// 16-bit patterns are decoded with ldexp from their fields, and fp32 -> 16-bit rounding is found by
// binary search in the sorted table of all finite 16-bit values, comparing with the exact
// midpoints between neighbours (ties to the even pattern). No bit tricks are shared with the code
// under test.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/half_convert.h"

namespace zk = zerosim::kernels;

namespace {

struct Format {
  const char* name;
  int mant_bits;      // stored mantissa bits: fp16 10, bf16 7
  int exp_bits;       // fp16 5, bf16 8
  std::uint16_t (*narrow)(float);
  float (*widen)(std::uint16_t);

  [[nodiscard]] int bias() const { return (1 << (exp_bits - 1)) - 1; }
  [[nodiscard]] std::uint16_t inf_bits() const {
    return static_cast<std::uint16_t>(((1u << exp_bits) - 1u) << mant_bits);
  }

  // Value of a 16-bit pattern from its fields: (-1)^s * 2^(e - bias) * (1 + f / 2^mant_bits) for a
  // normal number, 2^(1 - bias) * f / 2^mant_bits for a subnormal one.
  [[nodiscard]] double decode(std::uint16_t b) const {
    const bool neg = (b >> 15) != 0;
    const int e = (b >> mant_bits) & ((1 << exp_bits) - 1);
    const int f = b & ((1 << mant_bits) - 1);
    double mag = 0;
    if (e == (1 << exp_bits) - 1) mag = f == 0 ? INFINITY : NAN;
    else if (e == 0) mag = std::ldexp(static_cast<double>(f), 1 - bias() - mant_bits);
    else mag = std::ldexp(static_cast<double>((1 << mant_bits) + f), e - bias() - mant_bits);
    return neg ? -mag : mag;
  }
};

std::uint16_t narrow_half(float f) { return zk::float_to_half_bits(f); }
std::uint16_t narrow_bf16(float f) { return zk::float_to_bf16_bits(f); }
float widen_half(std::uint16_t b) { return zk::half_bits_to_float(b); }
float widen_bf16(std::uint16_t b) { return zk::bf16_bits_to_float(b); }

const Format kHalf{"fp16", 10, 5, narrow_half, widen_half};
const Format kBf16{"bf16", 7, 8, narrow_bf16, widen_bf16};

// Reference rounding of a non-NaN double (every fp32 value is one) to the nearest 16-bit pattern.
class Rounder {
 public:
  explicit Rounder(const Format& f) : fmt_(f) {
    // Non-negative finite patterns 0 .. inf-1 are sorted by value; entry inf_bits stands for
    // infinity at the value one ulp past the largest finite number (2^16 for fp16, 2^128 for bf16),
    // so overflow rounds like any other step.
    const std::uint16_t inf = f.inf_bits();
    for (std::uint32_t b = 0; b < inf; ++b)
      values_.push_back(f.decode(static_cast<std::uint16_t>(b)));
    const double last = values_.back();
    values_.push_back(last + (last - values_[values_.size() - 2]));
  }

  [[nodiscard]] std::uint16_t round(double x) const {
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::abs(x);
    if (a >= values_.back()) return sign | fmt_.inf_bits();
    // values_[k] <= a < values_[k + 1]
    const auto k = static_cast<std::size_t>(
        std::upper_bound(values_.begin(), values_.end(), a) - values_.begin() - 1);
    const double mid = (values_[k] + values_[k + 1]) / 2;  // exact: one more bit than the format
    std::size_t pick = k;
    if (a > mid || (a == mid && (k & 1) != 0)) pick = k + 1;
    return static_cast<std::uint16_t>(sign | pick);
  }

  [[nodiscard]] const std::vector<double>& values() const { return values_; }

 private:
  const Format& fmt_;
  std::vector<double> values_;
};

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

void expect_nan_narrowing(const Format& fmt, float nan) {
  const std::uint16_t h = fmt.narrow(nan);
  EXPECT_TRUE(std::isnan(fmt.decode(h))) << fmt.name << " from 0x" << std::hex << bits(nan);
  EXPECT_EQ(h >> 15, bits(nan) >> 31) << fmt.name << ": NaN sign from 0x" << std::hex << bits(nan);
}

void check_narrowing(const Format& fmt, const Rounder& ref, float x) {
  if (std::isnan(x)) return expect_nan_narrowing(fmt, x);
  ASSERT_EQ(fmt.narrow(x), ref.round(x))
      << fmt.name << " from fp32 0x" << std::hex << bits(x) << " (" << x << ")";
}

// ---- widening: all 65536 patterns -----------------------------------------------------------

void check_all_widening(const Format& fmt) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const double want = fmt.decode(h);
    const float got = fmt.widen(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << fmt.name << " 0x" << std::hex << b;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << fmt.name << " 0x" << std::hex << b;
      // The payload (including the quiet bit) sits in the top mantissa bits.
      ASSERT_EQ((bits(got) & 0x7FFFFFu) >> (23 - fmt.mant_bits), b & ((1u << fmt.mant_bits) - 1))
          << fmt.name << " NaN payload 0x" << std::hex << b;
    } else {
      // float(want) is exact (every 16-bit value is an fp32 value); compare bits so -0 != +0.
      ASSERT_EQ(bits(got), bits(static_cast<float>(want))) << fmt.name << " 0x" << std::hex << b;
    }
  }
}

TEST(HalfConvert, WideningFp16AllPatterns) { check_all_widening(kHalf); }
TEST(HalfConvert, WideningBf16AllPatterns) { check_all_widening(kBf16); }

// ---- narrowing ------------------------------------------------------------------------------

// Every 16-bit value (both signs), the exact midpoint to its upper neighbour and the fp32 values
// one ulp either side of that midpoint: each rounding decision boundary of the format.
void check_narrowing_at_every_boundary(const Format& fmt) {
  const Rounder ref(fmt);
  const auto& v = ref.values();
  for (std::size_t k = 0; k + 1 < v.size(); ++k) {
    const auto mid = static_cast<float>((v[k] + v[k + 1]) / 2);  // exact in fp32
    ASSERT_EQ(static_cast<double>(mid), (v[k] + v[k + 1]) / 2);
    for (float x : {static_cast<float>(v[k]), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, INFINITY)}) {
      check_narrowing(fmt, ref, x);
      check_narrowing(fmt, ref, -x);
    }
  }
  // Round trip: every non-NaN pattern survives widening and narrowing unchanged.
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    if (std::isnan(fmt.decode(h))) continue;
    ASSERT_EQ(fmt.narrow(fmt.widen(h)), h) << std::hex << b;
  }
}

// About 4.3 million fp32 patterns spread over the whole 32-bit space (every 997th): normals,
// subnormals, infinities and NaNs of both signs.
void check_narrowing_sweep(const Format& fmt) {
  const Rounder ref(fmt);
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 997)
    check_narrowing(fmt, ref, std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  for (std::uint32_t b : {0x7F800001u, 0x7FC00000u, 0x7FFFFFFFu, 0xFF800001u, 0xFFC00000u})
    expect_nan_narrowing(fmt, std::bit_cast<float>(b));
}

TEST(HalfConvert, NarrowingFp16AtEveryBoundary) { check_narrowing_at_every_boundary(kHalf); }
TEST(HalfConvert, NarrowingBf16AtEveryBoundary) { check_narrowing_at_every_boundary(kBf16); }
TEST(HalfConvert, NarrowingFp16Sweep) { check_narrowing_sweep(kHalf); }
TEST(HalfConvert, NarrowingBf16Sweep) { check_narrowing_sweep(kBf16); }

// Hand-derived cases, with the arithmetic.
TEST(HalfConvert, HandDerivedCases) {
  // fp16 largest finite 65504 = (2 - 2^-10) * 2^15; the next step would be 2^16, midpoint 65520.
  EXPECT_EQ(zk::float_to_half_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(zk::float_to_half_bits(65519.996f), 0x7BFF);  // below the midpoint
  EXPECT_EQ(zk::float_to_half_bits(65520.0f), 0x7C00);    // tie: 0x7BFF is odd, so up to inf
  EXPECT_EQ(zk::float_to_half_bits(-1e9f), 0xFC00);
  // Smallest fp16 subnormal 2^-24 = 0x0001; 2^-25 is the tie between 0 and it: even, so 0.
  EXPECT_EQ(zk::float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(zk::float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(zk::float_to_half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(zk::float_to_half_bits(-std::ldexp(1.0f, -26)), 0x8000);  // -0
  // 1 + 2^-11 is halfway between 1 (0x3C00, even) and 1 + 2^-10 (0x3C01): to 0x3C00.
  // 1 + 3 * 2^-11 is halfway between 0x3C01 (odd) and 0x3C02: to 0x3C02.
  EXPECT_EQ(zk::float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(zk::float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // The largest fp16 subnormal (1023 * 2^-24) plus half a unit rounds up into the normal range.
  EXPECT_EQ(zk::float_to_half_bits(1023.5f * std::ldexp(1.0f, -24)), 0x0400);
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 ties to 1 (0x3F80); 1 + 3 * 2^-8 ties up to 0x3F82.
  EXPECT_EQ(zk::float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(zk::float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  // bf16 largest finite 0x7F7F = (2 - 2^-7) * 2^127; FLT_MAX is above the midpoint: inf.
  EXPECT_EQ(zk::float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  // fp32 subnormals are kept: the smallest, 2^-149, is below half the smallest bf16 subnormal
  // 2^-133, so 0; 2^-133 itself is exact.
  EXPECT_EQ(zk::float_to_bf16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(zk::float_to_bf16_bits(std::ldexp(1.0f, -133)), 0x0001);
  static_assert(zk::float_to_half_bits(1.0f) == 0x3C00 && zk::half_bits_to_float(0xC000) == -2.0f);
  static_assert(zk::float_to_bf16_bits(1.0f) == 0x3F80 && zk::bf16_bits_to_float(0x4040) == 3.0f);
}

#if defined(__FLT16_MAX__)
// A second, independent implementation where the compiler has one: _Float16 conversion (libgcc /
// compiler-rt, round to nearest even).
TEST(HalfConvert, Fp16AgreesWithCompilerFloat16) {
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 257) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (std::isnan(x)) continue;
    const auto h = static_cast<_Float16>(x);
    ASSERT_EQ(zk::float_to_half_bits(x), std::bit_cast<std::uint16_t>(h)) << std::hex << b;
  }
}
#endif

}  // namespace
