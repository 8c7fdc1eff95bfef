// What-if modifiers change the step as the engine plays it.
#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/run/simulate.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

json base() {
  return {{"model", "gpt3-1.3b"},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 2}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2}}},
          {"zero", {{"stage", 1}}}};
}

TEST(reportWhatIf, StragglerComputesSlowerAndEveryoneWaits) {
  // Rank 5 runs its compute 1.5x longer: its forward and backward time are 1.5x rank 0's
  // (both unaffected by waiting, which the breakdown charges elsewhere), and the step, which
  // synchronises at the gradient reduction, gets longer for everyone.
  Simulation healthy = simulate_step(resolve_scenario(base()));
  json doc = base();
  doc["whatif"] = {{"slow_ranks", {5}}, {"slowdown", 1.5}};
  Scenario s = resolve_scenario(doc);
  EXPECT_FALSE(s.sim.folded);
  Simulation slow = simulate_step(s);
  StepBreakdown b0 = breakdown_of_rank(slow.plan, slow.result, 0);
  StepBreakdown b5 = breakdown_of_rank(slow.plan, slow.result, 5);
  EXPECT_NEAR(b5.forward_s, 1.5 * b0.forward_s, 1e-9);
  EXPECT_GT(slow.report.step_time_s, healthy.report.step_time_s);
  // Rank 0 is not slower itself: its compute equals the healthy run's.
  StepBreakdown h0 = breakdown_of_rank(healthy.plan, healthy.result, 0);
  EXPECT_NEAR(b0.forward_s, h0.forward_s, 1e-9);
}

TEST(reportWhatIf, DegradedNicsSlowCrossNodeCollectivesOnly) {
  json doc = base();
  Simulation healthy = simulate_step(resolve_scenario(doc));
  doc["whatif"] = {{"degraded_nodes", {1}}, {"nic_bandwidth_factor", 1.0}};
  // A factor of 1 changes nothing but folding.
  EXPECT_DOUBLE_EQ(simulate_step(resolve_scenario(doc)).report.step_time_s,
                   healthy.report.step_time_s);
  doc["whatif"]["nic_bandwidth_factor"] = 0.1;
  Simulation degraded = simulate_step(resolve_scenario(doc));
  EXPECT_GT(degraded.report.breakdown.exposed_by_group[0], healthy.report.breakdown.exposed_by_group[0]);
  // The flow network, with the same node's NIC links at a tenth, agrees with the closed form
  // when nothing else contends (one data-parallel ring at a time) to within 1 %.
  doc["sim"] = {{"network", "flow"}};
  Simulation flow = simulate_step(resolve_scenario(doc));
  EXPECT_NEAR(flow.report.step_time_s, degraded.report.step_time_s,
              0.01 * degraded.report.step_time_s);
}

TEST(reportWhatIf, BadValuesNameTheKey) {
  auto key_of = [](json whatif) {
    json doc = base();
    doc["whatif"] = std::move(whatif);
    try {
      resolve_scenario(doc);
    } catch (const InputError& e) {
      return e.key_path();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(key_of({{"slowdown", 0.5}}), "whatif.slowdown");
  EXPECT_EQ(key_of({{"slow_ranks", {16}}}), "whatif.slow_ranks");  // 16 GPUs: ranks 0..15
  EXPECT_EQ(key_of({{"slow_ranks", "1,x"}}), "whatif.slow_ranks");
  EXPECT_EQ(key_of({{"degraded_nodes", {2}}}), "whatif.degraded_nodes");
  EXPECT_EQ(key_of({{"nic_bandwidth_factor", 0}}), "whatif.nic_bandwidth_factor");
  EXPECT_EQ(key_of({{"slow_rank", {1}}}), "whatif.slow_rank");
}

}  // namespace
}  // namespace zerosim
