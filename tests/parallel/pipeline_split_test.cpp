// Megatron-core's pipeline split (uneven first / last stages, the embedding and loss counted as
// layers, explicit layouts) against a reference written here from Megatron-core's arithmetic
// (transformer_block.py get_num_layers_to_build, transformer_layer.py
// get_transformer_layer_offset), and what the split does to the plan: each stage holds and runs
// the layers it was given, parameters are conserved, and Megatron's refusals are refused.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/training_plan.h"
#include "sim/scenario/pipeline_split.h"
#include "sim/scenario/scenario.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

struct Split {
  int layers, pp, vp;
  std::optional<int> first{}, last{};
  bool embedding = false, loss = false;
};

// Megatron-core's layer count and first layer of (pipeline rank, virtual stage), as its two
// functions compute them.
int reference_count(const Split& c, int rank, int chunk) {
  int per_rank;
  if (c.first || c.last) {
    const int middle_stages = c.pp - (c.first ? 1 : 0) - (c.last ? 1 : 0);
    const int middle = c.layers - c.first.value_or(0) - c.last.value_or(0);
    per_rank = middle_stages > 0 ? middle / middle_stages : 0;
    if (rank == 0 && c.first) per_rank = *c.first;
    if (rank == c.pp - 1 && c.last) per_rank = *c.last;
  } else {
    per_rank = (c.layers + c.embedding + c.loss) / c.pp;
  }
  int n = per_rank / c.vp;
  if (c.embedding && rank == 0 && chunk == 0) --n;
  if (c.loss && rank == c.pp - 1 && chunk == c.vp - 1) --n;
  return n;
}

int reference_offset(const Split& c, int rank, int chunk) {
  if (c.first || c.last) {
    const int middle_stages = c.pp - (c.first ? 1 : 0) - (c.last ? 1 : 0);
    const int middle = c.layers - c.first.value_or(0) - c.last.value_or(0);
    const int first_chunk = c.first.value_or(0) / c.vp, last_chunk = c.last.value_or(0) / c.vp;
    const int middle_chunk = middle / c.vp;  // all middle stages' layers per virtual stage
    const int middle_rank = c.first ? rank - 1 : rank;
    const int per_chunk = first_chunk + middle_chunk + last_chunk;
    if (rank == 0) return chunk * per_chunk;
    // (Megatron-core divides by middle_stages unguarded here; with none there is no middle rank.)
    return chunk * per_chunk + first_chunk +
           (middle_stages > 0 ? middle_rank * (middle_chunk / middle_stages) : 0);
  }
  const int counted = c.layers + c.embedding + c.loss;
  const int per_virtual_rank = counted / c.pp / c.vp;
  int offset = chunk * (counted / c.vp) + rank * per_virtual_rank;
  if (c.embedding && !(rank == 0 && chunk == 0)) --offset;
  return offset;
}

json split_doc(const Split& c) {
  json parallel = {{"pp", c.pp}, {"virtual_stages", c.vp}, {"framework", "megatron"}};
  if (c.first) parallel["num_layers_in_first_pipeline_stage"] = *c.first;
  if (c.last) parallel["num_layers_in_last_pipeline_stage"] = *c.last;
  if (c.embedding) parallel["account_for_embedding_in_pipeline_split"] = true;
  if (c.loss) parallel["account_for_loss_in_pipeline_split"] = true;
  // common.h's tiny model with the split's layers, untied (a tied embedding is held twice
  // under PP, which the parameter conservation below would have to subtract).
  json doc = testing_plan::tiny_doc(c.pp, {{"stage", 1}}, 2 * c.pp);
  doc["model"]["num_layers"] = c.layers;
  doc["model"]["tied_embeddings"] = false;
  doc["parallel"] = parallel;
  return doc;
}

