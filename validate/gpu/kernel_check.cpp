#include "validate/gpu/kernel_check.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/adam_cpu.h"
#include "kernels/adam_cuda.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/half_convert.h"

namespace zerosim::validate::gpu {
namespace {

namespace zk = zerosim::kernels;
constexpr std::int64_t kGuard = 16;
constexpr std::uint16_t kCopySentinel = 0xFFFF;  // NaN in both fp16 and bf16
constexpr float kFloatSentinel = -12345.678f;

std::uint16_t to_16(float f, zk::DType t) {
  return t == zk::DType::F16 ? zk::float_to_half_bits(f) : zk::float_to_bf16_bits(f);
}
float from_16(std::uint16_t h, zk::DType t) {
  return t == zk::DType::F16 ? zk::half_bits_to_float(h) : zk::bf16_bits_to_float(h);
}

struct Case {
  zk::DType grad;
  bool copy;
  zk::DType copy_dtype;
  zk::AdamMode mode;
  std::int64_t n, offset;
};

// One case over three steps; returns the max relative error, or throws a description of the
// first violation.
double run_case(const Case& c, std::mt19937_64& rng) {
  const std::int64_t total = c.n + c.offset + 2 * kGuard;
  const std::int64_t at = kGuard + c.offset;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> master(total, kFloatSentinel), m(total, kFloatSentinel), v(total, kFloatSentinel);
  for (std::int64_t i = at; i < at + c.n; ++i) {
    master[i] = u(rng);
    m[i] = 0.1f * u(rng);
    v[i] = 0.01f * std::fabs(u(rng));
  }
  const std::size_t gsize = zk::dtype_size(c.grad);
  std::vector<std::uint8_t> grad(total * gsize, 0);
  std::vector<std::uint16_t> copy(total, kCopySentinel);

  zk::DeviceBuffer<float> d_master(total), d_m(total), d_v(total);
  zk::DeviceBuffer<std::uint8_t> d_grad(total * gsize);
  zk::DeviceBuffer<std::uint16_t> d_copy(total);
  d_master.copy_from_host(master);
  d_m.copy_from_host(m);
  d_v.copy_from_host(v);
  d_copy.copy_from_host(copy);

  double max_err = 0;
  for (int step = 1; step <= 3; ++step) {
    for (std::int64_t i = at; i < at + c.n; ++i) {
      const float g = u(rng) * (step == 2 ? 100.0f : 1.0f);
      if (c.grad == zk::DType::F32) std::memcpy(&grad[i * 4], &g, 4);
      else {
        const std::uint16_t h = to_16(g, c.grad);
        std::memcpy(&grad[i * 2], &h, 2);
      }
    }
    d_grad.copy_from_host(grad);
    zk::AdamParams p;
    p.mode = c.mode;
    p.weight_decay = 0.01f;
    p.step = step;
    p.lr = 1e-3f;
    p.grad_scale = step == 2 ? 100.0f : 1.0f;

    // CPU reference on the host copy (the state the GPU starts from).
    std::vector<float> rm = master, rmm = m, rv = v;
    zk::AdamShardView hs{rm.data() + at, rmm.data() + at, rv.data() + at, grad.data() + at * gsize, c.grad,
                         nullptr, c.copy_dtype, c.n};
    zk::sharded_adam_cpu(hs, p);

    zk::AdamShardView ds{d_master.data() + at, d_m.data() + at, d_v.data() + at, d_grad.data() + at * gsize,
                         c.grad, c.copy ? static_cast<void*>(d_copy.data() + at) : nullptr, c.copy_dtype, c.n};
    zk::launch_sharded_adam(ds, p);
    std::vector<float> gm(total), gmm(total), gv(total);
    std::vector<std::uint16_t> gc(total);
    d_master.copy_to_host(gm);
    d_m.copy_to_host(gmm);
    d_v.copy_to_host(gv);
    d_copy.copy_to_host(gc);

    auto fail = [&](const std::string& what, std::int64_t i) {
      throw std::runtime_error("step " + std::to_string(step) + ", element " + std::to_string(i - at) + ": " + what);
    };
    for (std::int64_t i = 0; i < total; ++i) {
      const bool inside = i >= at && i < at + c.n;
      if (!inside) {
        if (std::memcmp(&gm[i], &kFloatSentinel, 4) != 0 || std::memcmp(&gmm[i], &kFloatSentinel, 4) != 0 ||
            std::memcmp(&gv[i], &kFloatSentinel, 4) != 0 || gc[i] != kCopySentinel) {
          fail("written outside the shard", i);
        }
        continue;
      }
      if (!std::isfinite(gm[i]) || !std::isfinite(gmm[i]) || !std::isfinite(gv[i])) fail("not finite", i);
      const float g = c.grad == zk::DType::F32 ? [&] { float f; std::memcpy(&f, &grad[i * 4], 4); return f; }()
                                               : [&] { std::uint16_t h; std::memcpy(&h, &grad[i * 2], 2); return from_16(h, c.grad); }();
      const double gs = std::fabs(static_cast<double>(g) / p.grad_scale);
      const double scale_p = std::fabs(master[i]) + std::fabs(static_cast<double>(rm[i]) - master[i]);
      const double scale_m = p.beta1 * std::fabs(m[i]) + (1.0 - p.beta1) * (gs + 0.01 * std::fabs(master[i]));
      const double scale_v = std::fabs(rv[i]);
      auto rel = [](double a, double b, double scale) {
        const double d = std::fabs(a - b);
        return d == 0 ? 0.0 : d / std::max(scale, 1e-30);
      };
      const double e = std::max({rel(gm[i], rm[i], scale_p), rel(gmm[i], rmm[i], scale_m), rel(gv[i], rv[i], scale_v)});
      max_err = std::max(max_err, e);
      if (e > 1e-6) {
        fail("relative error " + std::to_string(e) + " > 1e-6 (gpu " + std::to_string(gm[i]) + " / " +
                 std::to_string(gmm[i]) + " / " + std::to_string(gv[i]) + ", cpu " + std::to_string(rm[i]) +
                 " / " + std::to_string(rmm[i]) + " / " + std::to_string(rv[i]) + ")",
             i);
      }
      if (gmm[i] == m[i] && g != 0) fail("m was not updated", i);
      if (c.copy) {
        if (gc[i] != to_16(gm[i], c.copy_dtype)) fail("16-bit copy is not the rounding of the kernel's master", i);
      } else if (gc[i] != kCopySentinel) {
        fail("16-bit copy written although none was asked for", i);
      }
    }
    master = gm;
    m = gmm;
    v = gv;
  }
  return max_err;
}

}  // namespace

KernelCheckResult run_kernel_check(std::uint64_t seed, std::ostream& log) {
  std::mt19937_64 rng(seed);
  KernelCheckResult res;
  nlohmann::json rows = nlohmann::json::array();
  const std::int64_t lengths[] = {1, 3, 4, 5, 8, 1023, 4099, (std::int64_t{1} << 20) + 3};
  for (zk::DType g : {zk::DType::F32, zk::DType::F16, zk::DType::BF16}) {
    for (int copy = 0; copy < 3; ++copy) {
      const bool has_copy = copy > 0;
      const zk::DType cd = copy == 1 ? zk::DType::F16 : zk::DType::BF16;
      for (zk::AdamMode mode : {zk::AdamMode::Adam, zk::AdamMode::AdamW}) {
        for (std::int64_t n : lengths) {
          for (std::int64_t off : {0, 1, 2, 3}) {
            if (n > 5000 && off != 0 && off != 3) continue;  // big shards: aligned and one misaligned
            const Case c{g, has_copy, cd, mode, n, off};
            ++res.cases;
            res.elements += n;
            nlohmann::json row = {{"grad", std::string(zk::to_string(g))},
                                  {"copy", has_copy ? std::string(zk::to_string(cd)) : "none"},
                                  {"mode", mode == zk::AdamMode::Adam ? "adam" : "adamw"},
                                  {"n", n},
                                  {"offset", off}};
            try {
              const double e = run_case(c, rng);
              res.max_rel_error = std::max(res.max_rel_error, e);
              row["max_rel_error"] = e;
              row["ok"] = true;
            } catch (const std::runtime_error& e) {
              ++res.failures;
              row["ok"] = false;
              row["error"] = e.what();
              log << "FAIL grad=" << zk::to_string(g) << " copy=" << (has_copy ? zk::to_string(cd) : "none")
                  << " mode=" << (mode == zk::AdamMode::Adam ? "adam" : "adamw") << " n=" << n << " offset=" << off
                  << ": " << e.what() << "\n";
            }
            rows.push_back(std::move(row));
          }
        }
      }
    }
  }
  res.json = {{"seed", seed},
              {"cases", res.cases},
              {"failures", res.failures},
              {"elements", res.elements},
              {"max_rel_error", res.max_rel_error},
              {"bound", 1e-6},
              {"rows", rows}};
  log << "kernel-check: " << res.cases << " cases, " << res.failures << " failures, max relative error "
      << res.max_rel_error << " (bound 1e-6), seed " << seed << "\n";
  return res;
}

}  // namespace zerosim::validate::gpu
