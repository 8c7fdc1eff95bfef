#pragma once
// CPU reference of the sharded fused Adam/AdamW step. Same per-element math as the CUDA kernel
// (kernels/adam_math.h), same argument checks, any length and alignment; single-threaded.
// Used to check the kernel and by CPU-only code paths that need a real optimizer step.

#include "kernels/adam_shard.h"

namespace zerosim::kernels {

// Updates shard.master, shard.exp_avg and shard.exp_avg_sq in place over shard.n elements and,
// when shard.param_copy is not null, writes the updated master rounded (to nearest even) to
// shard.param_dtype. Throws std::invalid_argument as check_adam_args describes.
void sharded_adam_cpu(const AdamShardView& shard, const AdamParams& params);

}  // namespace zerosim::kernels
