#pragma once
// One collective of the plan's vocabulary as NCCL calls, shared by the replay and the bench, with
// NCCL's buffer conventions: `count` elements is the per-rank buffer (all_gather: the gathered
// output; reduce_scatter: the input; all_to_all: the whole send buffer), split in n equal parts
// where the collective splits. all_gather and reduce_scatter run in place (the rank's part at
// offset position x part); broadcast and reduce are rooted at position `root`; all_to_all is a
// group of sends and receives (recv_buf receives); send_recv sends from `src` to `dst` positions.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "validate/plan_reader.h"

namespace zerosim::validate::gpu {

struct NcclCall {
  CollKind kind = CollKind::AllReduce;
  std::uint8_t* buf = nullptr;
  std::uint8_t* recv_buf = nullptr;  // all_to_all only
  std::size_t count = 0;
  ncclDataType_t dtype = ncclBfloat16;
  int n = 1, position = 0, root = 0, src = 0, dst = 1;
};

// Enqueues the call on `stream` (every NCCL result checked; ncclInProgress is left to the caller's
// NcclComms::wait()).
void launch_nccl(const NcclCall& call, ncclComm_t comm, cudaStream_t stream);

std::size_t nccl_type_size(ncclDataType_t t);

}  // namespace zerosim::validate::gpu
