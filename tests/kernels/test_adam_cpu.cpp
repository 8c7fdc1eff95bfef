// CPU reference of the sharded Adam/AdamW step (kernels/adam_cpu.h) against the textbook formulas
// in double (tests/kernels/adam_test_util.h), over every gradient and parameter-copy dtype, many
// lengths and misaligned sub-spans; plus the argument checks.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/adam_cpu.h"
#include "kernels/half_convert.h"
#include "tests/kernels/adam_test_util.h"

namespace zk = zerosim::kernels;
namespace zt = zerosim::kernels::test;
using zk::AdamMode;
using zk::DType;

namespace {

// fp32 state against double state, measured on each quantity's magnitude scale (see TextbookAdam):
// a few fp32 roundings per step (2^-24 ~ 6e-8 each), over a handful of steps, stay inside this.
constexpr double kTol = 1e-6;

zk::AdamParams mixed_precision_params(AdamMode mode) {
  zk::AdamParams hp;
  hp.lr = 1e-3f;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.999f;
  hp.eps = 1e-8f;
  hp.weight_decay = 0.01f;
  hp.mode = mode;
  hp.grad_scale = 1024.0f;  // a loss scale: gradients arrive 1024x too large
  hp.clip_coef = 0.5f;      // and the global norm asks to halve them
  return hp;
}

void expect_within_tolerance(const zt::Errs& e, const std::string& what) {
  EXPECT_LE(e.p.value, kTol) << what << ": master, worst element " << e.p.index;
  EXPECT_LE(e.m.value, kTol) << what << ": exp_avg, worst element " << e.m.index;
  EXPECT_LE(e.v.value, kTol) << what << ": exp_avg_sq, worst element " << e.v.index;
}

std::string name(DType d) { return std::string(zk::to_string(d)); }

// ---- several steps against the textbook, every mode and gradient dtype -----------------------

class TextbookAgreement : public ::testing::TestWithParam<std::tuple<AdamMode, DType, bool>> {};

TEST_P(TextbookAgreement, SeveralSteps) {
  const auto [mode, grad_dtype, warm] = GetParam();
  std::mt19937_64 rng(42);
  zk::AdamParams hp = mixed_precision_params(mode);
  // Cold: steps 1..5 from m = v = 0, where bias correction matters most. Warm: steps 1000..1004
  // from a state with moments already built up.
  hp.step = warm ? 1000 : 1;
  zk::HostAdamShard s = zt::random_shard(4099, grad_dtype, hp.grad_scale, warm, rng);
  zt::TextbookAdam ref(s);
  for (int k = 0; k < 5; ++k, ++hp.step) {
    zt::fill_random_grad(s, hp.grad_scale, rng);
    zk::sharded_adam_cpu(s.view(), hp);
    ref.step(s, hp);
    expect_within_tolerance(ref.compare(s.master.data(), s.exp_avg.data(), s.exp_avg_sq.data()),
                            "step " + std::to_string(hp.step));
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllModesAndDtypes, TextbookAgreement,
    ::testing::Combine(::testing::Values(AdamMode::Adam, AdamMode::AdamW),
                       ::testing::Values(DType::F32, DType::F16, DType::BF16), ::testing::Bool()),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == AdamMode::Adam ? "Adam_" : "AdamW_") +
             name(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_warm" : "_cold");
    });

// Larger steps: lr 0.1 and weight decay 0.1 make the decay term and the update comparable to p.
TEST(AdamCpu, LargeLearningRateAndDecay) {
  for (AdamMode mode : {AdamMode::Adam, AdamMode::AdamW}) {
    std::mt19937_64 rng(7);
    zk::AdamParams hp = mixed_precision_params(mode);
    hp.lr = 0.1f;
    hp.weight_decay = 0.1f;
    hp.clip_coef = 1.0f;
    zk::HostAdamShard s = zt::random_shard(1000, DType::F32, hp.grad_scale, false, rng);
    zt::TextbookAdam ref(s);
    for (; hp.step <= 5; ++hp.step) {
      zt::fill_random_grad(s, hp.grad_scale, rng);
      zk::sharded_adam_cpu(s.view(), hp);
      ref.step(s, hp);
      expect_within_tolerance(ref.compare(s.master.data(), s.exp_avg.data(), s.exp_avg_sq.data()),
                              mode == AdamMode::Adam ? "Adam" : "AdamW");
    }
  }
}

// ---- one element by hand ---------------------------------------------------------------------

// p = 1, raw gradient 8, grad_scale 4, clip 0.5: g = 8 / 4 * 0.5 = 1. Step 1, beta1 0.5 and
// beta2 0.75 (exact in binary, so m and v come out exact), lr 0.1, weight decay 0.5, eps 1e-8
// (negligible next to sqrt(v_hat) = O(1)).
TEST(AdamCpu, OneElementByHand) {
  auto run = [](AdamMode mode) {
    float p = 1.0f, m = 0.0f, v = 0.0f, g = 8.0f;
    zk::AdamShardView s{&p, &m, &v, &g, DType::F32, nullptr, DType::BF16, 1};
    zk::AdamParams hp{0.1f, 0.5f, 0.75f, 1e-8f, 0.5f, 1, mode, 4.0f, 0.5f};
    zk::sharded_adam_cpu(s, hp);
    return std::tuple{p, m, v};
  };
  // AdamW: m = 0.5 * 1 = 0.5, v = 0.25 * 1 = 0.25; m_hat = 0.5 / (1 - 0.5) = 1,
  // v_hat = 0.25 / (1 - 0.75) = 1; p = 1 - 0.1 * 0.5 * 1 (decay) - 0.1 * 1 / (1 + eps) = 0.85.
  const auto [pw, mw, vw] = run(AdamMode::AdamW);
  EXPECT_EQ(mw, 0.5f);
  EXPECT_EQ(vw, 0.25f);
  EXPECT_NEAR(pw, 0.85, 1e-7);
  // Adam (L2): g = 1 + 0.5 * 1 = 1.5; m = 0.75, v = 0.25 * 2.25 = 0.5625; m_hat = 1.5,
  // v_hat = 2.25, sqrt = 1.5; p = 1 - 0.1 * 1.5 / 1.5 = 0.9.
  const auto [pa, ma, va] = run(AdamMode::Adam);
  EXPECT_EQ(ma, 0.75f);
  EXPECT_EQ(va, 0.5625f);
  EXPECT_NEAR(pa, 0.9, 1e-7);
}

// ---- lengths, misaligned sub-spans, every grad x copy dtype ----------------------------------

constexpr std::int64_t kGuard = 8;  // elements around the span, which must stay untouched
const std::uint32_t kSentinelF32 = 0x7FBADBADu;  // a NaN pattern no update produces
constexpr std::uint16_t kSentinel16 = 0xDEAD;

class LengthsAndOffsets : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(LengthsAndOffsets, EveryDtypeAndOffset) {
  const std::int64_t n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  for (DType grad_dtype : {DType::F32, DType::F16, DType::BF16}) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(n) * 31 +
                        static_cast<std::uint64_t>(grad_dtype));
    zk::AdamParams hp = mixed_precision_params(AdamMode::AdamW);
    hp.step = 7;
    const zk::HostAdamShard base = zt::random_shard(n, grad_dtype, hp.grad_scale, true, rng);
    zt::TextbookAdam ref(base);
    ref.step(base, hp);
    const std::size_t gsize = zk::dtype_size(grad_dtype);

