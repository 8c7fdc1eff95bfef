// ZeRO model-state memory in the report against the ZeRO paper's formulas (Rajbhandari et al.,
// SC20, section 5; docs/SOURCES.md#zero-and-deepspeed-memory-formulas). With mixed-precision Adam
// (K = 12) and N data-parallel ranks, per GPU:
//   stage 0: params 2Φ, grads 2Φ,   optimizer 12Φ      (16Φ)
//   stage 1: params 2Φ, grads 2Φ,   optimizer 12Φ/N
//   stage 2: params 2Φ, grads 2Φ/N, optimizer 12Φ/N
//   stage 3: params 2Φ/N, grads 2Φ/N, optimizer 12Φ/N  (16Φ/N)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "sim/cost/compute_cost.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {


using json = nlohmann::json;

// A GPT-style tiny model (gelu MLP => LayerNorm, learned positions, biases, tied embeddings,
// ffn = 4h, max_position_embeddings = seq_length). With h = 64, L = 2, V = 1000, s = 128:
//   attention: QKV h*3h + out h*h = 4h^2 = 16384, biases 3h + h = 256, LayerNorm 2h = 128
//              -> 16768
//   MLP: up h*4h + down 4h*h = 8h^2 = 32768, biases 4h + h = 320, LayerNorm 2h = 128 -> 33216
//   per layer 16768 + 33216 = 49984; two layers 99968
//   embedding: token V*h = 64000 + positions s*h = 8192 -> 72192; final LayerNorm 2h = 128
//   Φ = 99968 + 72192 + 128 = 172288 = 2^8 * 673, divisible by N = 2, 8, 16, 64.
constexpr std::int64_t kTinyPhi = 172288;
json tiny_model() {
  return {{"num_layers", 2},
          {"hidden_size", 64},
          {"num_attention_heads", 4},
          {"vocab_size", 1000},
          {"seq_length", 128}};
}

Scenario tiny(int stage, int gpus) {
  json doc = {{"model", tiny_model()},
              {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", gpus}}},
              {"training", {{"micro_batch_size", 1}}},
              {"zero", {{"stage", stage}}}};
  return resolve_scenario(doc);
}

Bytes cat(const MemoryUsage& m, MemCategory c) { return m.category_max[static_cast<int>(c)]; }

TEST(reportModelStates, TinyModelHasTheHandCountedParameters) {
  EXPECT_EQ(count_params(tiny(0, 2).model).total, kTinyPhi);
}

struct Expected {
  std::int64_t params, grads, optimizer;  // bytes per GPU
};

// The paper's per-stage formulas for Φ parameters over N ranks (Φ divisible by N).
Expected paper(int stage, std::int64_t phi, std::int64_t n) {
  switch (stage) {
    case 0:
      return {2 * phi, 2 * phi, 12 * phi};
    case 1:
      return {2 * phi, 2 * phi, 12 * phi / n};
    case 2:
      return {2 * phi, 2 * phi / n, 12 * phi / n};
    default:
      return {2 * phi / n, 2 * phi / n, 12 * phi / n};
  }
}

class reportModelStatesByStage : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(reportModelStatesByStage, MemoryReportEqualsPaperFormula) {
  auto [stage, n] = GetParam();
  ASSERT_EQ(kTinyPhi % n, 0);
  Scenario s = tiny(stage, n);
  ASSERT_EQ(s.parallel.dp, n);
  Expected e = paper(stage, kTinyPhi, n);
  StepReport r = memory_report(s);
  EXPECT_EQ(cat(r.memory, MemCategory::Params), e.params);
  EXPECT_EQ(cat(r.memory, MemCategory::Grads), e.grads);
  EXPECT_EQ(cat(r.memory, MemCategory::OptimizerStates), e.optimizer);
}

TEST_P(reportModelStatesByStage, SimulatedStepEqualsPaperFormula) {
  auto [stage, n] = GetParam();
  Scenario s = tiny(stage, n);
  Expected e = paper(stage, kTinyPhi, n);
  Simulation sim = simulate_step(s);
  EXPECT_EQ(cat(sim.report.memory, MemCategory::Params), e.params);
  EXPECT_EQ(cat(sim.report.memory, MemCategory::Grads), e.grads);
  EXPECT_EQ(cat(sim.report.memory, MemCategory::OptimizerStates), e.optimizer);
  // Same numbers in the plan's own model-state summary.
  EXPECT_EQ(sim.plan.stages.at(0).model_states.params, e.params);
  EXPECT_EQ(sim.plan.stages.at(0).model_states.grads, e.grads);
  EXPECT_EQ(sim.plan.stages.at(0).model_states.optimizer_states, e.optimizer);
}

INSTANTIATE_TEST_SUITE_P(reportStages, reportModelStatesByStage,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(2, 8, 16)));

