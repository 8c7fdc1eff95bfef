// Megatron's --overlap-grad-reduce and --overlap-param-gather against a hand-written reference
// of their schedules, with the fixed costs of common.h (forward: embedding 1 us, attention 2,
// MLP 3, head 4; backward: head 8, MLP 6, attention 4, embedding 2; step 5; all-gather 6,
// reduce-scatter 5) on one folded rank of llama2-7b (DP 2, distributed optimizer, one
// micro-batch). With --overlap-grad-reduce every unit of that model holds more than Megatron's
// 40M-element bucket, so each unit is one bucket; without it Megatron-core keeps the whole
// buffer in one (bucket_size None).
//   no overlap:      forward, backward, one reduce-scatter on the compute stream, the step, one
//                    parameter all-gather.
//   grad overlap:    each bucket's reduce-scatter starts on the DP stream when its backward ends
//                    (or when the previous reduce-scatter ends); the step waits for the last.
//   param overlap:   (with grad overlap, as Megatron-LM requires) bucket b's all-gather starts
//                    when b-1's ends (the first at 0); unit b's forward starts when its gather
//                    and the previous unit are done; no gather after the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/core/error.h"
#include "sim/run/simulate.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using namespace testing_plan;

json megatron_doc(bool grad, bool param) {
  return {{"model", "llama2-7b"},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 2}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 1}}},
          {"parallel", {{"framework", "megatron"}, {"overlap_grad_reduce", grad},
                        {"overlap_param_gather", param}}},
          {"zero", {{"stage", 1}}}};
}

SimTime step_us(const json& doc) {
  const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
  FixedCompute compute(tp);
  FixedComm comm;
  return run_engine(tp.plan, compute, comm).makespan / kPicosPerMicro;
}

constexpr int kLayers = 32;

// Forward and backward durations of the units in forward order.
std::vector<SimTime> forward_units() {
  std::vector<SimTime> f = {1};
  for (int l = 0; l < kLayers; ++l) {
    f.push_back(2);
    f.push_back(3);
  }
  f.push_back(4);
  return f;
}
std::vector<SimTime> backward_units() {  // in backward order
  std::vector<SimTime> b = {8};
  for (int l = 0; l < kLayers; ++l) {
    b.push_back(6);
    b.push_back(4);
  }
  b.push_back(2);
  return b;
}

TEST(MegatronOverlap, NoOverlapRunsEverythingInSeries) {
  SimTime fwd = 0, bwd = 0;
  for (SimTime t : forward_units()) fwd += t;
  for (SimTime t : backward_units()) bwd += t;
  EXPECT_EQ(step_us(megatron_doc(false, false)), fwd + bwd + 5 + 5 + 6);
}

TEST(MegatronOverlap, GradientBucketsReduceDuringTheBackward) {
  SimTime t = 0;
  for (SimTime f : forward_units()) t += f;
  SimTime dp_free = 0;
  for (SimTime b : backward_units()) {
    t += b;                               // this bucket's gradients are ready
    dp_free = std::max(dp_free, t) + 5;   // its reduce-scatter on the DP stream
  }
  const SimTime expected = std::max(t, dp_free) + 5 + 6;
  EXPECT_EQ(step_us(megatron_doc(true, false)), expected);
}

TEST(MegatronOverlap, ParameterGathersOverlapTheNextForward) {
  const std::vector<SimTime> f = forward_units();
  SimTime gather_end = 0, compute_end = 0;
  for (SimTime d : f) {
    gather_end += 6;  // each gather starts when the previous one ends
    compute_end = std::max(compute_end, gather_end) + d;
  }
  // Every gather is done before the backward; the reduce-scatters overlap it as above.
  SimTime t = compute_end, dp_free = 0;
  for (SimTime b : backward_units()) {
    t += b;
    dp_free = std::max(dp_free, t) + 5;
  }
  const SimTime expected = std::max(t, dp_free) + 5;  // no gather after the step
  EXPECT_EQ(step_us(megatron_doc(true, true)), expected);
}

TEST(MegatronOverlap, FlagsNeedMegatronAndTheDistributedOptimizer) {
  json deepspeed = megatron_doc(true, false);
  deepspeed["parallel"]["framework"] = "deepspeed";
  EXPECT_EQ(input_error_key(deepspeed), "parallel.overlap_grad_reduce");
  json ddp = megatron_doc(false, true);
  ddp["zero"]["stage"] = 0;
  EXPECT_EQ(input_error_key(ddp), "parallel.overlap_param_gather");
}

