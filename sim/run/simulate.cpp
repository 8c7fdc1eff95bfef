#include "sim/run/simulate.h"

#include <algorithm>
#include <cstdio>

#include "sim/collective/alpha_beta.h"
#include "sim/collective/flow_backend.h"
#include "sim/collective/nccl_backend.h"
#include "sim/collective/whatif_comm.h"
#include "sim/core/error.h"
#include "sim/scenario/scenario.h"
#include "sim/cost/compute_cost.h"

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

void fill_memory(const Scenario& s, const Plan& plan, const EngineResult& r, StepReport& rep,
                 int ranks_per_stage) {
  std::vector<int> ranks;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    if ((rank % ranks_per_stage) < s.parallel.tp) ranks.push_back(rank);
  }
  std::vector<MemoryUsage> usage = replay_memory(plan, r, ranks, false);
  rep.memory = {};
  rep.memory_per_stage.assign(static_cast<std::size_t>(s.parallel.pp), MemoryUsage{});
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    MemoryUsage& stage = rep.memory_per_stage[ranks[i] / ranks_per_stage];
    if (usage[i].peak > stage.peak) stage = usage[i];
    if (i == 0 || usage[i].peak > rep.memory.peak) {
      rep.memory = std::move(usage[i]);
      rep.memory_rank = ranks[i];
    }
  }
  rep.fits_in_memory = rep.memory.peak <= s.cluster.gpu.hbm_bytes;
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
  throw InputError("memory", "peak " + gib(rep.memory.peak) + " per GPU exceeds the " +
                                 s.cluster.gpu.name + "'s " + gib(s.cluster.gpu.hbm_bytes) +
                                 "; lower training.micro_batch_size, raise zero.stage, set "
                                 "parallel.recompute, or pass --allow-oom to simulate anyway");
}

// The op whose end released `op` (the latest-ending explicit dependency), looking through the
// zero-duration alloc/free ops to what released them.
OpId releaser(const Plan& plan, const EngineResult& r, OpId op) {
  for (int depth = 0; depth < 8; ++depth) {
    const Op& o = plan.ops[op];
    OpId best = kNoOp;
    for (std::uint32_t i = 0; i < o.dep_count; ++i) {
      OpId d = plan.deps[o.dep_begin + i];
      if (best == kNoOp || r.end[d] > r.end[best]) best = d;
    }
    if (best == kNoOp || r.end[best] < r.start[op]) return kNoOp;
    const OpKind k = plan.ops[best].kind;
    if (k != OpKind::Alloc && k != OpKind::Free) return best;
    op = best;
  }
  return kNoOp;
}

}  // namespace

Rank0Bytes bytes_of_rank0(const ClusterSpec& cluster, const TrainingPlan& tp) {
  const Plan& plan = tp.plan;
  Rank0Bytes out;
  for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
    const Op& op = plan.ops[id];
    if (op.kind != OpKind::Collective) continue;
    const Collective& c = plan.collectives[op.work];
    // A pipeline transfer is sent by its first member only.
    if (c.kind == CollectiveKind::SendRecv && plan.members[c.member_begin] != id) continue;
    const int n = plan.cost_size(c.group);
    const int kind = static_cast<int>(tp.group_kind[c.group]);
    const double sent = ring_bytes_sent(c.kind, n, c.bytes);
    out.sent[kind] += sent;
    // A ring over n ranks, k of them per node, crosses nodes on n/k of its n edges, so 1/k of
    // what a rank sends leaves its node; a send/recv between two nodes leaves it whole.
    int per_node = 0;
    bool inter = false;
    group_placement(cluster, plan.cost_members(c.group), n, per_node, inter);
    if (inter) out.internode[kind] += c.kind == CollectiveKind::SendRecv ? sent : sent / per_node;
  }
  return out;
}

