// ZeRO-Offload and ZeRO-Infinity against closed forms.
//
// With the optimizer on the CPU, P parameters in a rank's partition, R the CPU Adam rate of one
// rank (the node's min(cores x per-core rate, DRAM bandwidth x efficiency / 30 B) shared by its
// ranks) and B the PCIe copy rate of one rank (min(link x efficiency, DRAM share)):
//   CPU step                = P / R  (+ 24 P / (NVMe bandwidth / ranks) with states on NVMe)
//   updated parameters back = 2P / B + one kernel launch
// Without the delayed parameter update the step is the GPU's part plus these in series; with it
// (ZeRO-Offload §4.2) the CPU works beside the GPU, so the step is the longer of the two chains.
// Memory (ZeRO-Offload §4.1): the GPU keeps only the 16-bit parameters (stage 2: and no
// gradient partition); the host holds 16 B per parameter of the partition (fp32 master, m, v,
// fp32 gradient), NVMe 12 B when the states are swapped out.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/run/simulate.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using namespace testing_plan;

json offload_doc(int gpus, int stage, const char* optimizer, const char* param = "none",
                 bool dpu = false, const char* preset = "dgx-a100-80gb") {
  json d = tiny_doc(gpus, {{"stage", stage},
                           {"offload_optimizer", {{"device", optimizer},
                                                  {"delayed_param_update", dpu}}},
                           {"offload_param", {{"device", param}}}});
  d["cluster"]["preset"] = preset;
  return d;
}

struct HostRates {
  double cpu_params_per_s = 0;  // one rank's CPU Adam rate
  double pcie_bytes_per_s = 0;  // one rank's host<->device copy rate
  double nvme_bytes_per_s = 0;  // one rank's share of the node's NVMe
};

HostRates rates_of(const Scenario& s) {
  const ComputeConstants c;
  const double ranks = std::min(s.cluster.gpus_per_node, s.num_gpus());
  const double dram = s.cluster.host.dram_bandwidth * c.dram_efficiency;
  HostRates r;
  r.cpu_params_per_s = std::min(c.cpu_adam_params_per_core_s * s.cluster.host.cpu_cores,
                                dram / c.cpu_adam_dram_bytes_per_param) /
                       ranks;
  r.pcie_bytes_per_s = std::min(s.cluster.pcie_bandwidth * c.pcie_efficiency, dram / ranks);
  r.nvme_bytes_per_s = s.cluster.host.nvme_bandwidth / ranks;
  return r;
}

// Duration of rank 0's op whose name starts with `prefix` (the only one).
double seconds_of(const Simulation& sim, const std::string& prefix) {
  const Plan& plan = sim.plan.plan;
  double found = -1;
  for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
    if (plan.names[plan.ops[id].name].rfind(prefix, 0) != 0) continue;
    EXPECT_LT(found, 0) << "two ops named " << prefix;
    found = ps_to_seconds(sim.result.end[id] - sim.result.start[id]);
  }
  EXPECT_GE(found, 0) << "no op named " << prefix;
  return found;
}

TEST(Offload, CpuStepAndParameterCopyFollowTheHostRates) {
  const Scenario s = resolve_scenario(offload_doc(1, 2, "cpu"));
  const Simulation sim = simulate_step(s);
  const HostRates r = rates_of(s);
  const double P = static_cast<double>(kTinyPhi);
  EXPECT_NEAR(seconds_of(sim, "cpu optimizer step"), P / r.cpu_params_per_s, 1e-11);
  EXPECT_NEAR(seconds_of(sim, "param h2d"), 2 * P / r.pcie_bytes_per_s + 2e-6, 1e-11);
}

TEST(Offload, RanksOfANodeShareItsCpuSoTheStepTimeOfTheCpuDoesNotChangeWithDp) {
  // dp 8 on one node: each rank updates P/8 at an eighth of the node's rate.
  const double one = seconds_of(simulate_step(resolve_scenario(offload_doc(1, 2, "cpu"))),
                                "cpu optimizer step");
  const double eight = seconds_of(simulate_step(resolve_scenario(offload_doc(8, 2, "cpu"))),
                                  "cpu optimizer step");
  EXPECT_NEAR(one, eight, 1e-12);
}

