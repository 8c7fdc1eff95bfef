#pragma once
// The replay core: run one rank's ops through a Backend for warm-up and timed steps, and the
// output format "zerosim-replay/1" that `zerosim-validate replay` writes and `compare` reads:
//
//   { "format": "zerosim-replay/1", "plan_format": "zerosim-plan/1", "backend", "device",
//     "num_ranks", "warmup", "iters", "scenario" (from the plan),
//     "step": {"predicted_s", "measured_s"}            (max over ranks; measured = median step)
//     "ranks": [{ "rank", "step_predicted_s", "step_measured_s", "step_samples_s": [...],
//                 "backend_info": {...},
//                 "ops": [{ "id", "name", "kind", "stream", "phase", ["work"], ["collective",
//                           "group"], ["bytes"], "predicted_start_s", "predicted_duration_s",
//                           "measured_start_s", "measured_duration_s" }] }] }
//
// Measured times are the median over the timed steps, per op, on the rank's own clock from the
// start of its step (ranks start each step after a barrier). A collective's measured duration
// runs from the moment the rank's stream reached it, so it includes waiting for late peers; the
// simulator's predicted duration starts when the last member arrives.
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/backend.h"
#include "validate/comm.h"
#include "validate/cpu_backend.h"

namespace zerosim::validate {

struct ReplayOptions {
  int warmup = 1;
  int iters = 3;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // in-process collectives
};

struct RankResult {
  int rank = 0;
  std::vector<OpTiming> ops;           // median per op over the timed steps
  std::vector<double> step_samples_s;  // per timed step: latest op end
  double step_measured_s = 0;          // median of step_samples_s
  nlohmann::json backend_info = nlohmann::json::object();
};

// Runs warm-up + timed steps of one rank. `barrier` (may be null) runs before each step, so ranks
// start their steps together.
RankResult replay_rank(const ReplayPlan& plan, const RankSchedule& sched, Backend& backend,
                       const ReplayOptions& opt, Comm* barrier);

// Every rank of the plan as a thread of this process, each with a CpuBackend over an in-process
// Comm. The first failure aborts the others and is rethrown (ReplayError naming the rank).
std::vector<RankResult> replay_threads_cpu(const ReplayPlan& plan, const Schedule& sched,
                                           const CpuBackendOptions& cpu, const ReplayOptions& opt);

nlohmann::json rank_result_json(const ReplayPlan& plan, const RankResult& r);
nlohmann::json replay_output(const ReplayPlan& plan, const std::vector<nlohmann::json>& ranks,
                             const std::string& backend, const std::string& device,
                             const ReplayOptions& opt);

// The groups of the plan as lists of world ranks, in group order (for Comm construction).
std::vector<std::vector<int>> plan_groups(const ReplayPlan& plan);

}  // namespace zerosim::validate