    for (std::int64_t offset = 0; offset <= 3; ++offset) {
      for (int copy = 0; copy < 3; ++copy) {  // none, f16, bf16
        const DType copy_dtype = copy == 1 ? DType::F16 : DType::BF16;
        const std::string what = "n=" + std::to_string(n) + " grad=" + name(grad_dtype) +
                                 " offset=" + std::to_string(offset) +
                                 " copy=" + (copy == 0 ? "none" : name(copy_dtype));
        const auto total = un + kGuard;
        const float sentinel = std::bit_cast<float>(kSentinelF32);
        std::vector<float> master(total, sentinel), m(total, sentinel), v(total, sentinel);
        std::vector<std::uint8_t> grad(total * gsize, 0xAB);
        std::vector<std::uint16_t> out16(total, kSentinel16);
        const auto off = static_cast<std::size_t>(offset);
        std::copy(base.master.begin(), base.master.end(), master.begin() + offset);
        std::copy(base.exp_avg.begin(), base.exp_avg.end(), m.begin() + offset);
        std::copy(base.exp_avg_sq.begin(), base.exp_avg_sq.end(), v.begin() + offset);
        std::copy(base.grad.begin(), base.grad.end(), grad.begin() + offset * gsize);

        zk::AdamShardView s{master.data() + off, m.data() + off, v.data() + off,
                            grad.data() + off * gsize, grad_dtype,
                            copy == 0 ? nullptr : out16.data() + off, copy_dtype, n};
        zk::sharded_adam_cpu(s, hp);

        expect_within_tolerance(ref.compare(s.master, s.exp_avg, s.exp_avg_sq), what);
        for (std::size_t i = 0; i < total; ++i) {
          if (i >= off && i < off + un) continue;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(master[i]), kSentinelF32) << what << " @" << i;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(m[i]), kSentinelF32) << what << " @" << i;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(v[i]), kSentinelF32) << what << " @" << i;
        }
        for (std::size_t i = 0; i < total; ++i) {
          const bool inside = copy != 0 && i >= off && i < off + un;
          if (!inside) {
            ASSERT_EQ(out16[i], kSentinel16) << what << " copy written outside the span at " << i;
          } else {
            const std::uint16_t want = copy_dtype == DType::F16 ? zk::float_to_half_bits(master[i])
                                                                : zk::float_to_bf16_bits(master[i]);
            ASSERT_EQ(out16[i], want) << what << ": copy is not the rounded master at " << i - off;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, LengthsAndOffsets,
                         ::testing::Values(0, 1, 3, 4, 5, 17, 1000003),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// ---- arguments -------------------------------------------------------------------------------

struct Valid {
  float p[4]{}, m[4]{}, v[4]{}, g[4]{};
  std::uint16_t copy[4]{};
  zk::AdamShardView shard{p, m, v, g, DType::F32, copy, DType::BF16, 4};
  zk::AdamParams hp{};
};

// Runs the step with one thing broken and expects std::invalid_argument naming `arg`.
void expect_rejected(const std::function<void(Valid&)>& breakit, const std::string& arg) {
  Valid c;
  breakit(c);
  try {
    zk::sharded_adam_cpu(c.shard, c.hp);
    ADD_FAILURE() << "no exception for bad '" << arg << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'" + arg + "'"), std::string::npos)
        << "message does not name '" << arg << "': " << e.what();
  }
}

TEST(AdamCpu, RejectsBadArguments) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_rejected([](Valid& c) { c.shard.n = -1; }, "n");
  expect_rejected([](Valid& c) { c.shard.master = nullptr; }, "master");
  expect_rejected([](Valid& c) { c.shard.exp_avg = nullptr; }, "exp_avg");
  expect_rejected([](Valid& c) { c.shard.exp_avg_sq = nullptr; }, "exp_avg_sq");
  expect_rejected([](Valid& c) { c.shard.grad = nullptr; }, "grad");
  expect_rejected([](Valid& c) { c.shard.master = reinterpret_cast<float*>(
                                     reinterpret_cast<char*>(c.p) + 1); }, "master");
  expect_rejected([](Valid& c) { c.shard.param_copy = reinterpret_cast<char*>(c.copy) + 1; },
                  "param_copy");
  expect_rejected([](Valid& c) { c.hp.lr = -1e-3f; }, "lr");
  expect_rejected([nan](Valid& c) { c.hp.lr = nan; }, "lr");
  expect_rejected([](Valid& c) { c.hp.beta1 = 1.0f; }, "beta1");
  expect_rejected([](Valid& c) { c.hp.beta1 = -0.1f; }, "beta1");
  expect_rejected([nan](Valid& c) { c.hp.beta1 = nan; }, "beta1");
  expect_rejected([](Valid& c) { c.hp.beta2 = 1.0f; }, "beta2");
  expect_rejected([](Valid& c) { c.hp.eps = 0.0f; }, "eps");
  expect_rejected([inf](Valid& c) { c.hp.eps = inf; }, "eps");
  expect_rejected([](Valid& c) { c.hp.weight_decay = -0.1f; }, "weight_decay");
  expect_rejected([](Valid& c) { c.hp.step = 0; }, "step");
  expect_rejected([](Valid& c) { c.hp.mode = static_cast<AdamMode>(5); }, "mode");
  expect_rejected([](Valid& c) { c.hp.grad_scale = 0.0f; }, "grad_scale");
  expect_rejected([inf](Valid& c) { c.hp.grad_scale = inf; }, "grad_scale");
  expect_rejected([](Valid& c) { c.hp.clip_coef = -1.0f; }, "clip_coef");
  expect_rejected([nan](Valid& c) { c.hp.clip_coef = nan; }, "clip_coef");
}

TEST(AdamCpu, RejectsUnsupportedDtypes) {
  // An fp32 "copy" would be the master itself: refused rather than silently ignored.
  expect_rejected([](Valid& c) { c.shard.param_dtype = DType::F32; }, "param_dtype");
  expect_rejected([](Valid& c) { c.shard.param_dtype = static_cast<DType>(9); }, "param_dtype");
  expect_rejected([](Valid& c) { c.shard.grad_dtype = static_cast<DType>(9); }, "grad_dtype");
  EXPECT_THROW((void)zk::dtype_size(static_cast<DType>(9)), std::invalid_argument);
}

TEST(AdamCpu, ValidArgumentsAccepted) {
  Valid c;
  EXPECT_NO_THROW(zk::sharded_adam_cpu(c.shard, c.hp));
  c.shard.param_copy = nullptr;
  c.shard.param_dtype = DType::F32;  // ignored without a copy
  EXPECT_NO_THROW(zk::sharded_adam_cpu(c.shard, c.hp));
}

// ---- the owning shard and its slices ---------------------------------------------------------

TEST(HostAdamShard, ViewCoversEveryArray) {
  zk::HostAdamShard s(5, DType::BF16, DType::F16);
  const zk::AdamShardView v = s.view();
  EXPECT_EQ(v.master, s.master.data());
  EXPECT_EQ(v.exp_avg, s.exp_avg.data());
  EXPECT_EQ(v.exp_avg_sq, s.exp_avg_sq.data());
  EXPECT_EQ(v.grad, s.grad.data());
  EXPECT_EQ(v.grad_dtype, DType::BF16);
  EXPECT_EQ(v.param_copy, s.param_copy.data());
  EXPECT_EQ(v.param_dtype, DType::F16);
  EXPECT_EQ(v.n, 5);
  EXPECT_EQ(zk::HostAdamShard(5).view().param_copy, nullptr);
  s.exp_avg.pop_back();
  EXPECT_THROW((void)s.view(), std::logic_error);
}

TEST(HostAdamShard, SlicesAdvanceEveryArrayByItsElementSize) {
  zk::HostAdamShard s(10, DType::F16, DType::BF16);
  const zk::AdamShardView v = s.view(3, 7);
  EXPECT_EQ(v.master, s.master.data() + 3);
  EXPECT_EQ(v.exp_avg, s.exp_avg.data() + 3);
  EXPECT_EQ(v.exp_avg_sq, s.exp_avg_sq.data() + 3);
  EXPECT_EQ(v.grad, s.grad.data() + 3 * 2);
  EXPECT_EQ(v.param_copy, s.param_copy.data() + 3);
  EXPECT_EQ(v.n, 4);
  EXPECT_EQ(s.view(10, 10).n, 0);
  EXPECT_THROW((void)s.view(-1, 2), std::out_of_range);
  EXPECT_THROW((void)s.view(4, 3), std::out_of_range);
  EXPECT_THROW((void)s.view(0, 11), std::out_of_range);
  zk::HostAdamShard f32(10);
  EXPECT_EQ(f32.view(2, 4).grad, f32.grad.data() + 2 * 4);
  EXPECT_EQ(f32.view(2, 4).param_copy, nullptr);
}

TEST(HostAdamShard, GradientsRoundToTheirDtype) {
  const float g = 1.0f + 1.0f / 1024.0f + 1.0f / 4096.0f;  // needs more than bf16's 8 bits
  zk::HostAdamShard f32(3, DType::F32), f16(3, DType::F16), bf16(3, DType::BF16);
  for (zk::HostAdamShard* s : {&f32, &f16, &bf16}) {
    s->fill_grad(g);
    s->set_grad(1, -2.0f);
  }
  EXPECT_EQ(f32.grad_at(0), g);
  EXPECT_EQ(f16.grad_at(2), zk::half_bits_to_float(zk::float_to_half_bits(g)));
  EXPECT_EQ(bf16.grad_at(0), zk::bf16_bits_to_float(zk::float_to_bf16_bits(g)));
  EXPECT_EQ(bf16.grad_at(1), -2.0f);
  EXPECT_EQ(f32.grad.size(), 12u);
  EXPECT_EQ(f16.grad.size(), 6u);
}

TEST(AdamCpu, EmptyShardTouchesNothingAndAllowsNull) {
  zk::AdamShardView s;  // all null, n = 0
  EXPECT_NO_THROW(zk::sharded_adam_cpu(s, zk::AdamParams{}));
}

}  // namespace