TEST(Offload, DelayedParameterUpdateHidesTheCpuStepUpToTheGpuStep) {
  // Both regimes: a fast host (the preset's 128 cores: the GPU chain is longer) and a one-core
  // host (the CPU chain is longer).
  for (int cores : {128, 1}) {
    json serial = offload_doc(1, 2, "cpu");
    json delayed = offload_doc(1, 2, "cpu", "none", true);
    serial["cluster"]["host"] = {{"cpu_cores", cores}};
    delayed["cluster"]["host"] = {{"cpu_cores", cores}};
    const Simulation a = simulate_step(resolve_scenario(serial));
    const Simulation b = simulate_step(resolve_scenario(delayed));
    const double host_chain = seconds_of(a, "cpu optimizer step") + seconds_of(a, "param h2d") +
                              seconds_of(a, "param all_gather");
    const double gpu_chain = a.report.step_time_s - host_chain;
    EXPECT_NEAR(b.report.step_time_s, std::max(gpu_chain, host_chain), 1e-9) << cores << " cores";
    EXPECT_LT(b.report.step_time_s, a.report.step_time_s);
  }
}

TEST(Offload, ModelStatesMoveToTheHost) {
  const std::int64_t P = kTinyPhi;
  {
    const Scenario s = resolve_scenario(offload_doc(8, 2, "cpu"));
    const StepReport rep = memory_report(s);
    EXPECT_EQ(rep.memory.category_max[static_cast<int>(MemCategory::OptimizerStates)], 0);
    EXPECT_EQ(rep.memory.category_max[static_cast<int>(MemCategory::Grads)], 0);
    EXPECT_EQ(rep.memory.category_max[static_cast<int>(MemCategory::Params)], 2 * P);
    EXPECT_EQ(rep.host_memory_per_node, 16 * (P / 8) * 8);
    EXPECT_EQ(rep.nvme_bytes_per_node, 0);
  }
  {
    // Stage 1 keeps the full 16-bit gradients on the GPU.
    const StepReport rep = memory_report(resolve_scenario(offload_doc(8, 1, "cpu")));
    EXPECT_EQ(rep.memory.category_max[static_cast<int>(MemCategory::Grads)], 2 * P);
    EXPECT_EQ(rep.memory.category_max[static_cast<int>(MemCategory::OptimizerStates)], 0);
  }
  {
    const StepReport rep = memory_report(resolve_scenario(offload_doc(8, 3, "cpu", "cpu")));
    EXPECT_EQ(rep.memory.category_max[static_cast<int>(MemCategory::Params)], 0);
    EXPECT_EQ(rep.host_memory_per_node, (16 + 2) * P);
  }
  {
    const StepReport rep = memory_report(resolve_scenario(offload_doc(8, 3, "nvme", "nvme")));
    EXPECT_EQ(rep.nvme_bytes_per_node, (12 + 2) * P);
  }
}

TEST(Offload, EveryTierHasAVerdict) {
  // 8 ranks x 12 B x Phi/8 of states on NVMe against a node with less NVMe than that.
  json doc = offload_doc(8, 3, "nvme");
  doc["cluster"]["host"] = {{"nvme_bytes", std::to_string(12 * kTinyPhi - 1) + "B"}};
  try {
    simulate_step(resolve_scenario(doc));
    ADD_FAILURE() << "a step that does not fit on NVMe was simulated";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "memory");
  }
  doc["sim"]["allow_oom"] = true;
  EXPECT_FALSE(simulate_step(resolve_scenario(doc)).report.fits_on_nvme);
  doc["cluster"]["host"] = {{"nvme_bytes", std::to_string(12 * kTinyPhi) + "B"}};
  EXPECT_TRUE(simulate_step(resolve_scenario(doc)).report.fits_on_nvme);
  json host = offload_doc(8, 2, "cpu");
  host["cluster"]["host"] = {{"dram_bytes", std::to_string(16 * kTinyPhi - 1) + "B"}};
  host["sim"]["allow_oom"] = true;
  EXPECT_FALSE(simulate_step(resolve_scenario(host)).report.fits_in_host_memory);
}

TEST(Offload, NvmeSwapsTheStatesAroundTheCpuStep) {
  const Scenario cpu = resolve_scenario(offload_doc(8, 3, "cpu"));
  const Scenario nvme = resolve_scenario(offload_doc(8, 3, "nvme"));
  const double P = static_cast<double>(kTinyPhi / 8);
  const double extra = seconds_of(simulate_step(nvme), "cpu optimizer step") -
                       seconds_of(simulate_step(cpu), "cpu optimizer step");
  EXPECT_NEAR(extra, 24 * P / rates_of(nvme).nvme_bytes_per_s, 1e-11);
}

