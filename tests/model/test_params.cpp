// Parameter counts against published totals (papers, model cards, Hugging Face model pages).
#include <gtest/gtest.h>

#include "sim/model/model.h"

namespace zerosim {
namespace {

double total(const std::string& preset) {
  return static_cast<double>(count_params(model_preset(preset, "model")).total);
}

void expect_within(double got, double published, double rel, const std::string& what) {
  EXPECT_NEAR(got / published, 1.0, rel) << what << ": got " << got << ", published " << published;
}

TEST(modelParams, PublishedTotalsWithinHalfPercent) {
  // GPT-3 175B: 174.6e9 (Narayanan et al. SC21 and common re-derivations of Table 2.1's "175.0B").
  expect_within(total("gpt3-175b"), 174.6e9, 0.005, "gpt3-175b");
  // Hugging Face model pages / Llama papers.
  expect_within(total("llama2-7b"), 6.74e9, 0.005, "llama2-7b");
  expect_within(total("llama2-13b"), 13.0e9, 0.005, "llama2-13b");
  expect_within(total("llama2-70b"), 69.0e9, 0.005, "llama2-70b");
  expect_within(total("llama3-8b"), 8.03e9, 0.005, "llama3-8b");
  expect_within(total("llama3-70b"), 70.6e9, 0.005, "llama3-70b");
  expect_within(total("llama3-405b"), 405.9e9, 0.005, "llama3-405b");
  // BLOOM model card: 176,247,271,424 parameters.
  expect_within(total("bloom-176b"), 176.2e9, 0.005, "bloom-176b");
}

TEST(modelParams, ExactCountsKnownFromCheckpoints) {
  // safetensors / PyTorch parameter counts of the released checkpoints.
  EXPECT_EQ(count_params(model_preset("llama2-7b", "model")).total, 6738415616LL);
  EXPECT_EQ(count_params(model_preset("llama3-8b", "model")).total, 8030261248LL);
  EXPECT_EQ(count_params(model_preset("bloom-176b", "model")).total, 176247271424LL);
}

TEST(modelParams, Gpt3SmallerModelsMatchTable21Rounding) {
  // Table 2.1 gives totals rounded to two significant digits, so allow 3%.
  expect_within(total("gpt3-1.3b"), 1.3e9, 0.03, "gpt3-1.3b");
  expect_within(total("gpt3-2.7b"), 2.7e9, 0.03, "gpt3-2.7b");
  expect_within(total("gpt3-6.7b"), 6.7e9, 0.03, "gpt3-6.7b");
  expect_within(total("gpt3-13b"), 13.0e9, 0.03, "gpt3-13b");
}

TEST(modelParams, PartsAddUp) {
  for (const auto& name : model_preset_names()) {
    const ModelSpec m = model_preset(name, "model");
    const ParamCounts c = count_params(m);
    // Dense and MoE layers (an MoE layer: the attention block and the MoE block).
    const std::int64_t moe_layers = m.moe_layer_count();
    EXPECT_EQ(c.total, c.per_layer * (m.num_layers - moe_layers) + c.moe_layer * moe_layers +
                           c.embedding + c.output + c.final_norm)
        << name;
    EXPECT_EQ(c.moe_layer, m.is_moe() ? c.attention_block + c.moe_block : 0) << name;
    EXPECT_EQ(c.active == c.total, !m.is_moe()) << name;
    EXPECT_EQ(c.output, m.tied_embeddings ? 0 : m.vocab_size * m.hidden_size) << name;
    // The token embedding is the largest single matrix of every dense preset; of an MoE preset,
    // the larger of it and the routed experts' fused gate and up projection (all experts'
    // [h x 2f], every MoE preset being gated).
    const std::int64_t table = m.vocab_size * m.hidden_size;
    const std::int64_t f = m.moe.expert_ffn_hidden_size, e = m.moe.num_experts;
    const std::int64_t experts = e * 2 * f * m.hidden_size + (m.mlp_bias ? e * 2 * f : 0);
    EXPECT_EQ(c.largest_module, m.is_moe() ? std::max(table, experts) : table) << name;
  }
}

TEST(modelParams, GqaShrinksOnlyKeyValueProjections) {
  ModelSpec m = model_preset("llama3-8b", "model");
  const std::int64_t h = m.hidden_size, d = m.head_dim();
  const std::int64_t gqa = count_params(m).per_layer;
  m.num_kv_heads = m.num_attention_heads;
  const std::int64_t mha = count_params(m).per_layer;
  EXPECT_EQ(mha - gqa, 2 * h * (32 - 8) * d);
}

// The fields Hugging Face families need, written inline, against published counts: Gemma 7B's
// decoupled heads (16 of 256 on a hidden size of 3072) and GeGLU, non-embedding parameters
// 7,751,248,896 (Gemma report, arXiv:2403.08295, Table 2); Qwen2-7B's q/k/v-only biases,
// 7,615,616,512 (Qwen/Qwen2-7B safetensors metadata); Phi-2's lm_head bias and one LayerNorm per
// parallel block, 2,779,683,840 (microsoft/phi-2 safetensors metadata).
TEST(modelParams, InlineFieldsCountGemmaQwen2AndPhi2) {
  const ModelSpec gemma = model_from_json(
      nlohmann::json{{"num_layers", 28}, {"hidden_size", 3072}, {"num_attention_heads", 16},
                     {"head_dim", 256}, {"ffn_hidden_size", 24576}, {"mlp", "geglu"},
                     {"vocab_size", 256000}, {"seq_length", 8192}, {"tied_embeddings", true}},
      "model");
  const ParamCounts g = count_params(gemma);
  EXPECT_EQ(g.total - g.embedding - g.output, 7'751'248'896);
  EXPECT_EQ(gemma.q_width(), 4096);

  const ModelSpec qwen2 = model_from_json(
      nlohmann::json{{"num_layers", 28}, {"hidden_size", 3584}, {"num_attention_heads", 28},
                     {"num_kv_heads", 4}, {"ffn_hidden_size", 18944}, {"mlp", "swiglu"},
                     {"vocab_size", 152064}, {"seq_length", 4096}, {"qkv_bias", true}},
      "model");
  EXPECT_EQ(count_params(qwen2).total, 7'615'616'512);

  const ModelSpec phi2 = model_from_json(
      nlohmann::json{{"num_layers", 32}, {"hidden_size", 2560}, {"num_attention_heads", 32},
                     {"ffn_hidden_size", 10240}, {"mlp", "gelu"}, {"vocab_size", 51200},
                     {"seq_length", 2048}, {"position", "rotary"}, {"tied_embeddings", false},
                     {"output_bias", true}, {"layer_norms", 1}},
      "model");
  const ParamCounts p = count_params(phi2);
  EXPECT_EQ(p.total, 2'779'683'840);
  EXPECT_EQ(p.mlp_norm, 0);  // the one norm rides with the attention block
  EXPECT_EQ(p.attention_block + p.mlp_block, p.per_layer);

  // Each reads back from its echo, which names the new fields only where they are set.
  for (const ModelSpec* m : {&gemma, &qwen2, &phi2}) {
    EXPECT_EQ(model_from_json(model_to_json(*m), "model"), *m) << model_to_json(*m).dump();
  }
  EXPECT_FALSE(model_to_json(model_preset("llama2-7b", "model")).contains("head_dim"));
}

}  // namespace
}  // namespace zerosim
