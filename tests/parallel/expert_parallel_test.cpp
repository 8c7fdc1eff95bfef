// Expert parallelism against closed forms, on the tiny model of common.h with each MLP replaced by
// 4 experts of width 64 (top 2) and a router. Per MoE layer, with ep experts groups:
//   attention block 16768; MoE block: router 64 x 4 = 256, its LayerNorm 128, and 4 / ep local
//   experts of (64 x 64 + 64) + (64 x 64 + 64) = 8320 each.
// With ep = 2: local experts 2 x 8320 x 2 layers = 33280; the rest
// 72192 + 2 x (16768 + 256 + 128) + 128 = 106624. On dp = 8 ranks the experts' gradients are
// reduced over the dp / ep = 4 ranks holding the same experts, the rest over all 8:
//   stage 0 (all-reduce):  2 x 2(106624)(8-1)/8 + 2 x 2(33280)(4-1)/4   bytes per GPU;
// and each MoE layer's forward sends two all-to-alls (dispatch, combine), its backward two (four
// when it recomputes the forward), each of b x s x top_k x h 16-bit values, (ep-1)/ep of them
// to other ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "sim/collective/fixed_duration_comm.h"
#include "sim/cost/work_kernels.h"
#include "sim/parallel/framework_policy.h"
#include "sim/run/simulate.h"
#include "sim/scenario/expert_layout.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using namespace testing_plan;

constexpr std::int64_t kDense = 106624, kLocalExperts = 33280;

json moe_doc(int gpus, json zero, int gas, int ep) {
  json doc = tiny_doc(gpus, std::move(zero), gas);
  doc["model"]["moe"] = {{"num_experts", 4}, {"top_k", 2}, {"expert_ffn_hidden_size", 64}};
  doc["parallel"]["ep"] = ep;
  return doc;
}

TEST(expertParallel, ExpertGradientsAreReducedOverTheExpertDataParallelGroup) {
  const Scenario s = resolve_scenario(moe_doc(8, {{"stage", 0}}, 1, 2));
  const Simulation sim = simulate_step(s);
  const double expected = 2.0 * 2 * kDense * 7 / 8 + 2.0 * 2 * kLocalExperts * 3 / 4;
  EXPECT_NEAR(sim.report.comm_bytes_per_gpu[0], expected, 1e-9 * expected);
  ASSERT_EQ(sim.plan.stages.size(), 1u);
  EXPECT_EQ(sim.plan.stages[0].local_params, kDense + kLocalExperts);
}

// Stage 1 partitions the optimizer states of the experts over the 4 ranks holding them and
// the rest over the 8 DP ranks; the updated partitions are gathered over the same groups.
TEST(expertParallel, Stage1PartitionsExpertsOverTheirGroup) {
  const Scenario s = resolve_scenario(moe_doc(8, {{"stage", 1}}, 1, 2));
  const Simulation sim = simulate_step(s);
  const StagePlan& st = sim.plan.stages[0];
  EXPECT_EQ(st.expert_partition, kLocalExperts / 4);
  EXPECT_EQ(st.dp_partition, kDense / 8 + kLocalExperts / 4);
  EXPECT_EQ(st.model_states.optimizer_states, 12 * (kDense / 8 + kLocalExperts / 4));
  // Bucketed all-reduce (DeepSpeed >= 0.12) and the partitions' all-gather: 3F(N-1)/N per group.
  const double expected = 3.0 * 2 * kDense * 7 / 8 + 3.0 * 2 * kLocalExperts * 3 / 4;
  EXPECT_NEAR(sim.report.comm_bytes_per_gpu[0], expected, 1e-9 * expected);
}

TEST(expertParallel, AllToAllBytesFollowTheTokensAndTheRecomputation) {
  const double tokens = 128, top_k = 2, h = 64, layers = 2, micro_batches = 3;
  for (const char* recompute : {"none", "full"}) {
    for (int ep : {2, 4}) {
      json doc = moe_doc(8, {{"stage", 1}}, 3, ep);
      doc["parallel"]["recompute"] = recompute;
      const Simulation sim = simulate_step(resolve_scenario(doc));
      const double per_exchange = 2.0 * tokens * top_k * h * (ep - 1) / ep;
      const double exchanges = std::string(recompute) == "full" ? 2 + 4 : 2 + 2;
      EXPECT_NEAR(sim.report.comm_bytes_per_gpu[3],
                  micro_batches * layers * exchanges * per_exchange, 1e-6)
          << recompute << " ep " << ep;
    }
  }
}

