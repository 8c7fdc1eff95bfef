#include "kernels/adam_cpu.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/half_convert.h"

namespace zerosim::kernels {
namespace {

template <DType G>
float load_grad(const void* grad, std::int64_t i) {
  if constexpr (G == DType::F32) {
    return static_cast<const float*>(grad)[i];
  } else if constexpr (G == DType::F16) {
    return half_bits_to_float(static_cast<const std::uint16_t*>(grad)[i]);
  } else {
    return bf16_bits_to_float(static_cast<const std::uint16_t*>(grad)[i]);
  }
}

// C is the copy's dtype; F32 stands for "no copy" (an F32 copy is refused by check_adam_args).
template <DType C>
void store_copy(void* copy, std::int64_t i, float value) {
  if constexpr (C == DType::F16) {
    static_cast<std::uint16_t*>(copy)[i] = float_to_half_bits(value);
  } else if constexpr (C == DType::BF16) {
    static_cast<std::uint16_t*>(copy)[i] = float_to_bf16_bits(value);
  }
}

template <DType G, DType C>
void run(const AdamShardView& s, const AdamScalars& k) {
  for (std::int64_t i = 0; i < s.n; ++i) {
    adam_update_element(k, load_grad<G>(s.grad, i), s.master[i], s.exp_avg[i], s.exp_avg_sq[i]);
    store_copy<C>(s.param_copy, i, s.master[i]);
  }
}

template <DType G>
void dispatch_copy(const AdamShardView& s, const AdamScalars& k) {
  if (s.param_copy == nullptr) return run<G, DType::F32>(s, k);
  switch (s.param_dtype) {
    case DType::F16: return run<G, DType::F16>(s, k);
    case DType::BF16: return run<G, DType::BF16>(s, k);
    case DType::F32: break;
  }
  throw std::invalid_argument("sharded_adam_cpu: unsupported param_dtype " +
                              std::string(to_string(s.param_dtype)));
}

}  // namespace

void sharded_adam_cpu(const AdamShardView& shard, const AdamParams& params) {
  check_adam_args("sharded_adam_cpu", shard, params);
  if (shard.n == 0) return;
  const AdamScalars k = adam_scalars(params);
  switch (shard.grad_dtype) {
    case DType::F32: return dispatch_copy<DType::F32>(shard, k);
    case DType::F16: return dispatch_copy<DType::F16>(shard, k);
    case DType::BF16: return dispatch_copy<DType::BF16>(shard, k);
  }
  throw std::invalid_argument("sharded_adam_cpu: unsupported grad_dtype " +
                              std::string(to_string(shard.grad_dtype)));
}

}  // namespace zerosim::kernels
