#pragma once
// One training step end to end: scenario -> plan -> engine (with the cost models) -> report.
#include <array>
#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "sim/core/engine.h"
#include "sim/memory/memory_timeline.h"
#include "sim/parallel/training_plan.h"

namespace zerosim {

// Where one rank's step time goes. Compute-stream time by phase; every idle gap of the compute
// stream is charged to what released the op after it: a DP or TP collective (exposed
// communication of that group), a pipeline transfer (its duration is exposed PP communication,
// the rest of the wait is bubble). Collectives run on the compute stream count as exposed too.
struct StepBreakdown {
  double forward_s = 0, backward_s = 0, optimizer_s = 0, exposed_comm_s = 0, bubble_s = 0;
  std::array<double, kNumGroupKinds> exposed_by_group{};  // dp, tp, pp, ep, cp
  // Offload: waits for host work (the CPU optimizer step, PCIe and NVMe copies), and the CPU
  // step's own length (it runs beside the GPU; exposed or not, it is the host's busy time).
  double offload_s = 0, cpu_step_s = 0;
  // What the framework runs on the compute stream for its collectives (Phase::Communication):
  // host work such as DeepSpeed's per-rank tensor slices and tensor-list copies, and ZeRO++'s
  // quantization kernels.
  double comm_overhead_s = 0;
  double other_s = 0;                        // gaps no dependency explains (none expected)
};

// The parts a step's time splits into, each once: every field of StepBreakdown but
// exposed_comm_s (the sum of the exposed_* parts) and cpu_step_s (the host's, beside the GPU).
// On every rank they add up to the step. Named as the search's JSON writes them.
struct BreakdownPart {
  const char* name;
  double seconds;
};
std::array<BreakdownPart, 12> breakdown_parts(const StepBreakdown& b);

struct StepReport {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;  // model FLOPs (no recomputation) per GPU per second / 1e12
  double mfu = 0;
  StepBreakdown breakdown;
  MemoryUsage memory;  // of the rank with the highest (allocated) peak
  int memory_rank = 0;
  std::vector<MemoryUsage> memory_per_stage;  // per pipeline stage: its rank with the highest peak
  // memory.outside_allocator: the CUDA context and NCCL's buffers of memory_rank.
  Bytes cuda_context_bytes = 0, nccl_buffer_bytes = 0;
  // The largest stage's nvidia-smi peak (reserved + outside the allocator): what the GPU must
  // hold, and what fits_in_memory compares with its memory.
  Bytes device_peak = 0;
  bool fits_in_memory = true;
  // Offload tiers, per node: what the node's ranks keep in host memory and on NVMe.
  Bytes host_memory_per_node = 0, nvme_bytes_per_node = 0;
  bool fits_in_host_memory = true, fits_on_nvme = true;
  std::array<double, kNumGroupKinds> comm_bytes_per_gpu{};  // by GroupKind: dp, tp, pp, ep, cp (rank 0)
  std::array<double, kNumGroupKinds> internode_bytes_per_gpu{};  // of which leave the node
  double dp_bytes_zero1 = 0;  // DP bytes of the same split with ZeRO-1 (conflict report)
  std::int64_t params = 0;
  std::uint64_t fingerprint = 0;
  std::uint64_t events = 0;
};

struct Simulation {
  TrainingPlan plan;
  EngineResult result;
  StepReport report;
  nlohmann::json network;  // link utilization by class (sim.network = flow), else null
};

// Simulates one step. Unless scenario.sim.allow_oom, a step whose peak memory exceeds the GPU's
// throws InputError naming what to change (checked after the step is played: the peak depends on
// when each op runs).
Simulation simulate_step(const Scenario& s);

StepBreakdown breakdown_of_rank(const TrainingPlan& plan, const EngineResult& r, int rank);

// Bytes rank 0 sends in one step by group kind (dp, tp, pp, ep, cp), and the part of them that leaves
// its node.
struct Rank0Bytes {
  std::array<double, kNumGroupKinds> sent{}, internode{};
};
Rank0Bytes bytes_of_rank0(const ClusterSpec& cluster, const TrainingPlan& tp);

// Memory only: replays the allocations of one data-parallel replica in plan order.
StepReport memory_report(const Scenario& s);

}  // namespace zerosim