// A rank holds num_experts / ep experts, each fed by the ep ranks of its group: the same rows in
// all (balanced routing), in fewer, larger GEMMs; the routing imbalance scales the rows.
TEST(expertParallel, ExpertGemmsPerRank) {
  const Scenario one = resolve_scenario(moe_doc(8, {{"stage", 1}}, 1, 1));
  const Scenario two = resolve_scenario(moe_doc(8, {{"stage", 1}}, 1, 2));
  const LayerWork a = layer_work(one, true), b = layer_work(two, true);
  for (std::size_t i = a.attention_gemms; i < a.gemms.size(); ++i) {
    if (!a.gemms[i].expert) continue;
    EXPECT_EQ(a.gemms[i].count, 4);
    EXPECT_EQ(b.gemms[i].count, 2);
    EXPECT_EQ(a.gemms[i].m, 128 * 2 / 4);
    EXPECT_EQ(b.gemms[i].m, 2 * 128 * 2 / 4);
    EXPECT_DOUBLE_EQ(a.gemms[i].flops(), b.gemms[i].flops());
  }
  json doc = moe_doc(8, {{"stage", 1}}, 1, 2);
  doc["training"]["moe_load_imbalance"] = 1.5;
  const LayerWork c = layer_work(resolve_scenario(doc), true);
  for (std::size_t i = c.attention_gemms; i < c.gemms.size(); ++i) {
    if (c.gemms[i].expert) {
      EXPECT_EQ(c.gemms[i].m, 192);
    }
  }
}

// A folded plan (one replica standing for all) times the step of `doc` as the full plan does.
void expect_folded_equals_all(json doc) {
  doc["sim"] = {{"ranks", "folded"}};
  const double folded = simulate_step(resolve_scenario(doc)).report.step_time_s;
  doc["sim"]["ranks"] = "all";
  const double all = simulate_step(resolve_scenario(doc)).report.step_time_s;
  EXPECT_EQ(folded, all);
  EXPECT_GT(folded, 0);
}

// Here each expert group spans two nodes, so the all-to-alls cross the fabric.
TEST(expertParallel, FoldedStepEqualsTheFullOne) {
  json doc = moe_doc(16, {{"stage", 1}}, 2, 16);
  doc["cluster"] = {{"preset", "dgx-h100"}, {"nodes", 2}};
  doc["model"]["moe"]["num_experts"] = 16;
  expect_folded_equals_all(doc);
}

// With TP 2 and sequence parallelism each TP rank dispatches its half of the tokens, and the TP
// group gathers what its experts received: the MoE blocks' TP collectives carry top_k = 2 times
// a dense block's (2 x 128 x 64 16-bit values, of which a rank sends half in its reduce-scatter
// and half in its all-gather) in each of 2 layers' forward and backward.
TEST(expertParallel, WithTensorParallelismTheTpGroupGathersTheRoutedTokens) {
  auto run = [](int ep) {
    json doc = moe_doc(8, {{"stage", 1}}, 1, ep);
    doc["parallel"]["tp"] = 2;
    doc["parallel"]["sequence_parallel"] = true;
    return simulate_step(resolve_scenario(doc)).report;
  };
  const StepReport one = run(1), two = run(2);
  const double block = 2.0 * 128 * 64;  // bytes of one TP collective's buffer
  EXPECT_NEAR(two.comm_bytes_per_gpu[1] - one.comm_bytes_per_gpu[1], 2 * 2 * (2 - 1) * block, 1e-6);
  // Dispatch and combine, forward and backward, 2 layers: 64 tokens x top 2 x 64 x 2 bytes each,
  // half of it to the other rank of the expert group.
  EXPECT_NEAR(two.comm_bytes_per_gpu[3], 2 * 4 * (2.0 * 64 * 2 * 64) / 2, 1e-6);
}

// Megatron-core's MoE parallel folding with expert TP 1: on tp 2 x dp 4, ep 4 groups are 2 DP
// indices at both TP ranks (ranks 0-3 and 4-7 of the stage, in rank order), each rank holds one
// whole expert (8320 parameters per layer, 2 layers), reduced over the expert-data-parallel group
// of tp x dp / ep = 2 ranks; a rank routes its own 64 tokens (sequence parallelism), so every
// all-to-all carries 64 x top 2 x 64 x 2 bytes, 3/4 of it to the other ranks of its group, and
// the MoE blocks have no TP collectives of their own.
json folded_doc(int gpus, int ep, int experts) {
  json doc = moe_doc(gpus, {{"stage", 1}}, 1, ep);
  doc["model"]["moe"]["num_experts"] = experts;
  doc["parallel"]["tp"] = 2;
  doc["parallel"]["sequence_parallel"] = true;
  doc["parallel"]["etp"] = 1;
  return doc;
}

