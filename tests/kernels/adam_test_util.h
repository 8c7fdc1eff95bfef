#pragma once
// Helpers shared by the kernels/ tests: random shards, an independent textbook Adam/AdamW in double
// precision, and the error measure.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/adam_math.h"
#include "kernels/host_adam_shard.h"

namespace zerosim::kernels::test {

// Gradients ~ N(0, 1) * grad_scale, rounded to the shard's dtype.
inline void fill_random_grad(HostAdamShard& s, float grad_scale, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < s.size(); ++i) s.set_grad(i, normal(rng) * grad_scale);
}

// Weights ~ N(0, 1). With `warm`, m ~ N(0, 0.1) and v ~ 0.01 |N(0, 1)|, a state as after many
// steps; otherwise m = v = 0, the state before step 1.
inline HostAdamShard random_shard(std::int64_t n, DType grad_dtype, float grad_scale, bool warm,
                                  std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostAdamShard s(n, grad_dtype);
  for (std::size_t i = 0; i < s.master.size(); ++i) {
    s.master[i] = normal(rng);
    if (warm) {
      s.exp_avg[i] = 0.1f * normal(rng);
      s.exp_avg_sq[i] = 0.01f * std::abs(normal(rng));
    }
  }
  fill_random_grad(s, grad_scale, rng);
  return s;
}

// Largest |got - want| / scale over an array; a NaN counts as an infinite error.
struct MaxErr {
  double value = 0.0;
  std::int64_t index = -1;

  void add(std::int64_t i, double got, double want, double scale) {
    double e = std::abs(got - want) / std::max(scale, 1e-300);
    if (std::isnan(e)) e = INFINITY;
    if (index < 0 || e > value) {
      value = e;
      index = i;
    }
  }
};

struct Errs {
  MaxErr p, m, v;
};

// Adam and AdamW as the torch.optim documentation writes them, in double, state kept in double.
// Written from the formulas, not from kernels/adam_math.h.
//
// fp32 code cannot be judged by |x - ref| / |ref| alone: where a sum cancels (m = beta1 m +
// (1 - beta1) g with opposite signs; Adam's g + wd p), a result near zero carries the rounding
// error of the large terms that were summed, a few ulps of *those*. So each quantity also carries
// the magnitude of what went into it, and errors are measured against that (its condition):
// - m_mag: the same recurrence over |terms|: beta1 m_mag + (1 - beta1) g_mag, where
//   g_mag = |g| (+ wd |p| for Adam);
// - v_mag: beta2 v_mag + (1 - beta2) g_mag^2 (v itself only sums non-negative terms, but g^2
//   inherits g's cancellation);
// - p_mag: the largest of |p| before and after each step and of the step's own terms,
//   lr m_mag_hat / (sqrt(v_hat) + eps) and lr wd |p|.
// Where nothing cancels, m_mag = |m| and v_mag = |v|, and p_mag is |p| unless a step is larger than
// the weight: the measure is then the plain relative error.
struct TextbookAdam {
  std::vector<double> p, m, v;
  std::vector<double> p_mag, m_mag, v_mag;

  explicit TextbookAdam(const HostAdamShard& s)
      : p(s.master.begin(), s.master.end()),
        m(s.exp_avg.begin(), s.exp_avg.end()),
        v(s.exp_avg_sq.begin(), s.exp_avg_sq.end()),
        p_mag(p.size()),
        m_mag(m.size()),
        v_mag(v.size()) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      p_mag[i] = std::abs(p[i]);
      m_mag[i] = std::abs(m[i]);
      v_mag[i] = std::abs(v[i]);
    }
  }

  void step(const HostAdamShard& grads, const AdamParams& hp) {
    const double lr = hp.lr, b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps, wd = hp.weight_decay;
    const auto t = static_cast<double>(hp.step);
    const double bias_correction1 = 1 - std::pow(b1, t);
    const double bias_correction2 = 1 - std::pow(b2, t);
    for (std::size_t i = 0; i < p.size(); ++i) {
      // Widened first: the division and the clip run in double.
      double g = static_cast<double>(grads.grad_at(static_cast<std::int64_t>(i))) / hp.grad_scale *
                 hp.clip_coef;
      double g_mag = std::abs(g);
      if (hp.mode == AdamMode::Adam) {  // L2: the penalty's gradient joins the loss gradient
        g += wd * p[i];
        g_mag += wd * std::abs(p[i]);
      }
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      m_mag[i] = b1 * m_mag[i] + (1 - b1) * g_mag;
      v_mag[i] = b2 * v_mag[i] + (1 - b2) * g_mag * g_mag;
      const double m_hat = m[i] / bias_correction1;
      const double v_hat = v[i] / bias_correction2;
      const double denom = std::sqrt(v_hat) + eps;
      double step_mag = lr * (m_mag[i] / bias_correction1) / denom;
      p_mag[i] = std::max(p_mag[i], std::abs(p[i]));
      if (hp.mode == AdamMode::AdamW) {  // decoupled decay
        step_mag = std::max(step_mag, lr * wd * std::abs(p[i]));
        p[i] -= lr * wd * p[i];
      }
      p[i] -= lr * m_hat / denom;
      p_mag[i] = std::max({p_mag[i], std::abs(p[i]), step_mag});
    }
  }

  // Errors of fp32 (master, m, v)[0, n) against this state, each on its magnitude scale.
  [[nodiscard]] Errs compare(const float* master, const float* m_got, const float* v_got) const {
    Errs e;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const auto ii = static_cast<std::int64_t>(i);
      e.p.add(ii, master[i], p[i], p_mag[i]);
      e.m.add(ii, m_got[i], m[i], m_mag[i]);
      e.v.add(ii, v_got[i], v[i], v_mag[i]);
    }
    return e;
  }

  // Errors of one fp32 result against another (the GPU against the CPU reference), on this
  // state's magnitude scales.
  [[nodiscard]] Errs compare(const float* p_got, const float* m_got, const float* v_got,
                             const float* p_want, const float* m_want, const float* v_want) const {
    Errs e;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const auto ii = static_cast<std::int64_t>(i);
      e.p.add(ii, p_got[i], p_want[i], p_mag[i]);
      e.m.add(ii, m_got[i], m_want[i], m_mag[i]);
      e.v.add(ii, v_got[i], v_want[i], v_mag[i]);
    }
    return e;
  }
};

}  // namespace zerosim::kernels::test
