#pragma once
#include "sim/core/units.h"

namespace zerosim {

// Memory a rank holds outside PyTorch's caching allocator, so neither torch.cuda's
// max_memory_allocated nor max_memory_reserved counts it; nvidia-smi does.

// The CUDA context of a PyTorch process with lazy module loading (CUDA >= 11.7, the default since
// PyTorch 1.13). PyTorch PR #86509 measured 287,047,680 bytes used after putting one
// 20x16x50x100 fp32 tensor (6.4 MB) on the GPU; the caching allocator serves a request between
// 1 MiB and 10 MiB from a 20 MiB segment (CUDACachingAllocator.cpp, kLargeBuffer), so the context
// is 287,047,680 - 20 MiB = 266,076,160 bytes. With eager loading (before CUDA 11.7 or PyTorch
// 1.13) the same test used 666,632,192 bytes, and bigger builds over 1 GB (ptrblck, pytorch
// issue #107667): runs of that era hold more than this.
inline constexpr Bytes kCudaContextBytes = 287'047'680 - (Bytes{20} << 20);

// NCCL's buffers of one connection (NCCL src/init.cc, DEFAULT_LL_BUFFSIZE,
// DEFAULT_LL128_BUFFSIZE, DEFAULT_BUFFSIZE; sizes from src/include/devcomm.h): LL
// 8 lines x 512 threads x 8 steps x 16 B = 512 KiB, LL128 120 elements x 640 threads x 8 steps x
// 8 B = 4.6875 MiB, Simple 4 MiB (1 MiB on ARM hosts, not modelled).
inline constexpr Bytes kNcclLlBuffer = 8 * 512 * 8 * 16;
inline constexpr Bytes kNcclLl128Buffer = 120 * 640 * 8 * 8;
inline constexpr Bytes kNcclSimpleBuffer = Bytes{1} << 22;
inline constexpr Bytes kNcclConnectionBytes = kNcclLlBuffer + kNcclLl128Buffer + kNcclSimpleBuffer;

}  // namespace zerosim
