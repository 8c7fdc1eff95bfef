// The bottleneck rules: the largest exposed component with a remedy tied to it, compute-bound
// below the threshold, suggestions that depend on the scenario (framework, ZeRO stage, offload).
#include <gtest/gtest.h>

#include <string>

#include "sim/explore/bottleneck.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {
namespace {
using json = nlohmann::json;

Scenario scenario(const json& parallel, const json& zero = json::object(),
                  const json& training = json::object()) {
  json doc = {{"model", "llama2-7b"},
              {"cluster", {{"preset", "dgx-h100"}, {"nodes", 4}}},
              {"parallel", parallel},
              {"zero", zero},
              {"training", training}};
  doc["training"]["global_batch_size"] = 256;
  if (!doc["training"].contains("micro_batch_size")) doc["training"]["micro_batch_size"] = 1;
  return resolve_scenario(doc);
}

StepReport report(double step, double dp, double tp, double pp, double bubble, double offload) {
  StepReport r;
  r.step_time_s = step;
  r.breakdown.exposed_by_group = {dp, tp, pp};
  r.breakdown.bubble_s = bubble;
  r.breakdown.offload_s = offload;
  r.breakdown.forward_s = (step - dp - tp - pp - bubble - offload) / 3;
  r.breakdown.backward_s = 2 * r.breakdown.forward_s;
  r.mfu = 0.42;
  return r;
}

TEST(Bottleneck, LargestExposedComponentWithItsRemedy) {
  const Bottleneck tp = find_bottleneck(scenario({{"tp", 8}}), report(19.4, 0.5, 3.1, 0, 0, 0));
  EXPECT_EQ(tp.component, "tp_communication");
  EXPECT_DOUBLE_EQ(tp.seconds, 3.1);
  EXPECT_EQ(tp.text().rfind("TP communication 3.10 s exposed, 16 % of the step: try TP <= 4", 0),
            0u)
      << tp.text();

  const Bottleneck dp = find_bottleneck(
      scenario({{"tp", 1}}, {{"stage", 3}, {"overlap_comm", false}}), report(10, 2, 0, 0, 0, 0));
  EXPECT_EQ(dp.component, "dp_communication");
  EXPECT_NE(dp.advice.find("zero.overlap_comm=true"), std::string::npos) << dp.advice;
  EXPECT_NE(dp.advice.find("ZeRO <= 2"), std::string::npos) << dp.advice;
  const Bottleneck dp_megatron = find_bottleneck(
      scenario({{"framework", "megatron"}}, {{"stage", 1}}), report(10, 2, 0, 0, 0, 0));
  EXPECT_NE(dp_megatron.advice.find("parallel.overlap_grad_reduce=true"), std::string::npos);
  EXPECT_EQ(dp_megatron.advice.find("ZeRO <= 2"), std::string::npos);

  const Bottleneck bubble =
      find_bottleneck(scenario({{"pp", 4}}, json::object(), {{"micro_batch_size", 4}}),
                      report(10, 0.1, 0, 0.2, 1.5, 0));
  EXPECT_EQ(bubble.component, "pipeline_bubble");
  EXPECT_NE(bubble.advice.find("micro-batch 2"), std::string::npos) << bubble.advice;
  EXPECT_NE(bubble.advice.find("interleaving"), std::string::npos) << bubble.advice;
  EXPECT_NE(bubble.advice.find("PP <= 2"), std::string::npos) << bubble.advice;
  // The zero-bubble schedule is offered only where it runs (Megatron, ZeRO 0/1) and is not on.
  EXPECT_EQ(bubble.advice.find("zero-bubble"), std::string::npos) << bubble.advice;
  const Bottleneck megatron_bubble = find_bottleneck(
      scenario({{"pp", 4}, {"framework", "megatron"}}, {{"stage", 1}}, {{"micro_batch_size", 4}}),
      report(10, 0.1, 0, 0.2, 1.5, 0));
  EXPECT_NE(megatron_bubble.advice.find("pipeline_schedule=zero-bubble"), std::string::npos)
      << megatron_bubble.advice;
  const Bottleneck zb_bubble = find_bottleneck(
      scenario({{"pp", 4}, {"framework", "megatron"}, {"pipeline_schedule", "zero-bubble"}},
               {{"stage", 1}}, {{"micro_batch_size", 4}}),
      report(10, 0.1, 0, 0.2, 1.5, 0));
  // ZB-H1 on: ZB-V is still offered (32 layers split into 2 x 4 chunks), not interleaving (two
  // virtual stages under zero-bubble are ZB-V); ZB-V on: neither.
  EXPECT_EQ(zb_bubble.advice.find("zero-bubble (weight"), std::string::npos) << zb_bubble.advice;
  EXPECT_EQ(zb_bubble.advice.find("interleaving"), std::string::npos) << zb_bubble.advice;
  EXPECT_NE(zb_bubble.advice.find("virtual_stages=2 (ZB-V"), std::string::npos) << zb_bubble.advice;
  const Bottleneck zbv_bubble = find_bottleneck(
      scenario({{"pp", 4},
                {"framework", "megatron"},
                {"pipeline_schedule", "zero-bubble"},
                {"virtual_stages", 2}},
               {{"stage", 1}}, {{"micro_batch_size", 4}}),
      report(10, 0.1, 0, 0.2, 1.5, 0));
  EXPECT_EQ(zbv_bubble.advice.find("zero-bubble"), std::string::npos) << zbv_bubble.advice;

  const Bottleneck pp = find_bottleneck(scenario({{"pp", 4}, {"tp", 2}, {"virtual_stages", 2}}),
                                        report(10, 0, 0, 0.9, 0.4, 0));
  EXPECT_EQ(pp.component, "pp_communication");
  EXPECT_NE(pp.advice.find("no interleaving"), std::string::npos) << pp.advice;
  EXPECT_NE(pp.advice.find("sequence_parallel"), std::string::npos) << pp.advice;

  const Bottleneck off = find_bottleneck(
      scenario({{"tp", 1}}, {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}}}}),
      report(10, 0.2, 0, 0, 0, 1.2));
  EXPECT_EQ(off.component, "offload");
  EXPECT_NE(off.advice.find("zero.offload_optimizer.device=none"), std::string::npos);

  // DeepSpeed's stage 3 slicing every gradient tensor once per rank on the host: fewer ranks
  // per collective; its 2021 stage 3's tensor list per parameter: the coalesced one.
  StepReport sliced = report(10, 0.2, 0, 0, 0, 0);
  sliced.breakdown.comm_overhead_s = 2.5;
  sliced.breakdown.forward_s -= 2.5 / 3;
  sliced.breakdown.backward_s -= 5.0 / 3;
  const Bottleneck host = find_bottleneck(scenario({{"tp", 1}}, {{"stage", 3}}), sliced);
  EXPECT_EQ(host.component, "comm_overhead");
  EXPECT_NE(host.advice.find("zero.mics_shard_size"), std::string::npos) << host.advice;
  EXPECT_EQ(host.advice.find("stage3_implementation"), std::string::npos) << host.advice;
  const Bottleneck lists = find_bottleneck(
      scenario({{"tp", 1}}, {{"stage", 3}, {"stage3_implementation", "per-parameter"}}), sliced);
  EXPECT_NE(lists.advice.find("zero.stage3_implementation"), std::string::npos) << lists.advice;
}