// --tp-comm-overlap: each attention and MLP block's TP collectives (reduce-scatter 5 us and
// all-gather 6 here) run beside the block instead of after it. On the tiny model with TP 2 and
// sequence parallelism, every attention or MLP block costing 10 us forward and 20 us backward
// (the rest nothing; a backward split at its input linear 12 + 4 + 4), a forward block takes
// max(10, 5 + 6) = 11 instead of 10 + 11. A backward block beside its collectives (the input
// gathered again 6, the reduce-scatter 5, the gather 6) takes max(20, 17) = 20; without
// userbuffers Megatron's linear hides them partly: 12 before the input linear, the input's
// gather (12-18) beside the dgrad (12-16), the reduce-scatter (18-23) beside the wgrad (18-22),
// the gather after both (23-29): 29. 4 forward blocks save 21 - 11 and 4 backward blocks
// 29 - 20, 76 us in all. The embedding's and the head's TP collectives (not Transformer Engine
// userbuffers layers) stay after them.
class BlockCompute : public ComputeModel {
 public:
  explicit BlockCompute(const TrainingPlan& tp) : tp_(tp) {}
  SimTime duration(const Plan& plan, OpId op) override {
    const Work& w = tp_.works.at(plan.ops[op].work);
    switch (w.kind) {
      case WorkKind::AttentionForward:
      case WorkKind::MlpForward: return 10 * kPicosPerMicro;
      case WorkKind::AttentionBackward:
      case WorkKind::MlpBackward:
        switch (w.part) {
          case BackwardPart::BeforeInputLinear: return 12 * kPicosPerMicro;
          case BackwardPart::InputLinearDgrad:
          case BackwardPart::InputLinearWgrad: return 4 * kPicosPerMicro;
          default: return 20 * kPicosPerMicro;
        }
      default: return 0;
    }
  }

 private:
  const TrainingPlan& tp_;
};

TEST(MegatronOverlap, TpCommOverlapRunsTheBlocksCollectivesBesideThem) {
  auto step = [](bool overlap) {
    json doc = tiny_doc(2, {{"stage", 1}}, 1, 2);
    doc["parallel"]["framework"] = "megatron";
    doc["parallel"]["sequence_parallel"] = true;
    doc["parallel"]["tp_comm_overlap"] = overlap;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    BlockCompute compute(tp);
    FixedComm comm;
    return run_engine(tp.plan, compute, comm).makespan / kPicosPerMicro;
  };
  EXPECT_EQ(step(false) - step(true), 4 * (21 - 11) + 4 * (29 - 20));
}

// Megatron's column-parallel linear launches its input gradient's all-reduce (10 us here) before
// its wgrad GEMM (4 us of the block's 20) and waits for it after: a backward block takes
// 12 + 4 + max(4, 10) = 26 instead of 20 + 10 without tp_linear_async_communication (TP 2, no
// sequence parallelism), 4 us less for each of the tiny model's 4 blocks. The head's all-reduce
// stays after its backward; the forward does not change.
TEST(MegatronOverlap, AsyncInputGradientReductionRunsBesideTheWgrad) {
  auto step = [](bool async) {
    json doc = tiny_doc(2, {{"stage", 1}}, 1, 2);
    doc["parallel"]["framework"] = "megatron";
    doc["parallel"]["tp_linear_async_communication"] = async;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    BlockCompute compute(tp);
    FixedComm comm;
    return run_engine(tp.plan, compute, comm).makespan / kPicosPerMicro;
  };
  EXPECT_EQ(step(false) - step(true), 4 * (30 - 26));
}

// Megatron by default, nanotron where its config says so; DeepSpeed (Megatron-DeepSpeed under
// --deepspeed) and FSDP refuse it. Under sequence parallelism Megatron always overlaps the
// reduce-scatter: false is warned about and not used.
TEST(MegatronOverlap, AsyncInputGradientIsMegatronsDefaultAndNanotronsOption) {
  json doc = tiny_doc(2, {{"stage", 1}}, 1, 2);
  doc["parallel"]["framework"] = "megatron";
  EXPECT_TRUE(resolve_scenario(doc).parallel.tp_linear_async_communication);
  doc["parallel"]["framework"] = "nanotron";
  EXPECT_FALSE(resolve_scenario(doc).parallel.tp_linear_async_communication);
  doc["parallel"]["tp_linear_async_communication"] = true;
  EXPECT_TRUE(resolve_scenario(doc).parallel.tp_linear_async_communication);
  for (const char* framework : {"deepspeed", "fsdp"}) {
    doc["parallel"]["framework"] = framework;
    EXPECT_EQ(input_error_key(doc), "parallel.tp_linear_async_communication") << framework;
  }
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["sequence_parallel"] = true;
  doc["parallel"]["tp_linear_async_communication"] = false;
  const Scenario s = resolve_scenario(doc);
  EXPECT_TRUE(s.parallel.tp_linear_async_communication);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings.front().key_path, "parallel.tp_linear_async_communication");
}