const std::vector<Split>& splits() {
  static const std::vector<Split> all = {
      // Megatron-Bridge's Llama 3.1 405B on H100: 126 layers, PP 8 x VP 8, embedding and loss
      // counted: 2 layers per virtual stage, 1 beside the embedding and 1 beside the loss.
      {126, 8, 8, {}, {}, true, true},
      {126, 8, 1, {}, {}, true, true},
      {31, 4, 1, {}, {}, true, false},
      {23, 4, 2, {}, {}, false, true},
      // DeepSeek-V3's 61 layers over 8 stages: 5 first, 8 last, 8 on each of the 6 middle ones.
      {61, 8, 1, 5, 8},
      {30, 4, 2, 4, 6},
      {62, 4, 1, 14, {}},
      {20, 2, 1, {}, 8},
      {24, 2, 2, 10, 14},
  };
  return all;
}

TEST(parallelPipelineSplit, LayersAndOffsetsAreMegatronCores) {
  for (const Split& c : splits()) {
    SCOPED_TRACE(split_doc(c)["parallel"].dump());
    const Scenario s = resolve_scenario(split_doc(c));
    const std::vector<std::int64_t> layers = virtual_stage_layers(s);
    const auto units = plan_detail::virtual_stage_units(s);
    ASSERT_EQ(layers.size(), static_cast<std::size_t>(c.pp * c.vp));
    std::int64_t total = 0;
    for (int chunk = 0; chunk < c.vp; ++chunk) {
      for (int rank = 0; rank < c.pp; ++rank) {
        const std::size_t g = static_cast<std::size_t>(chunk * c.pp + rank);
        EXPECT_EQ(layers[g], reference_count(c, rank, chunk)) << "rank " << rank << " chunk " << chunk;
        total += layers[g];
        // The layer numbers the plan gives this virtual stage: Megatron's offset onwards.
        std::vector<int> got;
        for (const plan_detail::Unit& u : units[g])
          if (u.layer >= 0 && (got.empty() || got.back() != u.layer)) got.push_back(u.layer);
        ASSERT_EQ(got.size(), static_cast<std::size_t>(reference_count(c, rank, chunk)));
        for (std::size_t i = 0; i < got.size(); ++i)
          EXPECT_EQ(got[i], reference_offset(c, rank, chunk) + static_cast<int>(i))
              << "rank " << rank << " chunk " << chunk;
      }
    }
    EXPECT_EQ(total, c.layers);
  }
}

// Each pipeline stage holds the layers the split gives it, and the stages' parameters add up to
// the model's (untied embeddings, TP 1: nothing is held twice).
TEST(parallelPipelineSplit, StagesHoldTheirLayersAndConserveParameters) {
  for (const Split& c : splits()) {
    SCOPED_TRACE(split_doc(c)["parallel"].dump());
    const Scenario s = resolve_scenario(split_doc(c));
    const TrainingPlan tp = build_training_plan(s, true);
    ASSERT_EQ(tp.stages.size(), static_cast<std::size_t>(c.pp));
    std::int64_t params = 0;
    for (int rank = 0; rank < c.pp; ++rank) {
      int expected = 0;
      for (int chunk = 0; chunk < c.vp; ++chunk) expected += reference_count(c, rank, chunk);
      EXPECT_EQ(tp.stages[static_cast<std::size_t>(rank)].layers, expected) << "rank " << rank;
      params += tp.stages[static_cast<std::size_t>(rank)].local_params;
    }
    EXPECT_EQ(params, count_params(s.model).total);
  }
}