StepBreakdown breakdown_of_rank(const TrainingPlan& tp, const EngineResult& r, int rank) {
  const Plan& plan = tp.plan;
  StepBreakdown b;
  SimTime busy_until = 0;
  SimTime last_end = 0;
  auto charge_comm = [&](OpId c_op, double seconds, bool waited) {
    const Collective& c = plan.collectives[plan.ops[c_op].work];
    const int kind = static_cast<int>(tp.group_kind[c.group]);
    if (kind == static_cast<int>(GroupKind::Pp) && waited) {
      const double transfer = ps_to_seconds(r.end[c_op] - r.start[c_op]);
      const double exposed = std::min(seconds, transfer);
      b.exposed_by_group[kind] += exposed;
      b.bubble_s += seconds - exposed;
    } else {
      b.exposed_by_group[kind] += seconds;
    }
  };
  SimTime host_end = 0;  // when the rank's last host work (copy, CPU step) ends
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.rank != rank) continue;
    if (op.kind == OpKind::Copy || op.stream == Stream::Cpu) host_end = std::max(host_end, r.end[id]);
    if (op.stream == Stream::Cpu && op.kind == OpKind::Compute) {
      b.cpu_step_s += ps_to_seconds(r.end[id] - r.start[id]);
    }
    if (op.stream != Stream::Compute) continue;
    const SimTime gap = r.start[id] - busy_until;
    if (gap > 0) {
      OpId why = releaser(plan, r, id);
      if (why != kNoOp && plan.ops[why].kind == OpKind::Collective) {
        charge_comm(why, ps_to_seconds(gap), true);
      } else if (why != kNoOp && (plan.ops[why].kind == OpKind::Copy ||
                                  plan.ops[why].stream == Stream::Cpu)) {
        b.offload_s += ps_to_seconds(gap);
      } else {
        b.other_s += ps_to_seconds(gap);
      }
    }
    const double d = ps_to_seconds(r.end[id] - r.start[id]);
    if (op.kind == OpKind::Compute) {
      if (op.phase == Phase::Forward) b.forward_s += d;
      if (op.phase == Phase::Backward) b.backward_s += d;
      if (op.phase == Phase::Optimizer) b.optimizer_s += d;
    } else if (op.kind == OpKind::Collective) {
      charge_comm(id, d, false);
    } else if (op.kind == OpKind::Copy) {
      b.offload_s += d;  // a PCIe copy queued on the compute stream blocks it
    }
    busy_until = std::max(busy_until, r.end[id]);
    last_end = std::max(last_end, r.end[id]);
  }
  // After its last op a rank waits for the slowest one: pipeline drain with PP, else other.
  // After its last compute-stream op a rank waits for the slowest one (pipeline drain with PP)
  // or for its own host work still running (offload: the CPU step, copies).
  host_end = std::max(host_end, last_end);
  const double host_tail = ps_to_seconds(host_end - last_end);
  b.offload_s += host_tail;
  const double tail = ps_to_seconds(r.makespan - host_end);
  if (tp.stages.size() > 1) b.bubble_s += tail; else b.other_s += tail;
  b.exposed_comm_s = b.exposed_by_group[0] + b.exposed_by_group[1] + b.exposed_by_group[2];
  return b;
}

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

Simulation simulate_step(const Scenario& s) {
  Simulation sim;
  sim.plan = build_training_plan(s, s.sim.folded);
  const Plan& plan = sim.plan.plan;
  ComputeCost compute(s, sim.plan);
  switch (s.sim.network) {
    case NetworkModel::AlphaBeta: {
      AlphaBetaComm comm(s.cluster);
      sim.result = run_engine(plan, compute, comm);
      break;
    }
    case NetworkModel::Analytical: {
      nccl::NcclModel model(s.cluster);
      if (s.whatif.degraded_nodes.empty()) {
        nccl::NcclAnalyticalComm comm(model);
        sim.result = run_engine(plan, compute, comm);
      } else {
        ClusterSpec slow = s.cluster;
        slow.nic_bandwidth *= s.whatif.nic_bandwidth_factor;
        nccl::NcclModel degraded(slow);
        DegradedNodesComm comm(model, degraded, s.cluster, s.whatif.degraded_nodes);
        sim.result = run_engine(plan, compute, comm);
      }
      break;
    }
    case NetworkModel::Flow: {
      std::vector<std::uint8_t> classes;
      for (GroupKind k : sim.plan.group_kind) classes.push_back(static_cast<std::uint8_t>(k));
      FlowCommOptions options;
      if (plan.folded()) {  // inject the other replicas' copies of what reaches the fabric
        options.replicas = s.parallel.dp;
        options.replica_rank_stride = s.parallel.tp;  // Megatron's order: tp, then dp, then pp
      }
      FlowComm comm(s.cluster, options, classes);
      if (s.whatif.background_nodes > 0) {  // first: it rebuilds the fabric with the other job
        BackgroundJob job;
        job.nodes = s.whatif.background_nodes;
        job.placement = s.whatif.background_placement == WhatIf::Placement::After
                            ? BackgroundJob::Placement::After
                            : BackgroundJob::Placement::Interleaved;
        job.pattern = s.whatif.background_pattern == WhatIf::Pattern::AllToAll
                          ? BackgroundJob::Pattern::AllToAll
                          : BackgroundJob::Pattern::Ring;
        job.load = s.whatif.background_load;
        comm.add_background_job(job);
      }
      for (int node : s.whatif.degraded_nodes) comm.scale_node_nics(node, s.whatif.nic_bandwidth_factor);
      sim.result = run_engine(plan, compute, comm);
      sim.network = comm.link_report(sim.result.makespan).to_json();
      break;
    }
  }
  const EngineResult& r = sim.result;
  StepReport& rep = sim.report;
  rep.params = count_params(s.model).total;
  rep.fingerprint = r.fingerprint;
  rep.events = r.events;
  rep.step_time_s = ps_to_seconds(r.makespan);
  rep.tokens_per_s = static_cast<double>(s.tokens_per_step()) / rep.step_time_s;
  const double model_flops = model_flops_per_token(s.model) * static_cast<double>(s.tokens_per_step());
  rep.tflops_per_gpu = model_flops / rep.step_time_s / s.num_gpus() / 1e12;
  rep.mfu = rep.tflops_per_gpu / s.cluster.gpu.peak_tflops(s.training.precision);

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