TEST(reportModelStates, TensorParallelShardsAsMegatronDoes) {
  // tp = 2 over 4 GPUs, so dp = 2. Megatron-LM's layout of the tiny model per TP rank
  // (h = 64, t = 2): vocab-parallel token table V*h/t = 32000, position table s*h = 8192
  // (a plain nn.Embedding, replicated) -> 40192. Attention: QKV column-parallel weight
  // 3h^2/t = 6144 and bias 3h/t = 96, out-projection row-parallel weight h^2/t = 2048 and its
  // bias h = 64 (replicated), LayerNorm 2h = 128 -> 8480. MLP: up 4h^2/t = 8192 + bias 4h/t =
  // 128, down 4h^2/t = 8192 + bias h = 64 (replicated), LayerNorm 128 -> 16704. Final LayerNorm
  // 128; the output layer is tied to the token table.
  //   Φ_tp = 40192 + 2 * (8480 + 16704) + 128 = 90688.
  // ZeRO-3 over dp = 2 then holds 16 Φ_tp / 2 = 725504 bytes of model states.
  json doc = {{"model", tiny_model()},
              {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 4}}},
              {"parallel", {{"tp", 2}}},
              {"training", {{"micro_batch_size", 1}}},
              {"zero", {{"stage", 3}}}};
  StepReport r = memory_report(resolve_scenario(doc));
  EXPECT_EQ(cat(r.memory, MemCategory::Params) + cat(r.memory, MemCategory::Grads) +
                cat(r.memory, MemCategory::OptimizerStates),
            725504);
}

// The paper's worked example (Figure 1): Ψ = 7.5e9, N = 64.
// A model with exactly 7.5e9 parameters: gelu MLP (ffn = 4h) made bias-free with RMSNorm,
// rotary positions and tied embeddings, h = 5000, 40 heads, L = 24, V = 59951:
//   per layer: attention 4h^2 = 1e8, MLP 2*h*4h = 2e8, two RMSNorms 2h = 1e4 -> 300,010,000
//   24 layers: 7,200,240,000; embedding V*h = 299,755,000; final norm h = 5,000
//   Φ = 7,200,240,000 + 299,755,000 + 5,000 = 7,500,000,000.
// Model states (Φ/64 = 117,187,500):
//   stage 0: 16Φ            = 120e9            -> 120 GB
//   stage 1: 4Φ + 12Φ/64    = 30e9 + 1.40625e9 -> 31.4 GB
//   stage 2: 2Φ + 14Φ/64    = 15e9 + 1.640625e9 -> 16.6 GB
//   stage 3: 16Φ/64         = 1.875e9          -> 1.875 GB
TEST(reportModelStates, PaperWorkedExample7p5BOn64Gpus) {
  json model = {{"num_layers", 24},       {"hidden_size", 5000},  {"num_attention_heads", 40},
                {"vocab_size", 59951},    {"seq_length", 2048},   {"mlp", "gelu"},
                {"norm", "rmsnorm"},      {"position", "rotary"}, {"linear_bias", false},
                {"tied_embeddings", true}};
  const std::int64_t expected_bytes[4] = {120'000'000'000, 31'406'250'000, 16'640'625'000,
                                          1'875'000'000};
  const double paper_gb[4] = {120, 31.4, 16.6, 1.875};
  for (int stage = 0; stage < 4; ++stage) {
    json doc = {{"model", model},
                {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 8}}},
                {"training", {{"micro_batch_size", 1}}},
                {"zero", {{"stage", stage}}}};
    Scenario s = resolve_scenario(doc);
    ASSERT_EQ(count_params(s.model).total, 7'500'000'000);
    ASSERT_EQ(s.parallel.dp, 64);
    StepReport r = memory_report(s);
    const Bytes states = cat(r.memory, MemCategory::Params) + cat(r.memory, MemCategory::Grads) +
                         cat(r.memory, MemCategory::OptimizerStates);
    EXPECT_EQ(states, expected_bytes[stage]) << "stage " << stage;
    // The paper prints one decimal (three for stage 3): within half a unit of the last digit.
    EXPECT_NEAR(static_cast<double>(states) / 1e9, paper_gb[stage], stage == 3 ? 5e-4 : 0.05)
        << "stage " << stage;
  }
}