TEST(parallelPipelineSplit, RefusesWhatMegatronRefuses) {
  auto key = [](const Split& c, const std::function<void(json&)>& edit = {}) {
    return testing_plan::input_error_key(split_doc(c), edit);
  };
  const std::string first = "parallel.num_layers_in_first_pipeline_stage";
  const std::string last = "parallel.num_layers_in_last_pipeline_stage";
  EXPECT_EQ(key({61, 8, 1, 5, 8}), "(accepted)");
  // The middle stages must share the rest evenly, and each stage's layers split over its
  // virtual stages.
  EXPECT_EQ(key({61, 8, 1, 6, 8}), first);
  EXPECT_EQ(key({30, 4, 2, 3, 7}), first);
  EXPECT_EQ(key({30, 4, 2, 4, 5}), last);
  EXPECT_EQ(key({30, 4, 2, 4, 4}), first);  // 11 layers on each middle stage, VP 2
  // Both stages given and layers left for no middle stage (PP 2), or more than the model has.
  EXPECT_EQ(key({20, 2, 1, 8, 8}), first);
  EXPECT_EQ(key({20, 4, 1, 12, 12}), first);
  EXPECT_EQ(key({20, 1, 1, 8, {}}, [](json& d) { d["cluster"]["num_gpus"] = 1; }), first);
  // 0 is not a layer count Megatron-core accepts for a stage.
  EXPECT_EQ(key({20, 2, 1, 0, {}}), first);
  // Megatron-core refuses uneven stages together with the embedding or loss counted as layers.
  EXPECT_EQ(key({61, 8, 1, 5, 8, true}), first);
  // The embedding and loss counted: pp must divide the count, and vp each stage's share.
  EXPECT_EQ(key({125, 8, 1, {}, {}, true, true}), "parallel.pp");
  EXPECT_EQ(key({126, 8, 4, {}, {}, true, false}), "parallel.pp");
  EXPECT_EQ(key({118, 8, 2, {}, {}, true, true}), "parallel.virtual_stages");
  // Interleaving without the keys keeps Megatron's even rule.
  EXPECT_EQ(key({61, 8, 2}), "parallel.virtual_stages");
  // The keys are Megatron-core's: other frameworks split their own way.
  EXPECT_EQ(key({61, 8, 1, 5, 8}, [](json& d) { d["parallel"]["framework"] = "deepspeed"; }),
            first);
}

json layout_doc(int layers, int pp, const json& layout) {
  json doc = split_doc({layers, pp, 1});
  doc["parallel"].erase("virtual_stages");
  doc["parallel"]["pipeline_model_parallel_layout"] = layout;
  return doc;
}

// Megatron-core's pipeline_model_parallel_layout, unrolled by hand: the decoder layers of each
// virtual stage in list order (virtual stage g = chunk x pp + stage), numbered in that order.
TEST(parallelPipelineSplit, ExplicitLayoutsPlaceLayersWhereTheySay) {
  struct Layout {
    int layers, pp;
    json layout;
    std::vector<std::int64_t> counts;
  };
  std::vector<std::int64_t> dsv3_pp4_vp8 = {1}, dsv3_pp4_vp4 = {4};
  for (int i = 0; i < 30; ++i) dsv3_pp4_vp8.push_back(2);
  dsv3_pp4_vp8.push_back(0);
  for (int i = 0; i < 14; ++i) dsv3_pp4_vp4.push_back(4);
  dsv3_pp4_vp4.push_back(1);
  const std::vector<Layout> layouts = {
      // Megatron-Bridge's DeepSeek-V3 layouts (performance configs) without their MTP layer.
      {61, 4, "Et|(tt|)*30,L", dsv3_pp4_vp8},
      {61, 4, "Et*4|(t*4|)*14tL", dsv3_pp4_vp4},
      {4, 2, "Ett|t|t|L", {2, 1, 1, 0}},
      {3, 2, "Et|t||tL", {1, 1, 0, 1}},
      {3, 2, json::array({json::array({"embedding", "decoder"}), json::array({"decoder"}), json::array(),
                          json::array({"decoder", "loss"})}), {1, 1, 0, 1}},
  };
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.layout.dump());
    const Scenario s = resolve_scenario(layout_doc(l.layers, l.pp, l.layout));
    EXPECT_EQ(s.parallel.virtual_stages, static_cast<int>(l.counts.size()) / l.pp);
    EXPECT_EQ(virtual_stage_layers(s), l.counts);
    const auto units = plan_detail::virtual_stage_units(s);
    int next = 0;
    for (std::size_t g = 0; g < units.size(); ++g) {
      std::vector<int> got;
      for (const plan_detail::Unit& u : units[g])
        if (u.layer >= 0 && (got.empty() || got.back() != u.layer)) got.push_back(u.layer);
      ASSERT_EQ(got.size(), static_cast<std::size_t>(l.counts[g])) << "virtual stage " << g;
      for (int layer : got) EXPECT_EQ(layer, next++);
    }
    // The plan runs it, every stage with its layers.
    const TrainingPlan tp = build_training_plan(s, true);
    for (int rank = 0; rank < l.pp; ++rank) {
      std::int64_t expected = 0;
      for (std::size_t g = static_cast<std::size_t>(rank); g < l.counts.size(); g += l.pp)
        expected += l.counts[g];
      EXPECT_EQ(tp.stages[static_cast<std::size_t>(rank)].layers, expected);
    }
  }
}

