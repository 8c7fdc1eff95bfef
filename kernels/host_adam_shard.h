#pragma once
// HostAdamShard: owns one shard's arrays in host memory and hands out the AdamShardView the CPU
// reference takes, so that callers neither keep parallel vectors in step nor fill views by hand.

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/adam_shard.h"

namespace zerosim::kernels {

struct HostAdamShard {
  HostAdamShard() = default;
  // n elements, all zero (bits, for the gradient and the copy). Without param_dtype the shard has
  // no 16-bit parameter copy.
  explicit HostAdamShard(std::int64_t n, DType grad_type = DType::F32,
                         std::optional<DType> copy_type = std::nullopt);

  std::vector<float> master, exp_avg, exp_avg_sq;
  // Raw grad_dtype elements: the kernels take 16-bit gradients as they arrive from a reduction.
  std::vector<std::uint8_t> grad;
  DType grad_dtype = DType::F32;
  std::vector<std::uint16_t> param_copy;  // empty: no copy
  DType param_dtype = DType::BF16;

  [[nodiscard]] std::int64_t size() const noexcept {
    return static_cast<std::int64_t>(master.size());
  }

  // Gradient element i as fp32 (exact for every dtype). Writes round g to grad_dtype, to nearest
  // even.
  [[nodiscard]] float grad_at(std::int64_t i) const;
  void set_grad(std::int64_t i, float g);
  void fill_grad(float g);

  // The whole shard, or elements [begin, end) of it (see slice()). Throws std::logic_error when
  // the arrays' lengths disagree (a member was resized on its own).
  [[nodiscard]] AdamShardView view();
  [[nodiscard]] AdamShardView view(std::int64_t begin, std::int64_t end);
};

}  // namespace zerosim::kernels