TEST(expertParallel, ExpertTp1SpreadsTheExpertGroupsAcrossTp) {
  json doc = folded_doc(8, 4, 4);
  doc["sim"] = {{"ranks", "all"}};
  const Scenario s = resolve_scenario(doc);
  ASSERT_TRUE(s.experts_span_tp());
  EXPECT_EQ(s.expert_dp(), 2);
  EXPECT_TRUE(s.warnings.empty());
  const Simulation sim = simulate_step(s);
  const StagePlan& st = sim.plan.stages[0];
  EXPECT_EQ(st.expert_partition, 2 * 8320 / 2);
  // The expert-parallel groups, as the plan built them.
  std::vector<std::vector<std::int32_t>> groups;
  for (int g = 0; g < sim.plan.plan.num_groups(); ++g) {
    if (sim.plan.group_kind[static_cast<std::size_t>(g)] != GroupKind::Ep) continue;
    const std::int32_t* m = sim.plan.plan.group_members(g);
    groups.emplace_back(m, m + sim.plan.plan.group_size(g));
  }
  EXPECT_EQ(groups, (std::vector<std::vector<std::int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // Dispatch and combine, forward and backward, 2 layers.
  EXPECT_NEAR(sim.report.comm_bytes_per_gpu[3], 2 * 4 * (2.0 * 64 * 2 * 64) * 3 / 4, 1e-6);
  // Against expert TP 2 (ep 2 inside DP), whose MoE blocks gather top_k = 2 times a dense
  // block's TP buffer (2 x 128 x 64 bytes, half sent in each of the reduce-scatter and the
  // all-gather) in each layer's forward and backward: only that TP traffic goes away.
  json tp_split = moe_doc(8, {{"stage", 1}}, 1, 2);
  tp_split["parallel"]["tp"] = 2;
  tp_split["parallel"]["sequence_parallel"] = true;
  tp_split["sim"] = {{"ranks", "all"}};
  const StepReport split = simulate_step(resolve_scenario(tp_split)).report;
  EXPECT_NEAR(split.comm_bytes_per_gpu[1] - sim.report.comm_bytes_per_gpu[1],
              2 * 2 * 2 * (2.0 * 128 * 64), 1e-6);
}

// The same expert FLOPs per rank either way: 64 own tokens x top 2 x 4 ranks / 4 experts = 128
// rows through one whole expert, against 128 tokens x 2 x 2 / 4 = 128 rows through two experts
// split in half.
TEST(expertParallel, ExpertTp1GemmsAndActivations) {
  const Scenario folded = resolve_scenario(folded_doc(8, 4, 4));
  json split_doc = moe_doc(8, {{"stage", 1}}, 1, 2);
  split_doc["parallel"]["tp"] = 2;
  split_doc["parallel"]["sequence_parallel"] = true;
  const Scenario split = resolve_scenario(split_doc);
  const LayerWork a = layer_work(folded, true), b = layer_work(split, true);
  double fa = 0, fb = 0;
  for (const Gemm& g : a.gemms) {
    if (!g.expert) continue;
    EXPECT_EQ(g.m, 128);
    EXPECT_EQ(g.count, 1);
    EXPECT_EQ(g.n * g.k, 64 * 64);  // whole
    fa += g.flops();
  }
  for (const Gemm& g : b.gemms) fb += g.expert ? g.flops() : 0;
  EXPECT_DOUBLE_EQ(fa, fb);
  // The routed tokens (2 x top_k x s x b x h bytes), their fp32 scores (4 x top_k x s x b) and
  // the router's fp32 probabilities (4 x s x b x E) are each rank's own under expert TP 1: half
  // of them.
  auto bytes = [](std::int64_t expert_tp) {
    return activation_bytes_per_layer(resolve_scenario(folded_doc(8, 4, 4)).model, 1, 2, true,
                                      Recompute::None, true, true, 1, expert_tp);
  };
  EXPECT_NEAR(bytes(2) - bytes(1), (2.0 * 2 * 128 * 64 + 4.0 * 2 * 128 + 4.0 * 128 * 4) / 2, 1e-6);
}

// The folded plan (one DP index standing for all) costs the expert groups across TP as the full
// plan does: 16 ranks on two nodes, one expert group of all of them.
TEST(expertParallel, ExpertTp1FoldedStepEqualsTheFullOne) {
  json doc = folded_doc(16, 16, 16);
  doc["cluster"] = {{"preset", "dgx-h100"}, {"nodes", 2}};
  expect_folded_equals_all(doc);
}

TEST(expertParallel, ExpertTp1RefusalsAndWarnings) {
  // 16 experts over ep 16 needs tp x dp = 16 ranks; 8 GPUs have 8.
  EXPECT_EQ(input_error_key(folded_doc(8, 16, 16)), "parallel.ep");
  // ep below tp with expert TP 1 is not simulated yet: read, simulated as expert TP = tp, warned.
  json doc = folded_doc(8, 1, 4);
  const Scenario s = resolve_scenario(doc);
  EXPECT_FALSE(s.experts_span_tp());
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0].key_path, "parallel.etp");
}