TEST(parallelPipelineSplit, LayoutsMegatronRefusesAreRefused) {
  const std::string key = "parallel.pipeline_model_parallel_layout";
  auto refused = [](int layers, int pp, const json& layout,
                    const std::function<void(json&)>& edit = {}) {
    return testing_plan::input_error_key(layout_doc(layers, pp, layout), edit);
  };
  EXPECT_EQ(refused(4, 2, "Ett|tL"), key);                   // 3 decoder layers for 4
  EXPECT_EQ(refused(3, 2, "tEt|tL"), key);                   // the embedding not first
  EXPECT_EQ(refused(3, 2, "Ett|tLL"), key);                  // two losses
  EXPECT_EQ(refused(3, 2, "Ett|Lt"), key);                   // the loss not last
  EXPECT_EQ(refused(3, 2, "Ett|t|tL"), key);                 // 3 virtual stages over pp 2
  EXPECT_EQ(refused(3, 2, "Ett|t|tL|"), key);                // the loss before an empty stage
  EXPECT_EQ(refused(3, 2, "|Ett|t|tL"), key);                // the embedding after one
  EXPECT_EQ(refused(3, 2, "Etx|ttL"), key);                  // no such layer
  EXPECT_EQ(refused(61, 4, "Ettt|(tt|)*29,m|L"), key);       // an MTP layer the model lacks
  EXPECT_EQ(refused(3, 2, json::array({json::array({"embedding", "encoder"}),
                                                      json::array({"loss"})})), key + "[0]");
  EXPECT_EQ(refused(3, 1, "EtttL"), key);                    // no pipeline to lay out
  EXPECT_EQ(refused(3, 2, "Et|t|t|L", [](json& d) { d["parallel"]["virtual_stages"] = 1; }),
            "parallel.virtual_stages");
  EXPECT_EQ(refused(3, 2, "Et|t|t|L", [](json& d) { d["parallel"]["virtual_stages"] = 2; }),
            "(accepted)");
  EXPECT_EQ(refused(3, 2, "Et|ttL",
                    [](json& d) { d["parallel"]["num_layers_in_first_pipeline_stage"] = 1; }),
            key);
  EXPECT_EQ(refused(3, 2, "Et|ttL", [](json& d) { d["parallel"]["framework"] = "deepspeed"; }),
            key);
}

// Multi-token prediction (model.mtp_num_layers): the MTP module goes with the loss on the last
// virtual stage, as its own unit (eh_proj [2h -> h], its three norms and, untied, a copy of the
// embedding table) and a transformer layer numbered after the decoder's, before the head; the
// stages' parameters add up to the model's with that copy once more. Megatron-core's layout
// rules for m are refused, and its standalone MTP stage is not simulated.
json mtp_doc(int layers, int pp, const json& layout) {
  json doc = layout_doc(layers, pp, layout);
  doc["model"]["mtp_num_layers"] = 1;
  doc["model"]["position"] = "rotary";  // Megatron-core's MTP refuses learned positions
  return doc;
}