TEST(Offload, OffloadedParametersComeInBeforeEveryGather) {
  // Each stage-3 all-gather call first copies this rank's partition of what it gathers to the
  // GPU (DeepSpeed: a module's own parameters, then its pre-hook's prefetch, each a call; a
  // unit's modules may come in several): the copies move exactly 1/dp of the gathered bytes,
  // padding included, at least one per unit fetched and at most one per module gathered.
  const int dp = 8;
  json doc = offload_doc(dp, 3, "cpu", "cpu");
  doc["zero"]["stage3_param_persistence_threshold"] = 0;  // the tiny units would all persist
  const Simulation sim = simulate_step(resolve_scenario(doc));
  const Plan& plan = sim.plan.plan;
  Bytes gathered = 0, copied = 0;
  int units = 0, modules = 0, copies = 0;
  for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
    const std::string& name = plan.names[plan.ops[id].name];
    if (name.rfind("gather(", 0) == 0) {
      gathered += plan.collectives[plan.ops[id].work].bytes;
      ++modules;
      if (name.find(" module ") == std::string::npos || name.ends_with(" module 0")) ++units;
    }
    if (name.rfind("param partition in", 0) == 0) {
      copied += plan.ops[id].bytes;
      ++copies;
    }
  }
  EXPECT_GT(units, 0);
  EXPECT_GE(copies, units);
  EXPECT_LE(copies, modules);
  EXPECT_EQ(copied * dp, gathered);
}

// DeepSpeed's cpu_checkpointing (activation_checkpointing/checkpointing.py, CheckpointFunction):
// with full recomputation a GPT layer keeps only its input, 2 s b h bytes (Korthikanti et al.
// 2022, section 4.1); the forward copies it to the host before running the layer and the
// backward copies it back before recomputing it, once per layer and micro-batch, on the compute
// stream. The host holds every layer's checkpoint; the GPU no longer does between the passes.
// Rank 0's checkpoint copies, each checked to move `each` bytes on the compute stream.
struct CheckpointCopies {
  int d2h = 0, h2d = 0;
};
CheckpointCopies checkpoint_copies(const Scenario& s, Bytes each) {
  const TrainingPlan tp = build_training_plan(s, true);
  CheckpointCopies n;
  for (const Op& op : tp.plan.ops) {
    if (op.rank != 0 || op.kind != OpKind::Copy) continue;
    const Work& w = tp.works[op.work];
    EXPECT_EQ(w.elements, each);
    EXPECT_EQ(op.stream, Stream::Compute);
    n.d2h += w.kind == WorkKind::DeviceToHost;
    n.h2d += w.kind == WorkKind::HostToDevice;
  }
  return n;
}

Bytes activation_peak(const Scenario& s) {
  return memory_report(s).memory.category_max[static_cast<int>(MemCategory::Activations)];
}

TEST(Offload, CpuCheckpointingMovesEachLayersCheckpointThroughTheHost) {
  const Bytes checkpoint = 2 * 128 * 64;  // s = 128, b = 1, h = 64
  json doc = tiny_doc(8, {{"stage", 3}}, 2);
  doc["parallel"]["recompute"] = "full";
  json offloaded = doc;
  offloaded["parallel"]["cpu_checkpointing"] = true;
  const Scenario s = resolve_scenario(offloaded);
  const CheckpointCopies copies = checkpoint_copies(s, checkpoint);
  EXPECT_EQ(copies.d2h, 2 * 2);  // 2 layers x 2 micro-batches
  EXPECT_EQ(copies.h2d, 2 * 2);
  const Scenario kept = resolve_scenario(doc);
  EXPECT_EQ(memory_report(s).host_memory_per_node, 8 * 2 * checkpoint);
  EXPECT_EQ(memory_report(kept).host_memory_per_node, 0);
  // At most both checkpoints fewer at the peak, at least one (the second layer's backward
  // holds its own checkpoint, not the first layer's).
  EXPECT_LE(activation_peak(s), activation_peak(kept) - checkpoint);
  EXPECT_GE(activation_peak(s), activation_peak(kept) - 2 * checkpoint);
}

