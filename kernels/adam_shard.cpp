#include "kernels/adam_shard.h"

#include <cmath>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

namespace zerosim::kernels {

std::string_view to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "invalid";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
  }
  throw std::invalid_argument("dtype_size: unknown dtype " +
                              std::to_string(static_cast<std::int32_t>(dtype)));
}

AdamShardView slice(const AdamShardView& shard, std::int64_t begin, std::int64_t end) {
  if (begin < 0 || begin > end || end > shard.n) {
    throw std::out_of_range("slice: [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") is not inside a shard of " + std::to_string(shard.n) + " elements");
  }
  AdamShardView s = shard;
  s.master += begin;
  s.exp_avg += begin;
  s.exp_avg_sq += begin;
  s.grad = static_cast<const std::byte*>(shard.grad) + begin * dtype_size(shard.grad_dtype);
  if (s.param_copy != nullptr) s.param_copy = static_cast<std::uint16_t*>(s.param_copy) + begin;
  s.n = end - begin;
  return s;
}

namespace {

class ArgChecker {
 public:
  explicit ArgChecker(std::string_view caller) : caller_(caller) {}

  template <class T>
  void require(bool ok, std::string_view name, std::string_view rule, const T& got) const {
    if (ok) return;
    std::ostringstream msg;
    msg << caller_ << ": argument '" << name << "' " << rule << ", got " << got;
    throw std::invalid_argument(msg.str());
  }

  void pointer(const void* p, std::string_view name, std::int64_t n, std::size_t align) const {
    require(n == 0 || p != nullptr, name, "must not be null when n > 0", "nullptr");
    require(reinterpret_cast<std::uintptr_t>(p) % align == 0, name,
            "must be aligned to its element size of " + std::to_string(align) + " bytes", p);
  }

 private:
  std::string_view caller_;
};

bool valid_dtype(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

}  // namespace

void check_adam_args(std::string_view caller, const AdamShardView& s, const AdamParams& p) {
  const ArgChecker c(caller);
  c.require(s.n >= 0, "n", "must be >= 0", s.n);
  c.require(valid_dtype(s.grad_dtype), "grad_dtype", "must be f32, f16 or bf16",
            static_cast<std::int32_t>(s.grad_dtype));
  if (s.param_copy != nullptr)
    c.require(s.param_dtype == DType::F16 || s.param_dtype == DType::BF16, "param_dtype",
              "must be f16 or bf16 when param_copy is given", to_string(s.param_dtype));
  c.pointer(s.master, "master", s.n, sizeof(float));
  c.pointer(s.exp_avg, "exp_avg", s.n, sizeof(float));
  c.pointer(s.exp_avg_sq, "exp_avg_sq", s.n, sizeof(float));
  c.pointer(s.grad, "grad", s.n, dtype_size(s.grad_dtype));
  if (s.param_copy != nullptr) c.pointer(s.param_copy, "param_copy", s.n, 2);

  c.require(std::isfinite(p.lr) && p.lr >= 0.0f, "lr", "must be finite and >= 0", p.lr);
  c.require(p.beta1 >= 0.0f && p.beta1 < 1.0f, "beta1", "must be in [0, 1)", p.beta1);
  c.require(p.beta2 >= 0.0f && p.beta2 < 1.0f, "beta2", "must be in [0, 1)", p.beta2);
  c.require(std::isfinite(p.eps) && p.eps > 0.0f, "eps", "must be finite and > 0", p.eps);
  c.require(std::isfinite(p.weight_decay) && p.weight_decay >= 0.0f, "weight_decay",
            "must be finite and >= 0", p.weight_decay);
  c.require(p.step >= 1, "step", "must be >= 1 (1-based, for bias correction)", p.step);
  c.require(p.mode == AdamMode::Adam || p.mode == AdamMode::AdamW, "mode", "must be Adam or AdamW",
            static_cast<std::int32_t>(p.mode));
  c.require(std::isfinite(p.grad_scale) && p.grad_scale > 0.0f, "grad_scale",
            "must be finite and > 0", p.grad_scale);
  c.require(std::isfinite(p.clip_coef) && p.clip_coef >= 0.0f, "clip_coef",
            "must be finite and >= 0", p.clip_coef);
}

}  // namespace zerosim::kernels