TEST(parallelPipelineSplit, MtpRunsWithTheLossAndItsParametersAreCounted) {
  for (const json& layout : {json("Et|tt|t|mL"), json(nullptr)}) {
    SCOPED_TRACE(layout.dump());
    json doc = mtp_doc(4, 2, layout.is_null() ? json("Et|tt|t|mL") : layout);
    if (layout.is_null()) {  // no layout: the even split, MTP on the last stage
      doc["parallel"].erase("pipeline_model_parallel_layout");
      doc["parallel"]["virtual_stages"] = 1;
    }
    const Scenario s = resolve_scenario(doc);
    const auto units = plan_detail::virtual_stage_units(s);
    const std::vector<plan_detail::Unit>& last = units.back();
    ASSERT_GE(last.size(), 4u);
    const std::size_t n = last.size();
    EXPECT_EQ(last[n - 4].forward, WorkKind::MtpForward);
    EXPECT_EQ(last[n - 3].forward, WorkKind::AttentionForward);
    EXPECT_EQ(last[n - 2].forward, WorkKind::MlpForward);
    EXPECT_EQ(last[n - 1].forward, WorkKind::HeadForward);
    for (std::size_t i = n - 4; i < n - 1; ++i) EXPECT_EQ(last[i].layer, 4);
    const std::int64_t h = 64, v = 1000;
    EXPECT_EQ(last[n - 4].params, 2 * h * h + 3 * 2 * h + v * h);  // LayerNorm: 2h each
    std::int64_t params = 0;
    for (const auto& g : units)
      for (const plan_detail::Unit& u : g) params += u.params;
    EXPECT_EQ(params, count_params(s.model).total + v * h);
    const TrainingPlan tp = build_training_plan(s, true);
    EXPECT_EQ(tp.stages.back().layers, 2 + 1);  // two decoder layers either way, and the MTP's
  }
}

// Two MTP modules share the last stage's one copy of the embedding.
TEST(parallelPipelineSplit, TwoMtpModulesShareOneEmbeddingCopy) {
  json doc = mtp_doc(4, 2, "Et|tt|t|mmL");
  doc["model"]["mtp_num_layers"] = 2;
  const Scenario s = resolve_scenario(doc);
  std::int64_t params = 0;
  for (const auto& g : plan_detail::virtual_stage_units(s))
    for (const plan_detail::Unit& u : g) params += u.params;
  EXPECT_EQ(params, count_params(s.model).total + 1000 * 64);
}

TEST(parallelPipelineSplit, MtpPlacementsMegatronRefusesAreRefused) {
  const std::string key = "parallel.pipeline_model_parallel_layout";
  EXPECT_EQ(testing_plan::input_error_key(mtp_doc(4, 2, "Et|tt|t|mL")), "(accepted)");
  EXPECT_EQ(testing_plan::input_error_key(mtp_doc(4, 2, "Et|tt|t|L")), key);     // m missing
  EXPECT_EQ(testing_plan::input_error_key(mtp_doc(4, 2, "Et|tt|t|mmL")), key);   // two for one
  EXPECT_EQ(testing_plan::input_error_key(mtp_doc(4, 2, "Et|tt|mt|L")), key);    // t after m
  EXPECT_EQ(testing_plan::input_error_key(mtp_doc(4, 2, "Et|ttm|t|L")), key);    // not last chunk
  EXPECT_EQ(testing_plan::input_error_key(mtp_doc(4, 2, "Et|tt|tm|L")), key);    // standalone
  json learned = mtp_doc(4, 2, "Et|tt|t|mL");
  learned["model"]["position"] = "learned";
  EXPECT_EQ(testing_plan::input_error_key(learned), "model.mtp_num_layers");
  json deepspeed = testing_plan::tiny_doc(1, {{"stage", 1}});
  deepspeed["model"]["mtp_num_layers"] = 1;
  deepspeed["model"]["position"] = "rotary";
  EXPECT_EQ(testing_plan::input_error_key(deepspeed), "model.mtp_num_layers");
}

TEST(parallelPipelineSplit, AnUnevenSplitMegatronWouldRefuseIsWarnedAbout) {
  const Scenario uneven = resolve_scenario(split_doc({61, 8, 1}));
  bool warned = false;
  for (const InputWarning& w : uneven.warnings) warned |= w.key_path == "parallel.pp";
  EXPECT_TRUE(warned);
  const Scenario even = resolve_scenario(split_doc({64, 8, 1}));
  for (const InputWarning& w : even.warnings) EXPECT_NE(w.key_path, "parallel.pp");
}

}  // namespace
}  // namespace zerosim
