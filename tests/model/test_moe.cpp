// Mixture-of-Experts and latent-attention models: transcribed Hugging Face configs
// (tests/model/hf_configs/, with their provenance in its README.md) must give the total and the
// active parameter counts their publishers state, and the per-token FLOPs and the per-layer work
// of an MoE layer must follow from closed forms written out here.
//
// Tolerances: totals within half a unit of the last digit the source gives ("46.7B": +-0.05B;
// "141B": +-0.5B). Active counts within one unit: their publishers do not say how they round
// (Qwen3-30B-A3B's 3.35B is written "3.3B").
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim {
namespace {

struct Read {
  ModelSpec m;
  std::vector<InputWarning> warnings;
};

Read read_config(const std::string& file) {
  Read r;
  r.m = model_from_json(std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/" + file,
                        "model", &r.warnings);
  return r;
}

std::string all_warnings(const Read& r) {
  std::string out;
  for (const InputWarning& w : r.warnings) out += w.key_path + ": " + w.message + "\n";
  return out;
}

bool warned_on(const Read& r, const std::string& key) {
  for (const InputWarning& w : r.warnings)
    if (w.key_path.size() > key.size() &&
        w.key_path.compare(w.key_path.size() - key.size() - 1, key.size() + 1, "." + key) == 0)
      return true;
  return false;
}

struct Published {
  const char* file;
  double total, active, unit;  // billions; unit: of the last digit given
  bool active_counts_input_embedding;
  const char* source;
};

// Total and active parameters as their publishers state them. "Active": the parameters a token
// passes through; Mistral and Qwen count the input embedding among them (Mixtral 8x7B's 12.9B
// holds both of its 131M tables; without the input one it would be 12.75B), DeepSeek's figures
// match the count without it, as OpenAI's gpt-oss table states outright (below): a lookup
// multiplies no weight.
const Published kPublished[] = {
    {"mixtral-8x7b-v0.1.json", 46.7, 12.9, 0.1, true,
     "Mistral AI, 'Mixtral of experts' (2023-12-11): 46.7B total, 12.9B per token"},
    {"mixtral-8x22b-v0.1.json", 141, 39, 1, true,
     "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024-04-17): 141B, 39B active"},
    {"qwen1.5-moe-a2.7b.json", 14.3, 2.7, 0.1, true,
     "Qwen team, 'Qwen1.5-MoE: Matching 7B Model Performance with 1/3 Activated Parameters' "
     "(2024-03-28): 14.3B total, 2.7B activated"},
    {"qwen2-57b-a14b.json", 57, 14, 1, true,
     "Yang et al. 2024, Qwen2 technical report (arXiv:2407.10671), Table 1: 57B, 14B activated"},
    {"qwen3-30b-a3b.json", 30.5, 3.3, 0.1, true,
     "Qwen/Qwen3-30B-A3B model card: 30.5B parameters, 3.3B activated"},
    {"qwen3-235b-a22b.json", 235, 22, 1, true,
     "Qwen/Qwen3-235B-A22B model card: 235B parameters, 22B activated"},
    {"deepseek-v2.json", 236, 21, 1, false,
     "DeepSeek-AI 2024, DeepSeek-V2 (arXiv:2405.04434), abstract: 236B total, 21B activated"},
    {"deepseek-v2-lite.json", 15.7, 2.4, 0.1, false,
     "DeepSeek-V2 paper, Appendix B (DeepSeek-V2-Lite): 15.7B total, 2.4B activated"},
    {"deepseek-v3.json", 671, 37, 1, false,
     "DeepSeek-AI 2024, DeepSeek-V3 technical report (arXiv:2412.19437), abstract: 671B total, "
     "37B activated (the 14B multi-token-prediction module apart)"},
    {"phi-3.5-moe.json", 41.9, 6.6, 0.1, true,
     "microsoft/Phi-3.5-MoE-instruct model card: 16 experts, 6.6B active parameters with 2 of "
     "them; 41.9B parameters (the Hub's count of the checkpoint)"},
    {"dbrx-base.json", 132, 36, 1, true,
     "Databricks, 'Introducing DBRX: A New State-of-the-Art Open LLM' (2024-03-27): 132B total, "
     "36B active on any input (whether the input embedding is among them is not said: 36.47B "
     "with it, 35.85B without, both within the unit)"},
};

TEST(moeModels, TotalAndActiveParametersMatchThePublishedCounts) {
  for (const Published& p : kPublished) {
    const Read r = read_config(p.file);
    const ParamCounts c = count_params(r.m);
    const std::int64_t active = c.active - (p.active_counts_input_embedding ? 0 : c.embedding);
    EXPECT_NEAR(static_cast<double>(c.total) / 1e9, p.total, p.unit / 2) << p.file << ": " << p.source;
    EXPECT_NEAR(static_cast<double>(active) / 1e9, p.active, p.unit) << p.file << ": " << p.source;
    EXPECT_TRUE(r.m.is_moe()) << p.file;
  }
}

// mistralai/Mixtral-8x7B-v0.1: 46,702,792,704 parameters (the checkpoint's safetensors metadata on
// the Hub), every layer MoE with 8 experts of 14336, top 2.
TEST(moeModels, Mixtral8x7bExactly) {
  const Read r = read_config("mixtral-8x7b-v0.1.json");
  EXPECT_EQ(count_params(r.m).total, 46'702'792'704);
  EXPECT_EQ(r.m.moe_layer_count(), 32);
  ASSERT_EQ(r.warnings.size(), 1u) << all_warnings(r);  // only the training length
  EXPECT_TRUE(warned_on(r, "seq_length")) << all_warnings(r);
}

// OpenAI 2025, gpt-oss-120b & gpt-oss-20b model card (arXiv:2508.10925), Table 1: total
// 116.83B / 20.91B; active 5.13B / 3.61B, counted without the input embedding (201088 x 2880).
// Router and experts have biases, each attention layer a sink logit per head; the 128-token
// window is in every other layer.
TEST(moeModels, GptOssMatchesItsModelCardTable) {
  struct Case {
    const char* file;
    double total, active;
  };
  // The card's banded attention of 128 tokens alternates with dense attention, layer by layer.
  for (const Case& g : {Case{"gpt-oss-120b.json", 116.83, 5.13}, Case{"gpt-oss-20b.json", 20.91, 3.61}}) {
    const Read r = read_config(g.file);
    const ParamCounts c = count_params(r.m);
    EXPECT_NEAR(static_cast<double>(c.total) / 1e9, g.total, 0.005) << g.file;
    EXPECT_NEAR(static_cast<double>(c.active - c.embedding) / 1e9, g.active, 0.005) << g.file;
    EXPECT_TRUE(r.m.moe.router_bias && r.m.mlp_bias && r.m.attention_sinks) << g.file;
    EXPECT_EQ(r.m.sliding_window, 128) << g.file;
    EXPECT_EQ(r.m.sliding_window_layers * 2, r.m.num_layers) << g.file;
    EXPECT_FALSE(warned_on(r, "layer_types")) << all_warnings(r);
  }
}

// DBRX (transformers' configuration_dbrx.py / modeling_dbrx.py): its own size names and the
// nested attn_config and ffn_config; 16 gated experts of 10752, top 4, in every layer; LayerNorms
// with a gain only; no biases; untied head. Per layer from the config: Wqkv 6144 x (6144 + 2 x 8
// x 128), out_proj 6144^2, router 6144 x 16, 16 x 3 x 6144 x 10752 experts, two norms of 6144.
TEST(moeModels, DbrxReadsItsNestedConfigs) {
  Read r = read_config("dbrx-base.json");
  const std::int64_t h = 6144;
  const std::int64_t layer = h * (h + 2 * 8 * 128) + h * h + h * 16 + 16 * 3 * h * 10752 + 2 * h;
  EXPECT_EQ(count_params(r.m).total, 40 * layer + 2 * 100352 * h + h);
  EXPECT_EQ(r.m.moe_layer_count(), 40);
  EXPECT_EQ(r.m.mlp, MlpKind::Swiglu);
  ASSERT_EQ(r.warnings.size(), 1u) << all_warnings(r);  // only the training length
  EXPECT_TRUE(warned_on(r, "seq_length")) << all_warnings(r);

  // The sub-configs as transformers before 4.40 wrote them (PretrainedConfigs, every generic
  // attribute spelled out) read the same, silently; a field DBRX does not have is said.
  nlohmann::json cfg = nlohmann::json::parse(
      std::ifstream(std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/dbrx-base.json"));
  cfg["attn_config"]["return_dict"] = true;
  cfg["attn_config"]["id2label"] = {{"0", "LABEL_0"}};
  cfg["ffn_config"]["temperature"] = 1.0;
  cfg["ffn_config"]["moe_capacity"] = 2;
  std::vector<InputWarning> w;
  const ModelSpec m = model_from_hf_config(cfg, "model", &w);
  EXPECT_EQ(count_params(m).total, 40 * layer + 2 * 100352 * h + h);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].key_path, "model.ffn_config.moe_capacity");

  // Class defaults where a nested config is absent: one key/value head, 4 experts of 3584, top 1.
  cfg.erase("attn_config");
  cfg.erase("ffn_config");
  const ModelSpec bare = model_from_hf_config(cfg, "model");
  EXPECT_EQ(bare.num_kv_heads, 1);
  EXPECT_EQ(bare.moe.num_experts, 4);
  EXPECT_EQ(bare.moe.top_k, 1);
  EXPECT_EQ(bare.moe.expert_ffn_hidden_size, 3584);
  cfg["ffn_config"] = {{"ffn_act_fn", {{"name", "gelu"}}}};
  EXPECT_EQ(model_from_hf_config(cfg, "model").mlp, MlpKind::Geglu);
  auto error_key = [&](const nlohmann::json& c) {
    try {
      model_from_hf_config(c, "model");
    } catch (const InputError& e) {
      return e.key_path();
    }
    return std::string("(accepted)");
  };
  cfg["ffn_config"] = {{"ffn_act_fn", {{"name", "tanh"}}}};
  EXPECT_EQ(error_key(cfg), "model.ffn_config.ffn_act_fn.name");
  cfg["ffn_config"] = {{"moe_num_experts", 4}, {"moe_top_k", 5}};
  EXPECT_EQ(error_key(cfg), "model.ffn_config.moe_top_k");
  cfg["ffn_config"] = 3;
  EXPECT_EQ(error_key(cfg), "model.ffn_config");
  cfg.erase("ffn_config");
  cfg.erase("d_model");
  EXPECT_EQ(error_key(cfg), "model.d_model");
}

// Llama 4 (transformers' configuration_llama4.py / modeling_llama4.py): the checkpoints' config
// (model_type llama4) holds the text model in text_config. Per layer from the configs: q and o
// 5120 x 40 x 128 each, k and v 5120 x 8 x 128 each, two RMSNorms; a MoE layer has its routed
// experts (gate, up, down: 3 x 5120 x 8192 each), one shared expert of the same shape and a
// router 5120 x E without bias; a dense layer an MLP of 3 x 5120 x 16384. Scout: 16 experts in
// every layer; Maverick: 128 experts in the odd layers (interleave_moe_layer_step 2). Untied
// embedding and head of 202048 x 5120, one final norm. The first and the last three of every
// four layers attend within chunks of 8192 (the layers with rotary).
TEST(moeModels, Llama4ReadsItsTextConfig) {
  const std::int64_t h = 5120, attention = 2 * h * 40 * 128 + 2 * h * 8 * 128 + 2 * h;
  const std::int64_t expert = 3 * h * 8192, dense = attention + 3 * h * 16384;
  const std::int64_t ends = 2 * 202048 * h + h;
  auto moe_layer = [&](std::int64_t experts) { return attention + (experts + 1) * expert + h * experts; };
  struct Case {
    const char* file;
    std::int64_t experts, moe_layers, total, active;
    double published_total;
  };
  for (const Case& l4 :
       {Case{"llama-4-scout-17b-16e.json", 16, 48, 48 * moe_layer(16) + ends,
             48 * (moe_layer(16) - 15 * expert) + ends, 109},
        Case{"llama-4-maverick-17b-128e.json", 128, 24, 24 * moe_layer(128) + 24 * dense + ends,
             24 * (moe_layer(128) - 127 * expert) + 24 * dense + ends, 400}}) {
    const Read r = read_config(l4.file);
    const ParamCounts c = count_params(r.m);
    EXPECT_EQ(c.total, l4.total) << l4.file;
    EXPECT_EQ(c.active, l4.active) << l4.file;
    EXPECT_EQ(r.m.moe.num_experts, l4.experts) << l4.file;
    EXPECT_EQ(r.m.moe_layer_count(), l4.moe_layers) << l4.file;
    EXPECT_EQ(r.m.attention_chunk_size, 8192) << l4.file;
    EXPECT_EQ(r.m.chunked_attention_layers, 36) << l4.file;
    EXPECT_FALSE(r.m.qk_norm) << l4.file;  // the L2 norm has no weights
    // Meta's model cards (meta-llama/Llama-4-Scout-17B-16E, -Maverick-17B-128E-Instruct): 17B
    // active; 109B and 400B total, which also count the vision encoder zerosim leaves out
    // (Llama4VisionConfig's 34 layers of 1408, under 1B): within 2 % of the text model's.
    EXPECT_NEAR(static_cast<double>(c.active) / 1e9, 17, 1) << l4.file;
    EXPECT_NEAR(static_cast<double>(c.total) / 1e9 / l4.published_total, 1.0, 0.02) << l4.file;
    // Said: the training length, and the vision encoder left out.
    ASSERT_EQ(r.warnings.size(), 2u) << all_warnings(r);
    EXPECT_TRUE(warned_on(r, "seq_length")) << all_warnings(r);
    EXPECT_TRUE(warned_on(r, "vision_config")) << all_warnings(r);
  }
  const Read maverick = read_config("llama-4-maverick-17b-128e.json");
  EXPECT_FALSE(maverick.m.is_moe_layer(0));
  EXPECT_TRUE(maverick.m.is_moe_layer(1));
  EXPECT_FALSE(maverick.m.is_moe_layer(46));
  EXPECT_TRUE(maverick.m.is_moe_layer(47));
}

// The other ways a Llama 4 config says the same things, and what it may not say.
TEST(moeModels, Llama4LayerListsAndErrors) {
  const nlohmann::json scout = nlohmann::json::parse(std::ifstream(
      std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/llama-4-scout-17b-16e.json"));
  auto read = [](const nlohmann::json& cfg, std::vector<InputWarning>* w = nullptr) {
    return model_from_hf_config(cfg, "model", w);
  };
  auto error_key = [&](const nlohmann::json& c) {
    try {
      read(c);
    } catch (const InputError& e) {
      return e.key_path();
    }
    return std::string("(accepted)");
  };
  // The text model's config on its own (Llama4ForCausalLM checkpoints): the same model.
  nlohmann::json text = scout["text_config"];
  EXPECT_EQ(count_params(read(text)).total, count_params(read(scout)).total);
  // layer_types decides over no_rope_layers; a null chunk size is full attention everywhere.
  nlohmann::json cfg = scout;
  cfg["text_config"]["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 48; ++i) cfg["text_config"]["layer_types"].push_back(i < 8 ? "chunked_attention" : "full_attention");
  EXPECT_EQ(read(cfg).chunked_attention_layers, 8);
  cfg = scout;
  cfg["text_config"]["attention_chunk_size"] = nullptr;
  EXPECT_EQ(read(cfg).attention_chunk_size, 0);
  // Without the lists: every layer MoE (interleave_moe_layer_step 1), 36 chunked layers
  // (no_rope_layer_interval 4), as with them.
  cfg = scout;
  cfg["text_config"].erase("moe_layers");
  cfg["text_config"].erase("no_rope_layers");
  EXPECT_EQ(read(cfg).moe_layer_count(), 48);
  EXPECT_EQ(read(cfg).chunked_attention_layers, 36);
  // A moe_layers list that is not every k-th layer to the last: the count kept, said.
  cfg["text_config"]["moe_layers"] = {0, 1, 5};
  std::vector<InputWarning> w;
  EXPECT_EQ(read(cfg, &w).moe_layer_count(), 3);
  ASSERT_FALSE(w.empty());
  bool said = false;
  for (const InputWarning& x : w) said = said || x.key_path == "model.text_config.moe_layers";
  EXPECT_TRUE(said);
  cfg["text_config"]["moe_layers"] = {1, 3, 5};  // every other layer, but not to the last
  EXPECT_EQ(read(cfg).moe_layer_count(), 3);
  cfg["text_config"]["moe_layers"] = {48};
  EXPECT_EQ(error_key(cfg), "model.text_config.moe_layers.0");
  cfg["text_config"]["moe_layers"] = nlohmann::json::array();
  EXPECT_FALSE(read(cfg).is_moe());
  cfg["text_config"].erase("moe_layers");
  cfg["text_config"]["interleave_moe_layer_step"] = 0;
  EXPECT_EQ(error_key(cfg), "model.text_config.interleave_moe_layer_step");
  cfg["text_config"]["interleave_moe_layer_step"] = 49;
  EXPECT_EQ(error_key(cfg), "model.text_config.interleave_moe_layer_step");
  cfg = scout;
  cfg["text_config"]["no_rope_layers"] = {1, 0};
  EXPECT_EQ(error_key(cfg), "model.text_config.no_rope_layers");
  cfg = scout;
  cfg["text_config"]["hidden_size"] = 0;
  EXPECT_EQ(error_key(cfg), "model.text_config.hidden_size");
  cfg = scout;
  cfg.erase("text_config");
  EXPECT_EQ(error_key(cfg), "model.text_config");
  cfg["text_config"] = 3;
  EXPECT_EQ(error_key(cfg), "model.text_config");
  // Llama 4's layer pattern in a dense model_type would lose the experts: refused.
  const nlohmann::json llama = nlohmann::json::parse(
      std::ifstream(std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/llama-3-8b.json"));
  cfg = llama;
  cfg["interleave_moe_layer_step"] = 2;
  EXPECT_EQ(error_key(cfg), "model.interleave_moe_layer_step");
}

// DeepSeek-V3: 3 dense layers then 58 MoE layers; MLA; the multi-token-prediction module is not
// read from the config (transformers does not train it) and the reader says so.
TEST(moeModels, DeepSeekV3LayersAndMla) {
  const Read r = read_config("deepseek-v3.json");
  EXPECT_EQ(r.m.moe_layer_count(), 58);
  EXPECT_FALSE(r.m.is_moe_layer(2));
  EXPECT_TRUE(r.m.is_moe_layer(3));
  EXPECT_TRUE(r.m.is_mla());
  EXPECT_EQ(r.m.num_kv_heads, r.m.num_attention_heads);
  EXPECT_TRUE(warned_on(r, "num_nextn_predict_layers")) << all_warnings(r);
  // MLA's attention per layer, from DeepSeek-V2 Sec. 2.1 with h = 7168, 128 heads,
  // d_c' = 1536, d_c = 512, d_h = 128 (no rotary), d_h^R = 64, values 128: W^DQ, its norm, W^UQ
  // (queries and their rotary part), W^DKV and W^KR together, its norm, W^UK and W^UV, W^O, and
  // the layer's two RMSNorms.
  const std::int64_t h = 7168, heads = 128;
  const std::int64_t mla = h * 1536 + 1536 + 1536 * heads * (128 + 64) + h * (512 + 64) + 512 +
                           512 * heads * (128 + 128) + heads * 128 * h;
  EXPECT_EQ(count_params(r.m).attention_block, mla + h);
}

// Qwen-MoE's mlp_only_layers keep the dense MLP in the listed layers (Qwen3MoeDecoderLayer):
// a prefix is zerosim's first_k_dense exactly; other lists keep their counts, said.
TEST(moeModels, QwenMlpOnlyLayers) {
  nlohmann::json cfg = nlohmann::json::parse(
      std::ifstream(std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/qwen3-30b-a3b.json"));
  ASSERT_EQ(cfg["num_hidden_layers"], 48);
  cfg["mlp_only_layers"] = {0, 1, 2};
  std::vector<InputWarning> w;
  ModelSpec m = model_from_hf_config(cfg, "model", &w);
  EXPECT_EQ(m.moe_layer_count(), 45);
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(3));
  for (const InputWarning& x : w) EXPECT_EQ(x.key_path.find("mlp_only_layers"), std::string::npos);
  cfg["mlp_only_layers"] = {0, 7};
  w.clear();
  m = model_from_hf_config(cfg, "model", &w);
  EXPECT_EQ(m.moe_layer_count(), 46);
  bool said = false;
  for (const InputWarning& x : w) said = said || x.key_path == "model.mlp_only_layers";
  EXPECT_TRUE(said);
  auto error_key = [&](const nlohmann::json& layers) {
    nlohmann::json c = cfg;
    c["mlp_only_layers"] = layers;
    try {
      model_from_hf_config(c, "model");
    } catch (const InputError& e) {
      return e.key_path();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(error_key({48}), "model.mlp_only_layers.0");
  EXPECT_EQ(error_key(3), "model.mlp_only_layers");
}

// DeepSeek-V3's MTP module: the tensors of model.layers.61 in deepseek-ai/DeepSeek-V3's
// checkpoint, summed one by one from its config (h 7168, V 129280, 128 heads, q_lora_rank 1536,
// kv_lora_rank 512, head widths 128 / 64 / 128, 256 routed experts and 1 shared of width 2048).
// The checkpoint stores the module with its own embedding and output head, which zerosim shares
// with the model, and the router's 256 score-correction biases, which zerosim does not count
// (they enter no GEMM). (The DeepSeek-V3 report, arXiv:2412.19437, calls the module "14B"; the
// sum below is 13.46B.)
TEST(moeModels, DeepSeekV3MtpModuleIsTheCheckpointsLayer61) {
  ModelSpec m = model_preset("deepseek-v3", "model");
  m.mtp_num_layers = 1;
  const ParamCounts with = count_params(m);
  const std::int64_t h = 7168, v = 129280, heads = 128, experts = 256, width = 2048;
  const std::int64_t layer61 =
      v * h                                                   // embed_tokens
      + 2 * h + 2 * h * h                                     // enorm, hnorm, eh_proj
      + 2 * h                                                 // input / post_attention norms
      + 1536 * h + 1536 + heads * (128 + 64) * 1536           // q_a_proj, q_a_layernorm, q_b_proj
      + (512 + 64) * h + 512 + heads * (128 + 128) * 512      // kv_a_proj_with_mqa, its norm, kv_b_proj
      + h * heads * 128                                       // o_proj
      + experts * h + experts                                 // gate.weight, e_score_correction_bias
      + (experts + 1) * 3 * width * h                         // routed and shared experts
      + h + v * h;                                            // shared_head.norm, shared_head.head
  EXPECT_EQ(with.mtp, layer61 - 2 * v * h - experts);
  // Its transformer layer is of the last decoder layer's kind: an MoE layer, whose routed
  // experts the active count leaves out as it does the decoder's.
  EXPECT_TRUE(m.is_moe_layer(m.num_layers));
  m.mtp_num_layers = 0;
  const ParamCounts without = count_params(m);
  EXPECT_EQ(with.total - without.total, with.mtp);
  EXPECT_EQ(with.mtp, with.moe_layer + 2 * m.hidden_size * m.hidden_size + 3 * without.final_norm);
  EXPECT_EQ(with.active - without.active,
            with.mtp - (without.total - without.active) / m.moe_layer_count());
}

// An MTP module's FLOPs per token are one more decoder layer's, eh_proj's 2 x 2h x h and the
// logits' 2 h V again, times 3 (forward and backward): the same as a model one layer deeper
// plus the two terms (Megatron-core's num_floating_point_operations counts these three).
TEST(moeModels, MtpFlopsAreOneMoreLayerProjectionAndLogits) {
  for (const char* preset : {"llama2-7b", "deepseek-v3"}) {
    SCOPED_TRACE(preset);
    ModelSpec m = model_preset(preset, "model");
    const double base = model_flops_per_token(m);
    ModelSpec deeper = m;
    deeper.num_layers += 1;
    m.mtp_num_layers = 1;
    const double h = static_cast<double>(m.hidden_size), v = static_cast<double>(m.vocab_size);
    EXPECT_NEAR(model_flops_per_token(m),
                model_flops_per_token(deeper) + 3.0 * (4.0 * h * h + 2.0 * h * v),
                1e-9 * base);
  }
}

// A dense model_type never reads an MoE config as a dense model: an expert field is an error.
// In an MoE type, an expert field that family does not have (Qwen3-MoE has no shared expert) is
// one transformers ignores: said, not refused.
TEST(moeModels, AnExpertFieldInADenseConfigIsAnError) {
  Read q = read_config("qwen3-30b-a3b.json");
  const std::int64_t total = count_params(q.m).total;
  nlohmann::json qwen = nlohmann::json::parse(
      std::ifstream(std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/qwen3-30b-a3b.json"));
  qwen["shared_expert_intermediate_size"] = 1024;
  std::vector<InputWarning> w;
  EXPECT_EQ(count_params(model_from_hf_config(qwen, "model", &w)).total, total);
  bool said = false;
  for (const InputWarning& x : w) said = said || x.key_path == "model.shared_expert_intermediate_size";
  EXPECT_TRUE(said);

  nlohmann::json cfg = nlohmann::json::parse(R"({"model_type": "mistral", "hidden_size": 4096,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
      "num_local_experts": 8, "num_experts_per_tok": 2})");
  try {
    model_from_hf_config(cfg, "model");
    FAIL() << "an MoE field in a mistral config was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "model.num_experts_per_tok");
    EXPECT_NE(std::string(e.what()).find("mixtral"), std::string::npos) << e.what();
  }
}

// Per-token model FLOPs of an MoE model, written out: 6 x (the weights a token multiplies, an
// expert's counted top_k times, the router's once) + the attention core, 12 x l x s x h (causal
// square counted in full, as for dense models) + 6 x the logits' h x V.
TEST(moeModels, FlopsPerTokenCountTheActiveExpertsOnly) {
  ModelSpec m = model_preset("llama2-7b", "model");
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden_size = 1024;
  const double h = 4096, l = 32, s = 4096, V = 32000;
  const double attention_weights = 4 * h * h;
  const double per_token_weights = attention_weights + 2 * 3 * h * 1024 + h * 8;  // top 2, router
  const double expected = 6 * l * per_token_weights + 12 * l * s * h + 6 * h * V;
  EXPECT_NEAR(model_flops_per_token(m) / expected, 1.0, 1e-12);

  // Every other layer MoE (from layer 1): the rest dense, at ffn_hidden_size 11008.
  m.moe.first_k_dense = 1;
  m.moe.layer_freq = 2;
  const double dense_weights = attention_weights + 3 * h * 11008;
  const double mixed = 6 * 16 * per_token_weights + 6 * 16 * dense_weights + 12 * l * s * h + 6 * h * V;
  EXPECT_EQ(m.moe_layer_count(), 16);
  EXPECT_NEAR(model_flops_per_token(m) / mixed, 1.0, 1e-12);
}

// An MoE layer's GEMMs on a TP rank: each expert gets tokens x top_k / experts rows (balanced),
// its gate+up split by columns and its down by rows; the router is whole on every rank.
TEST(moeModels, ExpertGemmsSplitTokensByRoutingAndWidthsByTp) {
  ModelSpec m = model_preset("llama2-7b", "model");
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden_size = 1024;
  const LayerWork w = layer_forward_work(m, 2, 4, true, true, true);
  const std::int64_t tokens = 2 * 4096;
  double expert_flops = 0, router_flops = 0;
  for (std::size_t i = w.attention_gemms; i < w.gemms.size(); ++i) {
    const Gemm& g = w.gemms[i];
    if (g.name == "router") {
      EXPECT_EQ(g.m, tokens);
      EXPECT_EQ(g.n, 8);
      router_flops += g.flops();
    } else {
      EXPECT_EQ(g.m, tokens * 2 / 8) << g.name;
      EXPECT_EQ(g.count, 8) << g.name;
      expert_flops += g.flops();
    }
  }
  EXPECT_DOUBLE_EQ(router_flops, 2.0 * tokens * 4096 * 8);
  // Every routed token's top_k experts, 3 matrices of h x 1024, over 4 TP ranks.
  EXPECT_DOUBLE_EQ(expert_flops, 2.0 * tokens * 2 * 3 * 4096 * 1024 / 4);
  // A dense layer of the same model has the dense MLP.
  const LayerWork dense = layer_forward_work(m, 2, 4, true, true, false);
  EXPECT_EQ(dense.gemms.size(), dense.attention_gemms + 2);
}

// Activations of an MoE layer (Korthikanti et al.'s rules, model.cpp): with experts as wide as the
// dense MLP and top_k = 1 of 1 expert, the layer keeps the dense layer's activations plus the
// routing's own: the permuted tokens (2 bytes x s x b x h), the fp32 score of each routed copy
// (4 bytes per token) and the router's fp32 probabilities (4 bytes per token and expert). As
// Megatron-core applies the scores inside the experts' fused activation, the combine keeps no
// copy of the experts' outputs; torchtitan's fp32 score multiply keeps one (4 bytes x s x b x h).
TEST(moeModels, OneExpertLayerKeepsTheDenseActivationsPlusTheRouting) {
  ModelSpec m = model_preset("llama2-7b", "model");
  m.moe.num_experts = 1;
  m.moe.top_k = 1;
  m.moe.expert_ffn_hidden_size = m.ffn_hidden_size;
  const double sb = 2.0 * 4096, sbh = sb * 4096;
  const double dense = activation_bytes_per_layer(m, 2, 1, false, Recompute::None, true, false);
  const double moe = activation_bytes_per_layer(m, 2, 1, false, Recompute::None, true, true);
  EXPECT_DOUBLE_EQ(moe - dense, 2.0 * sbh + 4.0 * sb + 4.0 * sb);
  LayerSaves torchtitan;
  torchtitan.moe_scored_copy_bytes = 4;
  const double scored = activation_bytes_per_layer(m, 2, 1, false, Recompute::None, true, true, 1,
                                                   0, {}, false, torchtitan);
  EXPECT_DOUBLE_EQ(scored - moe, 4.0 * sbh);
}

// Megatron-core's --activation-func-fp8-input-store: the SwiGLU's input (the gate and up halves,
// 2 x s x b x ffn elements, and an MoE layer's top_k expert copies and shared expert) in one byte
// instead of two; nothing else moves.
TEST(moeModels, Fp8ActivationInputStoreHalvesTheSwigluInput) {
  const ModelSpec m = model_preset("deepseek-v3", "model");
  const double sb = 4096;
  LayerSaves fp8;
  fp8.activation_input_fp8 = true;
  auto bytes = [&](bool moe, LayerSaves saves) {
    return activation_bytes_per_layer(m, 1, 1, false, Recompute::None, true, moe, 1, 0, {}, false,
                                      saves);
  };
  EXPECT_DOUBLE_EQ(bytes(false, {}) - bytes(false, fp8), 2.0 * sb * 18432);
  EXPECT_DOUBLE_EQ(bytes(true, {}) - bytes(true, fp8), 2.0 * sb * (8 * 2048 + 2048));
}

// The inline form carries the experts and MLA, and the echo of every MoE config reads back.
TEST(moeModels, InlineEchoReadsBack) {
  for (const Published& p : kPublished) {
    const Read r = read_config(p.file);
    EXPECT_EQ(model_from_json(model_to_json(r.m), "model"), r.m) << model_to_json(r.m).dump();
  }
  const nlohmann::json bad = nlohmann::json::parse(
      R"({"preset": "llama2-7b", "moe": {"num_experts": 8, "top_k": 9, "expert_ffn_hidden_size": 1024}})");
  try {
    model_from_json(bad, "model");
    FAIL() << "top_k above num_experts was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "model.moe.top_k");
  }
  const nlohmann::json typo = nlohmann::json::parse(
      R"({"preset": "llama2-7b", "moe": {"num_expert": 8}})");
  try {
    model_from_json(typo, "model");
    FAIL() << "an unknown moe key was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "model.moe.num_expert");
    EXPECT_NE(std::string(e.what()).find("num_experts"), std::string::npos);
  }
}


// Group-limited routing as the configs state it: DeepSeek-V3 routes every token within 4 of 8
// groups (node-limited), DeepSeek-V2 within 3 of 8 (group_limited_greedy), V2-Lite's greedy top-k
// is not limited. Megatron-core's checks on the two keys are kept.
TEST(moeModels, GroupLimitedRoutingIsReadAndChecked) {
  EXPECT_EQ(read_config("deepseek-v3.json").m.moe.router_num_groups, 8);
  EXPECT_EQ(read_config("deepseek-v3.json").m.moe.router_group_topk, 4);
  EXPECT_EQ(read_config("deepseek-v2.json").m.moe.router_num_groups, 8);
  EXPECT_EQ(read_config("deepseek-v2.json").m.moe.router_group_topk, 3);
  EXPECT_EQ(read_config("deepseek-v2-lite.json").m.moe.router_num_groups, 0);
  EXPECT_EQ(read_config("mixtral-8x7b-v0.1.json").m.moe.router_num_groups, 0);
  struct Bad {
    const char* moe;
    const char* key;
  };
  for (const Bad& b :
       {Bad{R"({"router_num_groups": 3, "router_group_topk": 1})", "model.moe.router_num_groups"},
        Bad{R"({"router_num_groups": 4, "router_group_topk": 5})", "model.moe.router_group_topk"},
        Bad{R"({"router_num_groups": 8, "router_group_topk": 1})", "model.moe.router_group_topk"},
        Bad{R"({"router_num_groups": 4})", "model.moe.router_group_topk"}}) {
    nlohmann::json model = nlohmann::json::parse(
        R"({"preset": "mixtral-8x7b"})");  // 8 experts, top 2
    model["moe"] = nlohmann::json::parse(b.moe);
    try {
      model_from_json(model, "model");
      ADD_FAILURE() << b.moe << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key_path(), b.key) << b.moe;
    }
  }
}

// Each MoE preset is the architecture its config.json describes: the same parameters, layers and
// experts (names, sources and training lengths aside).
TEST(moeModels, PresetsEqualTheirConfigs) {
  struct Case {
    const char* preset;
    const char* file;
  };
  for (const Case& c : {Case{"mixtral-8x7b", "mixtral-8x7b-v0.1.json"},
                        Case{"mixtral-8x22b", "mixtral-8x22b-v0.1.json"},
                        Case{"deepseek-v3", "deepseek-v3.json"},
                        Case{"qwen3-235b-a22b", "qwen3-235b-a22b.json"},
                        Case{"gpt-oss-120b", "gpt-oss-120b.json"},
                        Case{"llama4-scout", "llama-4-scout-17b-16e.json"},
                        Case{"llama4-maverick", "llama-4-maverick-17b-128e.json"}}) {
    ModelSpec preset = model_preset(c.preset, "model");
    ModelSpec config = read_config(c.file).m;
    config.name = preset.name;
    config.source = preset.source;
    config.seq_length = preset.seq_length;
    EXPECT_EQ(model_to_json(preset), model_to_json(config)) << c.preset;
    EXPECT_EQ(count_params(preset).total, count_params(config).total) << c.preset;
  }
}

// The zerosim-published-cases/1 format's moe keys: shared_experts counts experts of the expert
// width, first_k_dense leading dense layers, moe_layer_freq the spacing; capacity_factor is read
// and, not being simulated, warned about.
TEST(moeModels, CaseFormatKeys) {
  const nlohmann::json model = nlohmann::json::parse(R"({
      "num_layers": 8, "hidden_size": 1024, "num_attention_heads": 8, "num_kv_heads": 8,
      "ffn_hidden_size": 4096, "mlp": "swiglu", "vocab_size": 32000, "seq_length": 2048,
      "tied_embeddings": false,
      "moe": {"num_experts": 16, "top_k": 2, "expert_ffn_hidden_size": 512, "shared_experts": 2,
              "first_k_dense": 1, "moe_layer_freq": 2, "capacity_factor": 1.25}})");
  std::vector<InputWarning> warnings;
  const ModelSpec m = model_from_json(model, "model", &warnings);
  EXPECT_EQ(m.moe.shared_ffn_hidden_size, 1024);
  EXPECT_EQ(m.moe_layer_count(), 4);  // layers 1, 3, 5, 7
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_FALSE(m.is_moe_layer(2));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].key_path, "model.moe.capacity_factor");
  nlohmann::json dropless = model;
  dropless["moe"]["capacity_factor"] = nullptr;
  warnings.clear();
  model_from_json(dropless, "model", &warnings);
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace zerosim