// Stage 3 with expert parallelism, torchtitan's FSDP and Megatron-core's (whose expert
// parameters take the expert-data-parallel group, mcore_fsdp_adapter.py): the routed experts are
// sharded over the dp / ep = 4 ranks holding them and the other parameters over all 8, so with
// nothing persistent or reused each micro-batch gathers both parts for the forward and again for
// the backward (2 bytes) and reduce-scatters their gradients (2 bytes; Megatron's in fp32 under
// bf16, grad_reduce_in_fp32: 4), each over its own group: m x bytes x F(N-1)/N per part.
TEST(expertParallel, Stage3ShardsTheExpertsOverTheirGroup) {
  for (const auto& [framework, bytes] : {std::pair{"fsdp", 6.0}, std::pair{"megatron", 8.0}}) {
    for (int m : {1, 2}) {
      json doc = moe_doc(8, {{"stage", 3},
                             {"stage3_param_persistence_threshold", 0},
                             {"stage3_max_reuse_distance", 0}},
                         m, 2);
      doc["parallel"]["framework"] = framework;
      const Scenario s = resolve_scenario(doc);
      const Simulation sim = simulate_step(s);
      const double expected = m * bytes * (kDense * 7.0 / 8 + kLocalExperts * 3.0 / 4);
      EXPECT_NEAR(sim.report.comm_bytes_per_gpu[0], expected, 1e-9 * expected)
          << framework << " m " << m;
      const StagePlan& st = sim.plan.stages[0];
      EXPECT_EQ(st.expert_partition, kLocalExperts / 4);
      EXPECT_EQ(st.model_states.params, 2 * (kDense / 8 + kLocalExperts / 4));
      expect_folded_equals_all(doc);
    }
  }
  // torchtitan's experts span the TP ranks (expert TP 1) when ep is a multiple of tp; otherwise
  // they are split by TP, with a warning on the key.
  json tp2 = moe_doc(8, {{"stage", 3}}, 1, 2);
  tp2["parallel"]["framework"] = "fsdp";
  tp2["parallel"]["tp"] = 2;
  tp2["parallel"]["sequence_parallel"] = true;
  const Scenario spans = resolve_scenario(tp2);
  EXPECT_TRUE(spans.experts_span_tp());
  EXPECT_TRUE(spans.warnings.empty());
  tp2["parallel"]["tp"] = 4;
  const Scenario split = resolve_scenario(tp2);
  EXPECT_FALSE(split.experts_span_tp());
  ASSERT_EQ(split.warnings.size(), 1u);
  EXPECT_EQ(split.warnings[0].key_path, "parallel.ep");
  tp2["parallel"]["framework"] = "megatron";
  tp2["zero"]["stage"] = 1;
  tp2["parallel"]["tp"] = 2;
  EXPECT_FALSE(resolve_scenario(tp2).experts_span_tp());  // Megatron-core's default expert TP
  // DeepSpeed's stage 3 with experts is refused (it asserts so).
  json deepspeed = moe_doc(8, {{"stage", 3}}, 1, 2);
  EXPECT_EQ(input_error_key(deepspeed), "parallel.ep");
}

// Megatron's --overlap-param-gather with expert parallelism: the routed experts have buckets of
// their own, gathered over the dp / ep = 4 ranks holding them during the next forward, the
// other parameters' over all 8. The bytes are those of the gathers after the step it replaces,
// 2 bytes x F(N-1)/N per part; an MoE block's forward waits for its experts' bucket.
TEST(expertParallel, OverlappedParameterGathersKeepTheExpertsApart) {
  auto doc = [](bool overlap) {
    json d = moe_doc(8, {{"stage", 1}}, 1, 2);
    d["parallel"]["framework"] = "megatron";
    d["parallel"]["overlap_param_gather"] = overlap;
    return d;
  };
  const Simulation after_step = simulate_step(resolve_scenario(doc(false)));
  const Simulation overlapped = simulate_step(resolve_scenario(doc(true)));
  const double gathers = 2.0 * kDense * 7 / 8 + 2.0 * kLocalExperts * 3 / 4;
  EXPECT_NEAR(after_step.report.comm_bytes_per_gpu[0], overlapped.report.comm_bytes_per_gpu[0],
              1e-9 * gathers);
  const TrainingPlan plan = build_training_plan(resolve_scenario(doc(true)), true);
  const Plan& p = plan.plan;
  auto named = [&](OpId op, const std::string& prefix) {
    return p.names[static_cast<std::size_t>(p.ops[op].name)].rfind(prefix, 0) == 0;
  };
  const std::string expert_gather = "expert param all_gather (overlapped)";
  double expert_bytes = 0;
  int expert_gathers = 0;
  bool waits_for_experts = false;
  for (OpId op = 0; op < p.ops.size(); ++op) {
    if (p.ops[op].rank != 0) continue;
    if (named(op, expert_gather)) {
      ++expert_gathers;
      expert_bytes += static_cast<double>(p.ops[op].bytes);
    }
    if (named(op, "fwd moe L0")) {
      for (std::uint32_t d = 0; d < p.ops[op].dep_count; ++d) {
        waits_for_experts |= named(p.deps[p.ops[op].dep_begin + d], expert_gather);
      }
    }
  }
  // Both layers' experts (2 x 8320 x 2) fit one 40M-element bucket: one gather of the 4 ranks'
  // pieces.
  EXPECT_EQ(expert_gathers, 1);
  EXPECT_EQ(expert_bytes, 2.0 * kLocalExperts);
  EXPECT_TRUE(waits_for_experts);
}