TEST(MegatronOverlap, TpCommOverlapNeedsMegatronTpAndSequenceParallelism) {
  json doc = tiny_doc(2, {{"stage", 1}}, 1, 2);
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["sequence_parallel"] = true;
  doc["parallel"]["tp_comm_overlap"] = true;
  EXPECT_EQ(input_error_key(doc), "(accepted)");
  doc["parallel"]["sequence_parallel"] = false;  // Megatron asserts sequence parallelism
  EXPECT_EQ(input_error_key(doc), "parallel.tp_comm_overlap");
  doc["parallel"]["sequence_parallel"] = true;
  doc["parallel"]["framework"] = "deepspeed";
  EXPECT_EQ(input_error_key(doc), "parallel.tp_comm_overlap");
  doc = tiny_doc(2, {{"stage", 1}});
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["tp_comm_overlap"] = true;  // TP 1: nothing to overlap; Megatron refuses too
  EXPECT_EQ(input_error_key(doc), "parallel.tp_comm_overlap");
}

// parallel.recompute_modules: Megatron-core's names, with recompute selective under megatron;
// its other names for this architecture warned about, anything else refused naming the entry.
TEST(MegatronOverlap, RecomputeModulesAreMegatronCoresNames) {
  json doc = tiny_doc(2, {{"stage", 1}});
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["recompute"] = "selective";
  doc["parallel"]["recompute_modules"] = {"layernorm", "mlp"};
  EXPECT_EQ(input_error_key(doc), "(accepted)");
  const Scenario s = resolve_scenario(doc);
  EXPECT_EQ(s.parallel.recompute_modules, (RecomputeModules{false, true, false, false, true}));
  doc["parallel"]["recompute_modules"] = {"core_attn", "moe"};
  const Scenario warned = resolve_scenario(doc);
  bool found = false;
  for (const InputWarning& w : warned.warnings) found = found || w.key_path == "parallel.recompute_modules[1]";
  EXPECT_TRUE(found);
  doc["parallel"]["recompute_modules"] = {"layernrom"};
  EXPECT_EQ(input_error_key(doc), "parallel.recompute_modules[0]");
  doc["parallel"]["recompute_modules"] = {"layernorm"};
  doc["parallel"]["recompute"] = "full";
  EXPECT_EQ(input_error_key(doc), "parallel.recompute_modules");
  doc["parallel"]["recompute"] = "selective";
  doc["parallel"]["framework"] = "deepspeed";
  EXPECT_EQ(input_error_key(doc), "parallel.recompute_modules");
}

// parallel.activation_func_fp8_input_store: Megatron-core's, for SwiGLU only (it raises for any
// other activation). Each of the 4 layers keeps its SwiGLU input, 2 x s x b x ffn elements, in one
// byte instead of two: the activations' maximum, at the end of the forward, lower by that much
// per layer.
TEST(MegatronOverlap, Fp8ActivationInputStoreIsMegatronsForSwiglu) {
  json doc = tiny_doc(2, {{"stage", 1}}, 1);
  doc["model"] = {{"preset", "llama2-7b"}, {"num_layers", 4}};
  doc["parallel"]["framework"] = "megatron";
  const Simulation base = simulate_step(resolve_scenario(doc));
  doc["parallel"]["activation_func_fp8_input_store"] = true;
  const Simulation fp8 = simulate_step(resolve_scenario(doc));
  const auto activations = [](const Simulation& sim) {
    return sim.report.memory.category_max[static_cast<int>(MemCategory::Activations)];
  };
  EXPECT_EQ(activations(base) - activations(fp8), 4 * 2 * 4096 * 11008);
  doc["parallel"]["framework"] = "deepspeed";
  EXPECT_EQ(input_error_key(doc), "parallel.activation_func_fp8_input_store");
  doc["parallel"]["framework"] = "megatron";
  doc["model"] = {{"preset", "gpt3-1.3b"}, {"num_layers", 4}};
  EXPECT_EQ(input_error_key(doc), "parallel.activation_func_fp8_input_store");
}

// Replaying a dense MLP (mlp) lengthens the backward by the MLP's forward and shortens what
// each layer keeps: the step is slower and the activations' peak lower than core_attn alone.
TEST(MegatronOverlap, RecomputingTheMlpCostsItsForwardAndSavesItsIntermediates) {
  // Llama 2 7B's shapes, 4 layers (the tiny model's kernels are shorter than their dispatch).
  json doc = tiny_doc(2, {{"stage", 1}}, 4);
  doc["model"] = {{"preset", "llama2-7b"}, {"num_layers", 4}};
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["recompute"] = "selective";
  const Simulation base = simulate_step(resolve_scenario(doc));
  doc["parallel"]["recompute_modules"] = {"core_attn", "mlp"};
  const Simulation mlp = simulate_step(resolve_scenario(doc));
  EXPECT_GT(mlp.report.step_time_s, base.report.step_time_s);
  EXPECT_LT(mlp.report.device_peak, base.report.device_peak);
}

}  // namespace
}  // namespace zerosim
