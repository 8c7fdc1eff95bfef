#pragma once
#include "sim/core/units.h"

namespace zerosim {

// Memory every rank holds before the first tensor: the CUDA context with cuBLAS/cuDNN workspaces
// and NCCL's communicator buffers. Assumption: PyTorch's CUDA context takes roughly 0.3-1 GiB
// depending on the GPU and CUDA version (PyTorch "CUDA semantics" notes on memory management);
// NCCL allocates NCCL_BUFFSIZE = 4 MiB per channel and peer for each communicator (NCCL env
// documentation). 1 GiB in total is our calibratable default.
inline constexpr Bytes kCudaContextBytes = Bytes{1} << 30;

}  // namespace zerosim