// Context parallelism beside expert parallelism, as Megatron-core folds them (arXiv:2504.14960):
// 8 ranks, cp 2 and dp 4, ep 4. The expert-parallel groups are 4 consecutive ranks of the
// cp-inner dp x cp grid, {0..3} and {4..7}, each spanning two CP pairs {0,1}, {2,3}, ...; a rank
// holds one of the 4 experts (8320 x 2 layers), whose optimizer states are partitioned over the
// dp x cp / ep = 2 ranks holding it. Each rank dispatches its own chunk of the sequence,
// 128 / cp = 64 tokens x top 2 x h 64 in 16 bits, 3/4 of it to other ranks, in each of 2
// layers' 2 forward and 2 backward exchanges. DeepSpeed with Ulysses (TP 1) forms the same groups
// (utils/groups.py: ep consecutive ranks; Megatron-DeepSpeed: consecutive Ulysses ranks).
TEST(expertParallel, ContextParallelRanksShareTheExpertGroups) {
  for (const char* framework : {"megatron", "deepspeed"}) {
    SCOPED_TRACE(framework);
    json doc = moe_doc(8, {{"stage", 1}}, 1, 4);
    doc["parallel"]["framework"] = framework;
    doc["parallel"]["cp"] = 2;
    if (std::string(framework) == "deepspeed") doc["parallel"]["cp_comm_type"] = "a2a";
    doc["sim"] = {{"ranks", "all"}};
    const Scenario s = resolve_scenario(doc);
    ASSERT_EQ(s.parallel.dp, 4);
    EXPECT_EQ(s.expert_dp(), 2);
    const Simulation sim = simulate_step(s);
    auto groups_of = [&](GroupKind kind) {
      std::vector<std::vector<std::int32_t>> groups;
      for (int g = 0; g < sim.plan.plan.num_groups(); ++g) {
        if (sim.plan.group_kind[static_cast<std::size_t>(g)] != kind) continue;
        const std::int32_t* m = sim.plan.plan.group_members(g);
        groups.emplace_back(m, m + sim.plan.plan.group_size(g));
      }
      return groups;
    };
    EXPECT_EQ(groups_of(GroupKind::Ep),
              (std::vector<std::vector<std::int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
    EXPECT_EQ(groups_of(GroupKind::Cp),
              (std::vector<std::vector<std::int32_t>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    const std::int64_t local_experts = 8320 * 2;
    const StagePlan& st = sim.plan.stages[0];
    EXPECT_EQ(st.local_params, kDense + local_experts);
    EXPECT_EQ(st.expert_partition, local_experts / 2);
    EXPECT_EQ(st.dp_partition, kDense / 8 + local_experts / 2);
    EXPECT_NEAR(sim.report.comm_bytes_per_gpu[3], 2 * 4 * (2.0 * 64 * 2 * 64) * 3 / 4, 1e-6);
    // The folded plan (one DP index standing for all) times it as the full one does.
    expect_folded_equals_all(doc);
  }
}

// ep may use the CP ranks too: 8 experts over ep 8 on dp 4 x cp 2 or dp 2 x cp 4, not on
// dp 2 x cp 2 (tp 2); under megatron, fsdp, and deepspeed (Ulysses) with tp 1 and pp 1, whose
// consecutive expert groups (utils/groups.py) fold over its consecutive Ulysses groups as
// Megatron-core's do; with PP DeepSpeed's sequence parallelism does not run (Megatron-DeepSpeed
// asserts it): refused.
TEST(expertParallel, ContextParallelRefusalsNameTheKey) {
  json doc = moe_doc(8, {{"stage", 1}}, 1, 8);
  doc["model"]["moe"]["num_experts"] = 8;
  doc["parallel"]["framework"] = "megatron";
  for (int cp : {2, 4}) {
    doc["parallel"]["cp"] = cp;
    EXPECT_EQ(input_error_key(doc), "(accepted)") << "cp " << cp;
  }
  doc["parallel"]["cp"] = 2;
  doc["parallel"]["tp"] = 2;
  doc["parallel"]["sequence_parallel"] = true;
  EXPECT_EQ(input_error_key(doc), "parallel.ep");
  // torchtitan lays its expert mesh over the same ranks.
  json fsdp = moe_doc(8, {{"stage", 3}}, 1, 4);
  fsdp["parallel"]["framework"] = "fsdp";
  fsdp["parallel"]["cp"] = 2;
  EXPECT_EQ(input_error_key(fsdp), "(accepted)");
  expect_folded_equals_all(fsdp);
  json ulysses = moe_doc(8, {{"stage", 1}}, 1, 2);
  ulysses["parallel"]["framework"] = "deepspeed";
  ulysses["parallel"]["cp"] = 2;
  ulysses["parallel"]["cp_comm_type"] = "a2a";
  EXPECT_EQ(input_error_key(ulysses), "(accepted)");
  expect_folded_equals_all(ulysses);
  ulysses["parallel"]["pp"] = 2;
  EXPECT_EQ(input_error_key(ulysses), "parallel.cp");
}

// What is not simulated yet is refused, naming parallel.ep.
TEST(expertParallel, RefusesWhatItDoesNotSimulate) {
  auto with = [](int ep, const std::function<void(json&)>& edit) {
    return input_error_key(moe_doc(8, {{"stage", 1}}, 1, ep), edit);
  };
  EXPECT_EQ(with(3, [](json&) {}), "parallel.ep");  // 3 does not divide 4 experts
  // Megatron-core runs MoE under TP only with sequence parallelism.
  EXPECT_EQ(with(2, [](json& d) { d["parallel"]["tp"] = 2; }), "parallel.sequence_parallel");
  EXPECT_EQ(with(2, [](json& d) { d["model"].erase("moe"); }), "parallel.ep");
  EXPECT_EQ(with(2, [](json&) {}), "(accepted)");
}

}  // namespace
}  // namespace zerosim

namespace zerosim {
namespace {

// Megatron-core's combined 1F1B (parallel.overlap_moe_expert_parallel_comm) against a closed
// form. Blocks cost a (attention) and e (MoE) forward, twice that backward; every other op and
// every collective but the all-to-all nothing; an all-to-all of one exchange's bytes c (two
// exchanges played as one op: 2c). One layer, no pipeline, m micro-batches.
//  - Not combined: each forward a + e + 2c, each backward 2e + 2c + 2a: m (3a + 3e + 4c).
//  - Combined: the first forward alone (a + e + 2c), then m - 1 steps that run forward j + 1
//    beside backward j: forward attention, backward experts, forward experts, backward
//    attention on the compute stream, the four exchanges on their own stream after the block
//    each follows. With a, e >= c each exchange ends before the block that needs it may start:
//    3a + 3e per step. The last backward alone: 2e + 2c + 2a. In all m (3a + 3e) + 4c.
class MoeBlocks : public ComputeModel {
 public:
  MoeBlocks(const TrainingPlan& tp, SimTime a, SimTime e) : tp_(tp), a_(a), e_(e) {}
  SimTime duration(const Plan& plan, OpId op) override {
    const Work& w = tp_.works[plan.ops[op].work];
    // A backward split into its input and weight gradients: half of it each.
    const SimTime half = w.part == BackwardPart::Whole ? 2 : 1;
    switch (w.kind) {
      case WorkKind::AttentionForward: return a_;
      case WorkKind::AttentionBackward: return half * a_;
      case WorkKind::MoeForward: return e_;
      case WorkKind::MoeBackward: return half * e_;
      default: return 0;
    }
  }
  double comm_slowdown() const override { return 0; }

 private:
  const TrainingPlan& tp_;
  SimTime a_, e_;
};

// All-to-alls take c per exchange's bytes; the rest nothing.
class AllToAllOnly : public FixedDurationComm {
 public:
  AllToAllOnly(Bytes exchange, SimTime c) : exchange_(exchange), c_(c) {}

 protected:
  SimTime collective_duration(const Plan& plan, std::uint32_t id) override {
    const Collective& col = plan.collectives[id];
    return col.kind == CollectiveKind::AllToAll ? c_ * (col.bytes / exchange_) : 0;
  }

 private:
  Bytes exchange_;
  SimTime c_;
};

TEST(expertParallel, CombinedOneFOneBHidesTheAllToAllsBehindTheOtherPass) {
  const SimTime a = 40 * kPicosPerMicro, e = 30 * kPicosPerMicro, c = 10 * kPicosPerMicro;
  for (int m : {1, 2, 5}) {
    for (bool combined : {false, true}) {
      SCOPED_TRACE("m " + std::to_string(m) + (combined ? " combined" : ""));
      json doc = moe_doc(2, {{"stage", 1}}, m, 2);
      doc["model"]["num_layers"] = 1;
      doc["model"]["position"] = "rotary";
      doc["parallel"]["framework"] = "megatron";
      doc["parallel"]["overlap_moe_expert_parallel_comm"] = combined;
      const Scenario s = resolve_scenario(doc);
      const TrainingPlan tp = build_training_plan(s, true);
      // One exchange: b x s x top_k x h 16-bit values.
      const Bytes exchange = 2 * 128 * 2 * 64;
      MoeBlocks compute(tp, a, e);
      AllToAllOnly comm(exchange, c);
      const EngineResult r = run_engine(tp.plan, compute, comm);
      const SimTime expected = combined ? m * (3 * a + 3 * e) + 4 * c : m * (3 * a + 3 * e + 4 * c);
      EXPECT_EQ(r.makespan, expected);
    }
  }
}

// --delay-wgrad-compute in the same model, backward blocks split into equal input- and
// weight-gradient halves, all-to-alls slower than an expert block (e < c): m = 2, so the first
// forward alone (a + e + 2c), one combined step, the last backward alone. In the step the
// forward attention (a) comes first, its dispatch (c) then runs on the all-to-all stream while
// the compute stream runs the experts' backward and forward. Without the delay the dispatch
// backward starts after the whole experts' backward (2e) and the attention's backward waits for
// it: a + 2e + c, then 2a. With it, after the experts' input gradient (e) and the forward's
// dispatch (c): the attention's backward starts at a + max(3e, max(e, c) + c). The last backward
// alone: 2e + 2c + 2a in place; delayed, as Megatron runs it through the same layer plan, the
// combine's backward (c), the experts' input gradient (e), then their wgrad beside the dispatch's
// backward: c + max(2e, e + c) + 2a.
TEST(expertParallel, DelayedWgradLetsTheDispatchBackwardStartAfterTheInputGradient) {
  const SimTime a = 40 * kPicosPerMicro, e = 20 * kPicosPerMicro, c = 30 * kPicosPerMicro;
  for (bool delay : {false, true}) {
    SCOPED_TRACE(delay ? "delayed" : "in place");
    json doc = moe_doc(2, {{"stage", 1}}, 2, 2);
    doc["model"]["num_layers"] = 1;
    doc["model"]["position"] = "rotary";
    doc["parallel"]["framework"] = "megatron";
    doc["parallel"]["overlap_moe_expert_parallel_comm"] = true;
    doc["parallel"]["delay_wgrad_compute"] = delay;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    MoeBlocks compute(tp, a, e);
    AllToAllOnly comm(2 * 128 * 2 * 64, c);
    const SimTime step = delay ? a + std::max(3 * e, std::max(e, c) + c) + 2 * a
                               : a + 2 * e + c + 2 * a;
    const SimTime last = delay ? c + std::max(2 * e, e + c) + 2 * a : 2 * e + 2 * c + 2 * a;
    EXPECT_EQ(run_engine(tp.plan, compute, comm).makespan, (a + e + 2 * c) + step + last);
  }
  // Megatron-core asserts the combined 1F1B with it.
  json alone = moe_doc(2, {{"stage", 1}}, 2, 2);
  alone["parallel"]["framework"] = "megatron";
  alone["parallel"]["delay_wgrad_compute"] = true;
  EXPECT_EQ(input_error_key(alone), "parallel.delay_wgrad_compute");
}

TEST(expertParallel, CombinedOneFOneBRefusesWhatMegatronRefuses) {
  auto key = [](const std::function<void(json&)>& edit) {
    json doc = moe_doc(2, {{"stage", 1}}, 2, 2);
    doc["parallel"]["framework"] = "megatron";
    doc["parallel"]["overlap_moe_expert_parallel_comm"] = true;
    return input_error_key(doc, edit);
  };
  const std::string k = "parallel.overlap_moe_expert_parallel_comm";
  EXPECT_EQ(key([](json&) {}), "(accepted)");
  EXPECT_EQ(key([](json& d) { d["parallel"]["framework"] = "deepspeed"; }), k);
  EXPECT_EQ(key([](json& d) { d["parallel"]["ep"] = 1; }), k);
  EXPECT_EQ(key([](json& d) { d["parallel"]["recompute"] = "full"; }), k);
  EXPECT_EQ(key([](json& d) {
              d["cluster"]["num_gpus"] = 4;
              d["parallel"]["pp"] = 2;
            }),
            k);  // a pipeline without interleaving
}

// The flex dispatcher (DeepEP) on two nodes of 8 GPUs, EP 16, 16 experts (one per rank), top 4.
// A token goes over the network once to each other node its experts are on, to the rank at its
// own place there, which forwards it over NVLink once to each other rank of its node holding one
// of them. Per rank, micro-batch and exchange of w bytes per element (T = 128 tokens of h = 64):
//   network: T h w P(node), to the one other node;
//   NVLink:  2 T h w P(rank) to each of the 7 other ranks of the node (its own tokens and those
//            that arrived from the other node);
// P(rank) = 1 - C(15, 4) / C(16, 4) = 1/4; P(node) = 1 - C(8, 4) / C(16, 4), or 1/2 when each
// token is limited to one of two node groups. The combine and the dispatch's backward are bf16;
// the dispatch and the combine's backward on the wire in their dtypes (MXFP8: 33/32 bytes).
json flex_doc(int gas) {
  json doc = moe_doc(16, {{"stage", 1}}, gas, 16);
  doc["model"]["moe"]["num_experts"] = 16;
  doc["model"]["moe"]["top_k"] = 4;
  doc["model"]["position"] = "rotary";
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["moe_token_dispatcher_type"] = "flex";
  return doc;
}

TEST(expertParallel, FlexDispatcherSendsEachTokenOncePerNodeAndRank) {
  const double tokens = 128, h = 64, layers = 2, micro_batches = 3;
  const double rank_hit = 0.25;
  struct Case {
    bool node_limited;
    const char* dtype;
    double node_hit, wire;
  };
  for (const Case& c : {Case{false, "bf16", 1 - 70.0 / 1820, 2.0},
                        Case{true, "bf16", 0.5, 2.0},
                        Case{true, "mxfp8", 0.5, 33.0 / 32}}) {
    json doc = flex_doc(3);
    if (c.node_limited) {
      doc["model"]["moe"]["router_num_groups"] = 2;
      doc["model"]["moe"]["router_group_topk"] = 1;
    }
    doc["parallel"]["moe_dispatch_fwd_dtype"] = c.dtype;
    doc["parallel"]["moe_combine_bwd_dtype"] = c.dtype;
    doc["sim"] = {{"ranks", "all"}};
    const Simulation sim = simulate_step(resolve_scenario(doc));
    const double per_byte = tokens * h * (c.node_hit + 7 * 2 * rank_hit);
    const double widths = 2 * (c.wire + 2.0);  // forward and backward
    // Each of the 24 all-to-alls moves whole bytes, in whole-byte shares per peer.
    EXPECT_NEAR(sim.report.comm_bytes_per_gpu[3], micro_batches * layers * widths * per_byte,
                24 * 16)
        << c.node_limited << " " << c.dtype;
  }
}

TEST(expertParallel, FlexDispatcherFoldedStepEqualsTheFullOne) {
  json doc = flex_doc(2);
  doc["cluster"] = {{"preset", "dgx-h100"}, {"nodes", 2}};
  expect_folded_equals_all(doc);
  // Across TP (expert TP 1): EP 16 over TP 2 x DP 8.
  doc["parallel"]["tp"] = 2;
  doc["parallel"]["sequence_parallel"] = true;
  doc["parallel"]["etp"] = 1;
  expect_folded_equals_all(doc);
}

TEST(expertParallel, FlexDispatcherRefusalsAndWarnings) {
  auto key = [](const std::function<void(json&)>& edit) {
    return input_error_key(flex_doc(1), edit);
  };
  EXPECT_EQ(key([](json&) {}), "(accepted)");
  EXPECT_EQ(key([](json& d) { d["parallel"]["framework"] = "deepspeed"; }),
            "parallel.moe_token_dispatcher_type");
  EXPECT_EQ(key([](json& d) {
              d["parallel"]["moe_token_dispatcher_type"] = "alltoall";
              d["parallel"]["moe_dispatch_fwd_dtype"] = "mxfp8";
            }),
            "parallel.moe_dispatch_fwd_dtype");
  EXPECT_EQ(key([](json& d) { d["parallel"]["moe_token_dispatcher_type"] = "deepep"; }),
            "parallel.moe_token_dispatcher_type");
  // Simulated as alltoall, and said: the all-gather dispatcher; flex with the experts split by TP.
  json gather = flex_doc(1);
  gather["parallel"]["moe_token_dispatcher_type"] = "allgather";
  json split = flex_doc(1);
  split["parallel"]["tp"] = 2;
  split["parallel"]["sequence_parallel"] = true;
  split["parallel"]["ep"] = 8;
  for (const json& doc : {gather, split}) {
    const Scenario s = resolve_scenario(doc);
    EXPECT_FALSE(flex_dispatch(s));
    ASSERT_EQ(s.warnings.size(), 1u) << doc.dump();
    EXPECT_EQ(s.warnings[0].key_path, "parallel.moe_token_dispatcher_type");
  }
  EXPECT_TRUE(flex_dispatch(resolve_scenario(flex_doc(1))));
}

}  // namespace
}  // namespace zerosim
