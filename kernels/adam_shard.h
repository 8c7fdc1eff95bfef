#pragma once
// What one rank's sharded optimizer step works on: a non-owning, trivially copyable view of a
// contiguous shard (fp32 master weights, Adam moments, the gradient, an optional 16-bit parameter
// copy), and the argument check shared by the CPU reference and the CUDA launcher.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/adam_math.h"

namespace zerosim::kernels {

enum class DType : std::int32_t { F32 = 0, F16 = 1, BF16 = 2 };

[[nodiscard]] std::string_view to_string(DType dtype) noexcept;  // "f32", "f16", "bf16", "invalid"
[[nodiscard]] std::size_t dtype_size(DType dtype);               // throws std::invalid_argument

// Element i of every array belongs to the same parameter. All pointers are to host memory for the
// CPU reference and to device memory for the CUDA kernel. master, exp_avg and exp_avg_sq are read
// and written; grad is only read; param_copy is only written. The arrays must not overlap.
struct AdamShardView {
  float* master = nullptr;      // fp32 master weights
  float* exp_avg = nullptr;     // first moment m
  float* exp_avg_sq = nullptr;  // second moment v
  const void* grad = nullptr;   // gradient, grad_dtype elements
  DType grad_dtype = DType::F32;
  void* param_copy = nullptr;   // optional 16-bit copy of the updated master; nullptr = none
  DType param_dtype = DType::BF16;  // F16 or BF16; ignored when param_copy is nullptr
  std::int64_t n = 0;           // elements in the shard, >= 0
};

// Elements [begin, end) of `shard`, every array advanced alike, so that pieces of one shard can be
// stepped independently (by threads, say). Throws std::out_of_range unless
// 0 <= begin <= end <= shard.n, std::invalid_argument for an unknown grad_dtype.
[[nodiscard]] AdamShardView slice(const AdamShardView& shard, std::int64_t begin, std::int64_t end);

// Supported combinations: grad F32, F16 or BF16; param copy none, F16 or BF16 (an F32 copy would be
// the master itself and is refused).
//
// Throws std::invalid_argument naming the bad argument ("<caller>: argument 'beta1' must be in
// [0, 1), got 1") when: n < 0; a pointer is null while n > 0 (with n == 0 nothing is touched and
// null pointers are allowed); a pointer is not aligned to its element size; a dtype is not one
// listed above; lr, weight_decay or clip_coef is negative or not finite; beta1 or beta2 is outside
// [0, 1); eps <= 0 or not finite; step < 1; grad_scale <= 0 or not finite; mode is not Adam/AdamW.
void check_adam_args(std::string_view caller, const AdamShardView& shard, const AdamParams& params);

}  // namespace zerosim::kernels
