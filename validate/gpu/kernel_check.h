#pragma once
// `zerosim-validate kernel-check`: the sharded Adam kernel (kernels/adam_cuda.h) against the CPU
// reference (kernels/adam_cpu.h) on fresh random data (seeded from the clock unless given):
// every gradient dtype x copy dtype x mode, lengths from 1 to ~1M + 3, element offsets 0-3
// (misaligned shards), three steps each.
//
// Pass when, for every element of every case:
//   - master, m, v agree with the reference to a relative error <= 1e-6, measured against the
//     magnitude of what went into each value (master: |p| + |delta|, m: beta1|m| + (1-beta1)|g|,
//     v: |v|), which is the plain relative error except where a subtraction cancels;
//   - nothing is NaN or Inf;
//   - every output was written: the 16-bit copy (pre-filled with a NaN pattern) equals the
//     rounding of the kernel's own master, and every m changed;
//   - nothing outside the shard was written (guard elements keep their sentinels).
#include <cstdint>
#include <ostream>

#include <nlohmann/json.hpp>

namespace zerosim::validate::gpu {

struct KernelCheckResult {
  int cases = 0, failures = 0;
  double max_rel_error = 0;
  std::int64_t elements = 0;
  nlohmann::json json;  // per-case rows and the summary
};

KernelCheckResult run_kernel_check(std::uint64_t seed, std::ostream& log);

}  // namespace zerosim::validate::gpu
