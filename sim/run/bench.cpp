#include "sim/run/bench.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim {

void run_engine_bench(const std::function<void(const BenchRow&)>& on_row) {
  using json = nlohmann::json;
  for (int dp : {8, 64, 512, 4096}) {
    json doc = {{"model", "llama2-7b"},
                {"cluster", {{"preset", "dgx-h100"}, {"nodes", dp / 8}}},
                {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2}}},
                {"zero", {{"stage", 3}}},
                {"sim", {{"ranks", "all"}, {"network", "analytical"}}}};
    auto timed = [](const json& d, Simulation& out) {
      Scenario s = resolve_scenario(d);
      auto t0 = std::chrono::steady_clock::now();
      out = simulate_step(s);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    Simulation sim, folded;
    BenchRow row;
    row.dp = dp;
    row.ranks = dp;
    row.wall_s = timed(doc, sim);
    doc["sim"]["ranks"] = "folded";
    row.folded_wall_s = timed(doc, folded);
    row.events = sim.report.events;
    row.step_s = sim.report.step_time_s;
    on_row(row);
  }
}

}  // namespace zerosim