// The tiny model on 8 H100s under `framework` and ZeRO `stage`, with `training` (micro-batch 1).
json tiny_h100(const json& training, int stage = 1, const char* framework = "megatron") {
  json t = training;
  t["micro_batch_size"] = 1;
  return {{"model", tiny_model()},
          {"cluster", {{"preset", "dgx-h100"}, {"num_gpus", 8}}},
          {"training", t},
          {"parallel", {{"framework", framework}}},
          {"zero", {{"stage", stage}}}};
}

// Megatron-core's precision-aware optimizer (--use-precision-aware-optimizer) keeps the Adam
// moments in --exp-avg-dtype / --exp-avg-sq-dtype (4, 2, 2 or 1 bytes) and the master weights in
// --main-params-dtype; Transformer Engine keeps them (megatron/core/optimizer/__init__.py at
// d98e8a6: not when an fp8 recipe other than delayed runs with fp32 master weights) and, with
// bf16 weights, stores only the 16 bits the weight lacks (distrib_optimizer.py: an int16
// master_param under store_param_remainders). Per parameter of the DP partition, the tiny model
// over 8 ranks (stage 1, the distributed optimizer) on an H100 node:
TEST(reportModelStates, PrecisionAwareOptimizerKeepsItsDtypes) {
  auto optimizer_bytes = [](const json& training) {
    return cat(memory_report(resolve_scenario(tiny_h100(training))).memory,
               MemCategory::OptimizerStates);
  };
  const std::int64_t part = kTinyPhi / 8;
  const json on = {{"use_precision_aware_optimizer", true}};
  auto with = [&on](json more) {
    json t = on;
    t.update(more);
    return t;
  };
  const struct {
    json training;
    std::int64_t bytes;
  } cases[] = {
      {json::object(), 12},                                    // fp32 master, m, v
      {on, 2 + 4 + 4},                                         // bf16: 16-bit remainders
      {with({{"exp_avg_dtype", "bf16"}, {"exp_avg_sq_dtype", "bf16"}}), 2 + 2 + 2},
      {with({{"exp_avg_dtype", "fp8"}, {"exp_avg_sq_dtype", "fp16"}}), 2 + 1 + 2},
      {with({{"store_param_remainders", false}, {"exp_avg_dtype", "bf16"}}), 4 + 2 + 4},
      {with({{"precision", "fp16"}}), 4 + 4 + 4},              // fp16 weights: no remainders
      {with({{"precision", "fp8"}, {"fp8_recipe", "delayed"}}), 2 + 4 + 4},
      {with({{"precision", "fp8"}, {"fp8_recipe", "blockwise"}}), 4 + 4 + 4},  // MCore's fp32
      {with({{"precision", "fp8"}, {"fp8_recipe", "tensorwise"}, {"main_params_dtype", "fp16"}}),
       2 + 4 + 4},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(optimizer_bytes(c.training), c.bytes * part) << c.training.dump();
  }
  // Adam reads and writes its state once per step: 6 bytes a parameter instead of 12 take 2 x 6
  // bytes of HBM traffic off each updated parameter.
  auto optimizer_seconds = [](const json& training) {
    const Scenario s = resolve_scenario(tiny_h100(training));
    const TrainingPlan plan = build_training_plan(s, true);
    const ComputeCost cost(s, plan);
    for (std::size_t w = 0; w < plan.works.size(); ++w) {
      if (plan.works[w].kind == WorkKind::OptimizerStep) {
        const double hbm = s.cluster.gpu.hbm_bandwidth * s.cluster.gpu.hbm_efficiency;
        return std::pair{cost.work_seconds(static_cast<int>(w)),
                         static_cast<double>(plan.works[w].elements) / hbm};
      }
    }
    return std::pair{0.0, 0.0};
  };
  const auto [full, per_byte] = optimizer_seconds(json::object());
  const double small = optimizer_seconds(cases[2].training).first;
  ASSERT_GT(per_byte, 0);
  EXPECT_NEAR(full - small, 12 * per_byte, 1e-9 * full);
  // Megatron-core's asserts: the dtypes need the flag, the flag the distributed optimizer.
  using testing_plan::input_error_key;
  const std::string flag = "training.use_precision_aware_optimizer";
  EXPECT_EQ(input_error_key(tiny_h100({{"exp_avg_dtype", "bf16"}})), "training.exp_avg_dtype");
  EXPECT_EQ(input_error_key(tiny_h100(on, 0)), flag);
  EXPECT_EQ(input_error_key(tiny_h100(on, 3)), flag);
  EXPECT_EQ(input_error_key(tiny_h100(on, 1, "deepspeed")), flag);
  EXPECT_EQ(input_error_key(tiny_h100({{"main_params_dtype", "bf16"}})),
            "training.main_params_dtype");
}

}  // namespace
}  // namespace zerosim
