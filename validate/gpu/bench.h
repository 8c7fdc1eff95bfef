#pragma once
// `zerosim-validate bench`: microbenchmarks of one machine -> calibration.json (calibration.h).
// Launched like nccl-tests: mpirun -np <GPUs> zerosim-validate bench; every rank measures its own
// GPU (rank 0's numbers are written) and all ranks run the collectives together.
//
//   gemm          cublasGemmEx, bf16 and fp16 in, fp32 accumulate, over a shape sweep (squares,
//                 transformer shapes, and the plan's shapes with --plan); tflops = 2mnk / time
//   hbm_copy      device-to-device cudaMemcpyAsync; GB/s counts bytes read + written
//   h2d / d2h     cudaMemcpyAsync from / to pinned host memory; GB/s of bytes moved
//   adam          the sharded Adam kernel (kernels/adam_cuda.h), bf16 gradient and copy;
//                 params/s and GB/s with the kernel's bytes per parameter (28)
//   collectives   all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all over all
//                 ranks, sizes doubling (x4) from 8 B; nccl-tests' algbw/busbw (busbw.h). As
//                 nccl-tests does, a separate untimed pass checks each collective's result.
// Each measurement: warm-up launches, then timed launches between two CUDA events, mean per launch.
#include <chrono>
#include <cstdint>
#include <ostream>
#include <vector>

#include "validate/calibration.h"
#include "validate/comm.h"
#include "validate/plan_reader.h"

namespace zerosim::validate::gpu {

struct BenchOptions {
  bool quick = false;                                // fewer shapes and sizes (a smoke run)
  std::int64_t max_coll_bytes = std::int64_t{1} << 30;
  std::int64_t adam_params = std::int64_t{1} << 28;
  std::int64_t copy_bytes = std::int64_t{1} << 30;
  std::vector<GemmShape> extra_gemms;                // e.g. every shape of a plan
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::ostream* log = nullptr;                       // progress lines (rank 0)
};

// boot: a Comm whose only group is every rank.
Calibration run_bench(Comm& boot, int local_rank, const BenchOptions& opt);

}  // namespace zerosim::validate::gpu
