#pragma once
// Sharded fused Adam/AdamW on the GPU: one launch updates one rank's contiguous shard. The math is
// kernels/adam_math.h (shared with the CPU reference, kernels/adam_cpu.h).
//
// Layout handled: any n and any element-aligned base pointers. The kernel reads fp32 master, m and
// v 16 bytes (4 elements) at a time and the gradient 4 elements at a time (16 bytes for f32, 8 for
// f16/bf16), after a scalar head of 0-3 elements that brings master to a 16-byte boundary, and ends
// with a scalar tail of 0-3 elements. When the arrays do not become aligned together (their base
// addresses differ modulo the vector width), the whole shard takes the scalar path.
//
// Traffic per parameter: read+write master, m, v (24 B), read the gradient (4 or 2 B), write the
// 16-bit copy (2 B, if any): 26-30 B.

#include <cuda_runtime_api.h>

#include "kernels/adam_shard.h"

namespace zerosim::kernels {

// Checks the arguments (throws std::invalid_argument naming the bad one, see check_adam_args),
// then enqueues the update on `stream` and returns without waiting. n == 0 launches nothing.
// Throws CudaError (kernels/cuda_check.h) if the launch fails. Pointers must be device-accessible.
void launch_sharded_adam_async(const AdamShardView& shard, const AdamParams& params,
                               cudaStream_t stream);

// Same on the legacy default stream, then waits for it; errors raised while the kernel ran are
// thrown here as CudaError.
void launch_sharded_adam(const AdamShardView& shard, const AdamParams& params);

}  // namespace zerosim::kernels
