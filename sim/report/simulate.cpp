#include "sim/report/simulate.h"

#include <algorithm>
#include <cstdio>

#include "sim/collective/analytical.h"
#include "sim/core/error.h"
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
                 int ranks_to_check) {
  rep.memory = {};
  for (int rank = 0; rank < ranks_to_check; ++rank) {
    MemoryUsage u = replay_memory(plan, r, rank, false);
    if (rank == 0 || u.peak > rep.memory.peak) {
      rep.memory = std::move(u);
      rep.memory_rank = rank;
    }
  }
  rep.fits_in_memory = rep.memory.peak <= s.cluster.gpu.hbm_bytes;
}

void check_fits(const Scenario& s, const StepReport& rep) {
  if (rep.fits_in_memory || s.sim.allow_oom) return;
  throw InputError("memory", "peak " + gib(rep.memory.peak) + " per GPU exceeds the " +
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
  fill_memory(s, tp.plan, r, rep, tp.plan.num_ranks);
  return rep;
}

Simulation simulate_step(const Scenario& s) {
  check_fits(s, memory_report(s));
  Simulation sim;
  sim.plan = build_training_plan(s);
  const Plan& plan = sim.plan.plan;
  ComputeCost compute(s, sim.plan);
  AnalyticalComm comm(s.cluster);
  sim.result = run_engine(plan, compute, comm);
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

  // Breakdown on rank 0 (every rank runs the same template): compute-stream time by phase; what
  // the step spends beyond it is communication the compute stream waited for.
  StepBreakdown& b = rep.breakdown;
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.rank != 0) break;
    if (op.kind == OpKind::Collective) {
      const Collective& c = plan.collectives[op.work];
      int kind = static_cast<int>(sim.plan.group_kind[c.group]);
      rep.comm_bytes_per_gpu[kind] += ring_bytes_sent(c.kind, plan.group_size(c.group), c.bytes);
    }
    if (op.kind != OpKind::Compute || op.stream != Stream::Compute) continue;
    const double d = ps_to_seconds(r.end[id] - r.start[id]);
    if (op.phase == Phase::Forward) b.forward_s += d;
    if (op.phase == Phase::Backward) b.backward_s += d;
    if (op.phase == Phase::Optimizer) b.optimizer_s += d;
  }
  b.bubble_s = 0;  // no pipeline yet
  b.exposed_comm_s =
      std::max(0.0, rep.step_time_s - b.forward_s - b.backward_s - b.optimizer_s - b.bubble_s);
  fill_memory(s, plan, r, rep, std::min(plan.num_ranks, s.parallel.tp));
  return sim;
}

}  // namespace zerosim
