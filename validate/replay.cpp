#include "validate/replay.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "validate/thread_comm.h"

namespace zerosim::validate {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

std::vector<std::vector<int>> plan_groups(const ReplayPlan& plan) {
  std::vector<std::vector<int>> g;
  g.reserve(plan.groups.size());
  for (const PlanGroup& pg : plan.groups) g.push_back(pg.ranks);
  return g;
}

RankResult replay_rank(const ReplayPlan& plan, const RankSchedule& sched, Backend& backend,
                       const ReplayOptions& opt, Comm* barrier) {
  if (opt.warmup < 0 || opt.iters < 1) throw ReplayError("replay: warmup must be >= 0 and iters >= 1");
  const RankOps* ops = plan.find_rank(sched.rank);
  if (ops == nullptr) throw ReplayError("replay: the plan holds no ops for rank " + std::to_string(sched.rank));
  backend.prepare(plan, *ops, sched);
  const std::size_t n = ops->ops.size();
  std::vector<std::vector<double>> starts(n), durations(n);
  RankResult res;
  res.rank = sched.rank;
  for (int it = 0; it < opt.warmup + opt.iters; ++it) {
    if (barrier != nullptr) barrier->barrier();
    backend.begin_step();
    for (int id : sched.order) backend.issue(ops->ops[id], sched.coll_seq[id]);
    const std::vector<OpTiming> t = backend.end_step();
    if (t.size() != n) throw ReplayError("backend " + backend.name() + " returned timings for the wrong number of ops");
    if (it < opt.warmup) continue;
    double step = 0;
    for (std::size_t i = 0; i < n; ++i) {
      starts[i].push_back(t[i].start_s);
      durations[i].push_back(t[i].duration_s);
      step = std::max(step, t[i].start_s + t[i].duration_s);
    }
    res.step_samples_s.push_back(step);
  }
  res.ops.resize(n);
  for (std::size_t i = 0; i < n; ++i) res.ops[i] = {median(starts[i]), median(durations[i])};
  res.step_measured_s = median(res.step_samples_s);
  res.backend_info = backend.info();
  return res;
}

std::vector<RankResult> replay_threads_cpu(const ReplayPlan& plan, const Schedule& sched,
                                           const CpuBackendOptions& cpu, const ReplayOptions& opt) {
  if (!plan.has_all_ranks()) throw ReplayError("replay with threads needs every rank of the plan");
  ThreadWorld world(plan.num_ranks, plan_groups(plan));
  world.set_timeout(opt.timeout);
  std::vector<RankResult> results(plan.num_ranks);
  std::mutex mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int r = 0; r < plan.num_ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = world.comm(r);
        CpuBackend backend(*comm, cpu);
        results[r] = replay_rank(plan, *sched.find_rank(r), backend, opt, comm.get());
      } catch (const std::exception& e) {
        {
          std::lock_guard lock(mu);
          // The first failure is the cause; later ones are usually "aborted: <cause>".
          if (first_error.empty()) first_error = "rank " + std::to_string(r) + ": " + e.what();
        }
        world.abort("rank " + std::to_string(r) + " failed: " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!first_error.empty()) throw ReplayError(first_error);
  return results;
}

nlohmann::json rank_result_json(const ReplayPlan& plan, const RankResult& r) {
  const RankOps* ro = plan.find_rank(r.rank);
  if (ro == nullptr) throw ReplayError("no plan ops for rank " + std::to_string(r.rank));
  nlohmann::json ops = nlohmann::json::array();
  double predicted_step = 0;
  for (const PlanOp& op : ro->ops) {
    nlohmann::json o = {{"id", op.id},
                        {"name", op.name},
                        {"kind", to_string(op.kind)},
                        {"stream", to_string(op.stream)},
                        {"phase", op.phase}};
    if (!op.work.empty()) o["work"] = op.work;
    if (op.kind == OpKind::Collective) {
      o["collective"] = to_string(op.collective);
      o["group"] = op.group;
    }
    if (op.kind != OpKind::Compute) o["bytes"] = op.bytes;
    if (op.work == "optimizer_step") o["elements"] = op.elements;
    o["predicted_start_s"] = op.predicted_start_s;
    o["predicted_duration_s"] = op.predicted_duration_s;
    o["measured_start_s"] = r.ops.at(op.id).start_s;
    o["measured_duration_s"] = r.ops.at(op.id).duration_s;
    predicted_step = std::max(predicted_step, op.predicted_start_s + op.predicted_duration_s);
    ops.push_back(std::move(o));
  }
  return {{"rank", r.rank},
          {"step_predicted_s", predicted_step},
          {"step_measured_s", r.step_measured_s},
          {"step_samples_s", r.step_samples_s},
          {"backend_info", r.backend_info},
          {"ops", std::move(ops)}};
}

nlohmann::json replay_output(const ReplayPlan& plan, const std::vector<nlohmann::json>& ranks,
                             const std::string& backend, const std::string& device,
                             const ReplayOptions& opt) {
  double predicted = 0, measured = 0;
  for (const auto& r : ranks) {
    predicted = std::max(predicted, r.at("step_predicted_s").get<double>());
    measured = std::max(measured, r.at("step_measured_s").get<double>());
  }
  return {{"format", "zerosim-replay/1"},
          {"plan_format", "zerosim-plan/1"},
          {"backend", backend},
          {"device", device},
          {"num_ranks", plan.num_ranks},
          {"warmup", opt.warmup},
          {"iters", opt.iters},
          {"scenario", plan.scenario},
          {"step", {{"predicted_s", predicted}, {"measured_s", measured}}},
          {"ranks", ranks}};
}

}  // namespace zerosim::validate
