#include "tests/validate/plan_builders.h"

#include "sim/report/plan_export.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim::validate::test {

nlohmann::json tiny_scenario(const nlohmann::json& patch) {
  nlohmann::json doc = {
      {"model", {{"num_layers", 2}, {"hidden_size", 64}, {"num_attention_heads", 4},
                 {"ffn_hidden_size", 256}, {"vocab_size", 512}, {"seq_length", 128}}},
      {"cluster", {{"preset", "dgx-h100"}, {"num_gpus", 2}}},
      {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 1}}},
      {"zero", {{"stage", 0}}}};
  doc.merge_patch(patch);
  return doc;
}

nlohmann::json simulated_plan(const nlohmann::json& scenario) {
  nlohmann::json doc = scenario;
  // Hardware runs every rank: unfold the plan where the simulator folds symmetric replicas.
  doc["sim"]["ranks"] = "all";
  const Scenario s = resolve_scenario(doc);
  const Simulation sim = simulate_step(s);
  return export_plan(s, sim, -1);
}

}  // namespace zerosim::validate::test
