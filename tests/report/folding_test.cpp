// Symmetry folding (sim.ranks = folded): one data-parallel replica stands for all. On a
// homogeneous cluster without contention every replica runs the same timeline, so the folded
// step must report exactly what simulating every rank reports.
#include <gtest/gtest.h>

#include <string>

#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

TEST(reportFolding, FoldedEqualsAllRanks) {
  const json model = {{"num_layers", 2},
                      {"hidden_size", 64},
                      {"num_attention_heads", 4},
                      {"vocab_size", 1000},
                      {"seq_length", 128}};
  for (int stage = 0; stage <= 3; ++stage) {
    for (int tp : {1, 2}) {
      json doc = {{"model", model},
                  {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 2}}},
                  {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2}}},
                  {"parallel", {{"tp", tp}}},
                  {"zero", {{"stage", stage}}}};
      doc["sim"] = {{"ranks", "all"}};
      const Simulation all = simulate_step(resolve_scenario(doc));
      doc["sim"] = {{"ranks", "folded"}};
      const Simulation folded = simulate_step(resolve_scenario(doc));
      const std::string where = "stage " + std::to_string(stage) + " tp " + std::to_string(tp);
      EXPECT_EQ(folded.result.makespan, all.result.makespan) << where;
      EXPECT_EQ(folded.report.step_time_s, all.report.step_time_s) << where;
      for (int g = 0; g < 3; ++g) {
        EXPECT_DOUBLE_EQ(folded.report.comm_bytes_per_gpu[g], all.report.comm_bytes_per_gpu[g])
            << where << " group " << g;
      }
      EXPECT_EQ(folded.report.memory.peak, all.report.memory.peak) << where;
      EXPECT_EQ(folded.report.memory.category_max, all.report.memory.category_max) << where;
      EXPECT_DOUBLE_EQ(folded.report.breakdown.exposed_comm_s, all.report.breakdown.exposed_comm_s)
          << where;
      EXPECT_LT(folded.plan.plan.ops.size(), all.plan.plan.ops.size()) << where;
    }
  }
}

}  // namespace
}  // namespace zerosim
