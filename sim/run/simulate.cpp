#include "sim/run/simulate.h"

#include <algorithm>
#include <cstdio>
#include <span>

#include "sim/collective/alpha_beta.h"
#include "sim/collective/flow_backend.h"
#include "sim/collective/nccl_backend.h"
#include "sim/collective/nccl_model.h"
#include "sim/collective/whatif_comm.h"
#include "sim/core/error.h"
#include "sim/scenario/scenario.h"
#include "sim/cost/compute_cost.h"
#include "sim/memory/memory_constants.h"

namespace zerosim {
namespace {

// Zero-duration models: the engine then plays ops in dependency and stream order only.
class NoTime : public ComputeModel {
 public:
  SimTime duration(const Plan&, OpId) override { return 0; }
};
class NoTimeComm : public CommBackend {
 public:
  void start(const Plan&, std::uint32_t c, SimTime now) override { pending_.push_back(c); now_ = now; }
  SimTime next_completion() const override { return pending_.empty() ? kNever : now_; }
  void pop_completed(SimTime, std::vector<std::uint32_t>& done) override {
    done.insert(done.end(), pending_.begin(), pending_.end());
    pending_.clear();
  }

 private:
  std::vector<std::uint32_t> pending_;
  SimTime now_ = 0;
};

std::string gib(Bytes b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / kGiB);
  return buf;
}

nccl::ModelOptions nccl_options(const Scenario& s) {
  nccl::ModelOptions o;
  o.launch_overhead_s = s.fitted.nccl_launch_overhead;
  return o;
}

// NCCL's buffers on plan rank `rank`: for every communicator it runs collectives on (the plan's
// DP, TP and DP sub-groups of two or more ranks), one connection's LL, LL128 and Simple buffers
// per channel NCCL runs on (memory_constants.h; channels from zerosim's replay of NCCL's graph
// search). A ring connects a send and a receive side on every channel; the receiver holds the LL
// and LL128 buffers and, unless the sender reads over P2P, the Simple one, which the sender then
// holds (NCCL src/transport/p2p.cc, p2pSendSetup / p2pRecvSetup): one connection's worth per rank
// and channel. Not counted, so this is a lower bound: tree and NVLS connections, the device
// copies a network sender keeps of LL128 and Simple (net.cc, sendProxyConnect), cuMem's 2 MiB
// granularity (NCCL >= 2.19), the communicators the framework creates beside the plan's groups
// (world, tied embeddings), and pipeline send/recv, whose buffers NCCL shares between peers
// (sjeaugey on NVIDIA/nccl #1450).
class NcclBuffers {
 public:
  NcclBuffers(const Scenario& s, const Plan& plan)
      : plan_(plan), model_(s.cluster, nccl_options(s)),
        collectives_(static_cast<std::size_t>(plan.num_groups()), false) {
    for (const Collective& c : plan.collectives) {
      if (c.kind != CollectiveKind::SendRecv) collectives_[c.group] = true;
    }
  }

  Bytes of_rank(int rank) const {
    Bytes bytes = 0;
    for (int g = 0; g < plan_.num_groups(); ++g) {
      if (!collectives_[g] || plan_.cost_size(g) < 2) continue;
      const std::int32_t* first = plan_.group_members(g);
      const std::int32_t* last = first + plan_.group_size(g);
      if (std::find(first, last, rank) == last) continue;
      const std::span<const std::int32_t> ranks(plan_.cost_members(g),
                                                static_cast<std::size_t>(plan_.cost_size(g)));
      bytes += model_.comm(ranks).comm_channels * kNcclConnectionBytes;
    }
    return bytes;
  }