// An MoE model's exposed all-to-alls: with expert groups past an NVLink domain (EP 16 at TP 1 on
// 8-GPU H100 nodes) the remedy keeps them inside one, or sends each token once per node (the
// flex dispatcher), or overlaps them; inside a domain, a smaller EP.
TEST(Bottleneck, ExpertAllToAllsWithTheirRemedy) {
  auto moe = [](const json& parallel) {
    json doc = {{"model", "gpt-oss-120b"},
                {"cluster", {{"preset", "dgx-h100"}, {"nodes", 4}}},
                {"parallel", parallel},
                {"zero", {{"stage", 1}}},
                {"training", {{"global_batch_size", 256}, {"micro_batch_size", 1}}}};
    return resolve_scenario(doc);
  };
  StepReport r = report(10, 0.1, 0, 0, 0, 0);
  r.breakdown.exposed_by_group[3] = 2.0;
  const Bottleneck wide = find_bottleneck(moe({{"framework", "megatron"}, {"ep", 16}}), r);
  EXPECT_EQ(wide.component, "ep_communication");
  EXPECT_EQ(wide.text().rfind("expert all-to-alls 2.00 s exposed, 20 % of the step: try EP <= 8",
                              0),
            0u)
      << wide.text();
  EXPECT_NE(wide.advice.find("moe_token_dispatcher_type=flex"), std::string::npos) << wide.advice;
  EXPECT_NE(wide.advice.find("overlap_moe_expert_parallel_comm=true"), std::string::npos);
  // Experts split by TP (expert TP = tp 2, the default): the flex dispatcher cannot run them.
  const Bottleneck split = find_bottleneck(
      moe({{"framework", "megatron"}, {"tp", 2}, {"sequence_parallel", true}, {"ep", 16}}), r);
  EXPECT_EQ(split.component, "ep_communication");
  EXPECT_EQ(split.advice.find("flex"), std::string::npos) << split.advice;
  const Bottleneck narrow = find_bottleneck(moe({{"framework", "megatron"}, {"ep", 8}}), r);
  EXPECT_EQ(narrow.advice.find("flex"), std::string::npos) << narrow.advice;
  EXPECT_NE(narrow.advice.find("EP <= 4"), std::string::npos) << narrow.advice;
}

TEST(Bottleneck, ComputeBoundWhenEveryOverheadIsSmall) {
  const Bottleneck b = find_bottleneck(scenario({{"recompute", "full"}}),
                                       report(10, 0.4, 0.3, 0, 0.2, 0));
  EXPECT_EQ(b.component, "compute");
  EXPECT_NEAR(b.share, 0.91, 1e-12);
  EXPECT_NE(b.summary.find("compute-bound"), std::string::npos);
  EXPECT_NE(b.advice.find("selective"), std::string::npos) << b.advice;
  // Just at the threshold the overhead is named.
  EXPECT_EQ(find_bottleneck(scenario({{"tp", 1}}), report(10, 0.5, 0, 0, 0, 0)).component,
            "dp_communication");
}

}  // namespace
}  // namespace zerosim::explore