// DeepSpeed's partition_activations (checkpointing.py: partition_activations,
// gather_partitioned_activations): each of the tp ranks keeps numel / tp of a layer's checkpoint
// and, before recomputing the layer, all-gathers the whole 2 s b h bytes over its TP group; with
// cpu_checkpointing only the share crosses PCIe and sits in host memory.
TEST(Offload, PartitionedCheckpointsAreGatheredOverTheTpGroup) {
  const int tp = 2;
  const Bytes checkpoint = 2 * 128 * 64;  // s = 128, b = 1, h = 64, whole on each TP rank
  json doc = tiny_doc(8, {{"stage", 1}}, 2, tp);
  doc["parallel"]["recompute"] = "full";
  json partitioned = doc;
  partitioned["parallel"]["partition_activations"] = true;
  const TrainingPlan tp_plan = build_training_plan(resolve_scenario(partitioned), true);
  const Plan& plan = tp_plan.plan;
  int gathers = 0;
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.rank != 0 || op.kind != OpKind::Collective) continue;
    if (plan.names[op.name].find("checkpoint all_gather") == std::string::npos) continue;
    const Collective& c = plan.collectives[op.work];
    EXPECT_EQ(c.kind, CollectiveKind::AllGather);
    EXPECT_EQ(c.bytes, checkpoint);
    EXPECT_EQ(plan.group_size(c.group), tp);
    ++gathers;
  }
  EXPECT_EQ(gathers, 2 * 2);  // 2 layers x 2 micro-batches
  // At the peak (the last layer's recomputation) the other layer's checkpoint is held as half,
  // the recomputed one whole: half a checkpoint less, at most both halves.
  const Bytes whole = activation_peak(resolve_scenario(doc));
  const Bytes split = activation_peak(resolve_scenario(partitioned));
  EXPECT_LE(split, whole - checkpoint / tp);
  EXPECT_GE(split, whole - checkpoint);

  json host = partitioned;
  host["parallel"]["cpu_checkpointing"] = true;
  const Scenario s = resolve_scenario(host);
  const CheckpointCopies copies = checkpoint_copies(s, checkpoint / tp);
  EXPECT_EQ(copies.d2h, 2 * 2);
  EXPECT_EQ(copies.h2d, 2 * 2);
  EXPECT_EQ(memory_report(s).host_memory_per_node, 8 * 2 * checkpoint / tp);
}

// Below the stages that read them, DeepSpeed ignores optimizer offload (stage 0) and parameter
// offload (stages 0-2): so does zerosim, saying so on the key.
TEST(Offload, OffloadBelowItsStageIsIgnoredAndSaid) {
  auto warned = [](const Scenario& s, const std::string& key) {
    for (const InputWarning& w : s.warnings)
      if (w.key_path == key) return true;
    return false;
  };
  const Scenario no_optimizer = resolve_scenario(offload_doc(8, 0, "cpu"));
  EXPECT_EQ(no_optimizer.zero.offload_optimizer, OffloadDevice::None);
  EXPECT_TRUE(warned(no_optimizer, "zero.offload_optimizer.device"));
  const Scenario stage2 = resolve_scenario(offload_doc(8, 2, "cpu", "cpu"));
  EXPECT_EQ(stage2.zero.offload_param, OffloadDevice::None);
  EXPECT_EQ(stage2.zero.offload_optimizer, OffloadDevice::Cpu);
  EXPECT_TRUE(warned(stage2, "zero.offload_param.device"));
  EXPECT_FALSE(warned(resolve_scenario(offload_doc(8, 3, "cpu", "cpu")), "zero.offload_param.device"));
}

TEST(Offload, InvalidCombinationsNameTheKey) {
  EXPECT_EQ(input_error_key(offload_doc(8, 2, "none", "none", true)),
            "zero.offload_optimizer.delayed_param_update");
  json no_nvme = offload_doc(8, 3, "nvme");
  no_nvme["cluster"]["host"] = {{"nvme_bandwidth", 0}};
  EXPECT_EQ(input_error_key(no_nvme), "zero.offload_optimizer.device");
  json megatron = offload_doc(8, 1, "cpu");
  megatron["parallel"]["framework"] = "megatron";
  EXPECT_EQ(input_error_key(megatron), "zero.offload_optimizer.device");
  json checkpoints = tiny_doc(8, {{"stage", 1}});
  checkpoints["parallel"]["cpu_checkpointing"] = true;
  EXPECT_EQ(input_error_key(checkpoints), "parallel.cpu_checkpointing");  // no recomputation
  checkpoints["parallel"]["recompute"] = "full";
  EXPECT_EQ(input_error_key(checkpoints), "(accepted)");
  EXPECT_EQ(input_error_key(checkpoints, [](json& d) { d["parallel"]["framework"] = "megatron"; }),
            "parallel.cpu_checkpointing");
  EXPECT_EQ(input_error_key(checkpoints, [](json& d) { d["parallel"]["pp"] = 2; }),
            "parallel.cpu_checkpointing");
  json partitioned = tiny_doc(8, {{"stage", 1}}, 1, 2);
  partitioned["parallel"]["partition_activations"] = true;
  EXPECT_EQ(input_error_key(partitioned), "parallel.partition_activations");  // no recomputation
  partitioned["parallel"]["recompute"] = "full";
  EXPECT_EQ(input_error_key(partitioned), "(accepted)");
  EXPECT_EQ(input_error_key(partitioned, [](json& d) { d["parallel"]["pp"] = 2; }), "(accepted)");
  EXPECT_EQ(input_error_key(partitioned, [](json& d) { d["parallel"]["framework"] = "megatron"; }),
            "parallel.partition_activations");
}

}  // namespace
}  // namespace zerosim