 private:
  const Plan& plan_;
  nccl::NcclModel model_;
  std::vector<bool> collectives_;  // per group: runs a collective other than send/recv
};

void fill_memory(const Scenario& s, const Plan& plan, const EngineResult& r, StepReport& rep,
                 int ranks_per_stage) {
  std::vector<int> ranks;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    if ((rank % ranks_per_stage) < s.parallel.tp) ranks.push_back(rank);
  }
  // Outside the caching allocator: the CUDA context and NCCL's buffers. The allocator may
  // reserve the rest of the GPU before it gives its cache back.
  const NcclBuffers nccl(s, plan);
  std::vector<Bytes> capacity;
  for (int rank : ranks) {
    capacity.push_back(std::max<Bytes>(1, s.cluster.gpu.hbm_bytes - kCudaContextBytes -
                                              nccl.of_rank(rank)));
  }
  std::vector<MemoryUsage> usage = replay_memory(plan, r, ranks, false, capacity);
  rep.memory = {};
  rep.memory_per_stage.assign(static_cast<std::size_t>(s.parallel.pp), MemoryUsage{});
  std::vector<int> stage_rank(rep.memory_per_stage.size(), 0);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int st = ranks[i] / ranks_per_stage;
    MemoryUsage& stage = rep.memory_per_stage[st];
    if (usage[i].peak > stage.peak) {
      stage = usage[i];
      stage_rank[st] = ranks[i];
    }
    if (i == 0 || usage[i].peak > rep.memory.peak) {
      rep.memory = std::move(usage[i]);
      rep.memory_rank = ranks[i];
    }
  }
  rep.cuda_context_bytes = kCudaContextBytes;
  rep.nccl_buffer_bytes = nccl.of_rank(rep.memory_rank);
  rep.memory.outside_allocator = rep.cuda_context_bytes + rep.nccl_buffer_bytes;
  rep.device_peak = 0;
  for (std::size_t st = 0; st < rep.memory_per_stage.size(); ++st) {
    MemoryUsage& u = rep.memory_per_stage[st];
    u.outside_allocator = kCudaContextBytes + nccl.of_rank(stage_rank[st]);
    rep.device_peak = std::max(rep.device_peak, u.nvidia_smi_peak());
  }
  rep.fits_in_memory = rep.device_peak <= s.cluster.gpu.hbm_bytes;
}

// Host and NVMe tiers: a node holds gpus_per_node consecutive ranks, all of one pipeline stage
// unless a stage has fewer ranks than a node; the busiest stage's figure is reported.
void fill_host_memory(const Scenario& s, const TrainingPlan& tp, StepReport& rep) {
  const std::int64_t per_node = std::min(s.cluster.gpus_per_node, s.num_gpus());
  Bytes host = 0, nvme = 0;
  for (const StagePlan& st : tp.stages) {
    host = std::max(host, st.host_bytes * per_node);
    nvme = std::max(nvme, st.nvme_bytes * per_node);
  }
  rep.host_memory_per_node = host;
  rep.nvme_bytes_per_node = nvme;
  rep.fits_in_host_memory = host <= s.cluster.host.dram_bytes;
  rep.fits_on_nvme = nvme <= s.cluster.host.nvme_bytes;
}

void check_fits(const Scenario& s, const StepReport& rep) {
  if (s.sim.allow_oom) return;
  if (!rep.fits_in_host_memory) {
    throw InputError("memory", "offloaded states need " + gib(rep.host_memory_per_node) +
                                   " of host memory per node, more than the node's " +
                                   gib(s.cluster.host.dram_bytes) +
                                   "; offload to nvme, use more nodes, or pass --allow-oom");
  }
  if (!rep.fits_on_nvme) {
    throw InputError("memory", "offloaded states need " + gib(rep.nvme_bytes_per_node) +
                                   " of NVMe per node, more than the node's " +
                                   gib(s.cluster.host.nvme_bytes) +
                                   "; use more nodes, or pass --allow-oom");
  }
  if (rep.fits_in_memory) return;
  throw InputError("memory", "peak " + gib(rep.device_peak) +
                                 " per GPU (allocator, CUDA context and NCCL) exceeds the " +
                                 s.cluster.gpu.name + "'s " + gib(s.cluster.gpu.hbm_bytes) +
                                 "; lower training.micro_batch_size, raise zero.stage, set "
                                 "parallel.recompute, or pass --allow-oom to simulate anyway");
}

}  // namespace

StepReport memory_report(const Scenario& s) {
  TrainingPlan tp = build_training_plan(s, true);
  NoTime compute;
  NoTimeComm comm;
  EngineResult r = run_engine(tp.plan, compute, comm);
  StepReport rep;
  rep.params = count_params(s.model).total;
  fill_memory(s, tp.plan, r, rep, tp.plan.num_ranks / s.parallel.pp);
  fill_host_memory(s, tp, rep);
  return rep;
}

