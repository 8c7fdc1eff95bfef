#pragma once
// The per-element Adam/AdamW update: one piece of code, compiled by nvcc into the CUDA kernel
// (kernels/adam_cuda.cu) and by the host compiler into the CPU reference (kernels/adam_cpu.cpp).
//
// Order of operations for one element, all in fp32 (g is the gradient widened to fp32, p the fp32
// master weight, m and v the fp32 moments, t = step >= 1):
//   1. g = g * (clip_coef / grad_scale)          unscale the loss-scaled gradient, then clip
//   2. Adam only:   g = g + weight_decay * p      L2 penalty enters the gradient (torch.optim.Adam)
//   3. m = beta1 * m + (1 - beta1) * g
//   4. v = beta2 * v + (1 - beta2) * g * g
//   5. m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)   bias correction
//   6. delta = lr * m_hat / (sqrt(v_hat) + eps)    eps outside the square root, as in torch
//   7. AdamW only:  delta = delta + lr * weight_decay * p
//                                     decoupled decay of the pre-update weight (torch.optim.AdamW,
//                                     Loshchilov & Hutter)
//   8. p = p - delta                  one rounding of p per step (torch rounds twice for AdamW:
//                                     p *= 1 - lr wd, then p -= ...; equal in exact arithmetic)
// The per-launch constants (clip_coef / grad_scale, 1 - beta, 1 / (1 - beta^t), lr * weight_decay)
// are computed once on the host in double and rounded to fp32 (adam_scalars()), so the kernel and
// the CPU reference see the same constants. The divisions of step 5 are multiplications by those
// reciprocals. nvcc may contract a*b+c into an FMA where the host compiler does not, so GPU and CPU
// results agree to a few ulps, not bit for bit.
//
// A non-finite gradient propagates into m, v and p; detecting overflow and skipping the step is the
// caller's business (as in apex/DeepSpeed, where a separate pass checks for inf/NaN).

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ZEROSIM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ZEROSIM_HOST_DEVICE inline
#endif

namespace zerosim::kernels {

enum class AdamMode : std::int32_t {
  Adam = 0,   // weight decay as an L2 term added to the gradient
  AdamW = 1,  // decoupled weight decay applied to the weight
};

// Hyper-parameters of one optimizer step, as a framework passes them.
struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;          // in [0, 1)
  float beta2 = 0.999f;        // in [0, 1)
  float eps = 1e-8f;           // > 0
  float weight_decay = 0.0f;   // >= 0
  std::int64_t step = 1;       // 1-based step count, for bias correction
  AdamMode mode = AdamMode::AdamW;
  float grad_scale = 1.0f;     // loss scale: the gradient is multiplied by 1 / grad_scale (> 0)
  float clip_coef = 1.0f;      // gradient-norm clip coefficient, multiplied in (>= 0; 1 = no clip)
};

// Per-launch constants derived from AdamParams. Trivially copyable: passed to the kernel by value.
struct AdamScalars {
  float lr;
  float beta1;
  float beta2;
  float one_minus_beta1;
  float one_minus_beta2;
  float eps;
  float grad_mul;                // clip_coef / grad_scale
  float inv_bias_correction1;    // 1 / (1 - beta1^step)
  float inv_bias_correction2;    // 1 / (1 - beta2^step)
  float l2_decay;                // Adam: weight_decay; AdamW: 0
  float decoupled_decay;         // AdamW: lr * weight_decay; Adam: 0
  AdamMode mode;
};

// Host only. Expects arguments already checked (check_adam_args in kernels/adam_shard.h).
[[nodiscard]] inline AdamScalars adam_scalars(const AdamParams& p) {
  const double b1 = p.beta1;
  const double b2 = p.beta2;
  const auto t = static_cast<double>(p.step);
  AdamScalars s{};
  s.lr = p.lr;
  s.beta1 = p.beta1;
  s.beta2 = p.beta2;
  s.one_minus_beta1 = static_cast<float>(1.0 - b1);
  s.one_minus_beta2 = static_cast<float>(1.0 - b2);
  s.eps = p.eps;
  s.grad_mul = static_cast<float>(static_cast<double>(p.clip_coef) / p.grad_scale);
  s.inv_bias_correction1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, t)));
  s.inv_bias_correction2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, t)));
  const bool adamw = p.mode == AdamMode::AdamW;
  s.l2_decay = adamw ? 0.0f : p.weight_decay;
  s.decoupled_decay = adamw ? static_cast<float>(static_cast<double>(p.lr) * p.weight_decay) : 0.0f;
  s.mode = p.mode;
  return s;
}

// Steps 1-8 above for one element; master, m and v are updated in place.
ZEROSIM_HOST_DEVICE void adam_update_element(const AdamScalars& s, float grad, float& master,
                                             float& m, float& v) {
  float g = grad * s.grad_mul;
  const float p = master;
  if (s.mode == AdamMode::Adam) g = g + s.l2_decay * p;
  const float m_new = s.beta1 * m + s.one_minus_beta1 * g;
  const float v_new = s.beta2 * v + s.one_minus_beta2 * (g * g);
  const float m_hat = m_new * s.inv_bias_correction1;
  const float v_hat = v_new * s.inv_bias_correction2;
#if defined(__CUDA_ARCH__)
  const float denom = sqrtf(v_hat) + s.eps;
#else
  const float denom = std::sqrt(v_hat) + s.eps;
#endif
  float delta = s.lr * (m_hat / denom);
  if (s.mode == AdamMode::AdamW) delta = delta + s.decoupled_decay * p;
  master = p - delta;
  m = m_new;
  v = v_new;
}

}  // namespace zerosim::kernels
