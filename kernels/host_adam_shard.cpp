#include "kernels/host_adam_shard.h"

#include <cstring>
#include <stdexcept>

#include "kernels/half_convert.h"

namespace zerosim::kernels {
namespace {

// Calls f with g as an element of dtype d: the float itself or its 16-bit pattern.
template <class F>
void with_grad_element(DType d, float g, F&& f) {
  if (d == DType::F32) {
    f(g);
  } else {
    f(d == DType::F16 ? float_to_half_bits(g) : float_to_bf16_bits(g));
  }
}

}  // namespace

HostAdamShard::HostAdamShard(std::int64_t n, DType grad_type, std::optional<DType> copy_type)
    : grad_dtype(grad_type) {
  if (n < 0) throw std::invalid_argument("HostAdamShard: n must be >= 0");
  const auto un = static_cast<std::size_t>(n);
  master.resize(un);
  exp_avg.resize(un);
  exp_avg_sq.resize(un);
  grad.resize(un * dtype_size(grad_dtype));
  if (copy_type) {
    param_dtype = *copy_type;
    param_copy.resize(un);
  }
}

float HostAdamShard::grad_at(std::int64_t i) const {
  const auto at = static_cast<std::size_t>(i) * dtype_size(grad_dtype);
  if (grad_dtype == DType::F32) {
    float g = 0;
    std::memcpy(&g, grad.data() + at, sizeof g);
    return g;
  }
  std::uint16_t bits = 0;
  std::memcpy(&bits, grad.data() + at, sizeof bits);
  return grad_dtype == DType::F16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits);
}

void HostAdamShard::set_grad(std::int64_t i, float g) {
  with_grad_element(grad_dtype, g, [&](auto e) {
    std::memcpy(grad.data() + static_cast<std::size_t>(i) * sizeof e, &e, sizeof e);
  });
}

void HostAdamShard::fill_grad(float g) {
  // One rounding, then its bytes repeated: a shard can hold billions of elements.
  with_grad_element(grad_dtype, g, [&](auto e) {
    for (std::size_t at = 0; at < grad.size(); at += sizeof e) {
      std::memcpy(grad.data() + at, &e, sizeof e);
    }
  });
}

AdamShardView HostAdamShard::view() {
  const std::size_t n = master.size();
  if (exp_avg.size() != n || exp_avg_sq.size() != n || grad.size() != n * dtype_size(grad_dtype) ||
      (!param_copy.empty() && param_copy.size() != n)) {
    throw std::logic_error("HostAdamShard: the arrays' lengths disagree");
  }
  return {master.data(),
          exp_avg.data(),
          exp_avg_sq.data(),
          grad.data(),
          grad_dtype,
          param_copy.empty() ? nullptr : param_copy.data(),
          param_dtype,
          static_cast<std::int64_t>(n)};
}

AdamShardView HostAdamShard::view(std::int64_t begin, std::int64_t end) {
  return slice(view(), begin, end);
}

}  // namespace zerosim::kernels