namespace {

BackgroundJob background_job(const WhatIf& w) {
  BackgroundJob job;
  job.nodes = w.background_nodes;
  job.placement = w.background_placement == WhatIf::Placement::After
                      ? BackgroundJob::Placement::After
                      : BackgroundJob::Placement::Interleaved;
  job.pattern = w.background_pattern == WhatIf::Pattern::AllToAll ? BackgroundJob::Pattern::AllToAll
                                                                   : BackgroundJob::Pattern::Ring;
  job.load = w.background_load;
  return job;
}

// Plays the plan on the scenario's network backend with its what-ifs applied.
void play_step(const Scenario& s, ComputeCost& compute, Simulation& sim) {
  const Plan& plan = sim.plan.plan;
  switch (s.sim.network) {
    case NetworkModel::AlphaBeta: {
      AlphaBetaComm comm(s.cluster);
      sim.result = run_engine(plan, compute, comm);
      return;
    }
    case NetworkModel::Analytical: {
      nccl::NcclModel model(s.cluster, nccl_options(s));
      if (s.whatif.degraded_nodes.empty()) {
        nccl::NcclAnalyticalComm comm(model);
        sim.result = run_engine(plan, compute, comm);
        return;
      }
      ClusterSpec slow = s.cluster;
      slow.nic_bandwidth *= s.whatif.nic_bandwidth_factor;
      nccl::NcclModel degraded(slow, nccl_options(s));
      DegradedNodesComm comm(model, degraded, s.cluster, s.whatif.degraded_nodes);
      sim.result = run_engine(plan, compute, comm);
      return;
    }
    case NetworkModel::Flow: {
      std::vector<std::uint8_t> classes;
      for (GroupKind k : sim.plan.group_kind) classes.push_back(static_cast<std::uint8_t>(k));
      FlowCommOptions options;
      options.nccl = nccl_options(s);
      if (plan.folded()) {  // inject the other replicas' copies of what reaches the fabric
        options.replicas = s.parallel.dp_cp();
        options.replica_rank_stride = s.parallel.tp;  // Megatron's order: tp, then dp, then pp
      }
      FlowComm comm(s.cluster, options, classes);
      // First: the other job rebuilds the fabric.
      if (s.whatif.background_nodes > 0) comm.add_background_job(background_job(s.whatif));
      for (int node : s.whatif.degraded_nodes) comm.scale_node_nics(node, s.whatif.nic_bandwidth_factor);
      sim.result = run_engine(plan, compute, comm);
      sim.network = comm.link_report(sim.result.makespan).to_json();
      return;
    }
  }
}

}  // namespace

Simulation simulate_step(const Scenario& s) {
  Simulation sim;
  sim.plan = build_training_plan(s, s.sim.folded);
  const Plan& plan = sim.plan.plan;
  ComputeCost compute(s, sim.plan);
  play_step(s, compute, sim);
  const EngineResult& r = sim.result;
  StepReport& rep = sim.report;
  rep.params = count_params(s.model).total;
  rep.fingerprint = r.fingerprint;
  rep.events = r.events;
  rep.step_time_s = ps_to_seconds(r.makespan);
  rep.tokens_per_s = static_cast<double>(s.tokens_per_step()) / rep.step_time_s;
  const double model_flops = model_flops_per_token(s.model) * static_cast<double>(s.tokens_per_step());
  rep.tflops_per_gpu = model_flops / rep.step_time_s / s.num_gpus() / 1e12;
  // Against the 16-bit peak, FP8 runs too (as NeMo and Megatron report their FP8 runs' MFU).
  rep.mfu = rep.tflops_per_gpu / s.cluster.gpu.peak_tflops(sixteen_bit(s.training.precision));

  const Rank0Bytes bytes = bytes_of_rank0(s.cluster, sim.plan);
  rep.comm_bytes_per_gpu = bytes.sent;
  rep.internode_bytes_per_gpu = bytes.internode;
  rep.breakdown = breakdown_of_rank(sim.plan, r, 0);
  // The same split with ZeRO-1: what the PP + ZeRO-2/3 conflict multiplies.
  if (s.zero.stage == 1) {
    rep.dp_bytes_zero1 = rep.comm_bytes_per_gpu[0];
  } else {
    Scenario z1 = s;
    z1.zero.stage = 1;
    z1.zero.overlap_comm = false;
    rep.dp_bytes_zero1 = bytes_of_rank0(s.cluster, build_training_plan(z1, true)).sent[0];
  }
  fill_memory(s, plan, r, rep, plan.num_ranks / s.parallel.pp);
  fill_host_memory(s, sim.plan, rep);
  check_fits(s, rep);
  return sim;
}

}  // namespace zerosim
