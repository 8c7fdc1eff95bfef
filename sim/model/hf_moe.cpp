// The Mixture-of-Experts and latent-attention fields of a Hugging Face config.json, read as
// transformers builds each model_type (the sparse block's modeling code of each family):
//   mixtral     every layer MoE: num_local_experts experts of intermediate_size, top
//               num_experts_per_tok, a router without bias (MixtralSparseMoeBlock);
//   qwen2_moe   layer i is MoE when (i + 1) % decoder_sparse_step == 0 and it is not in
//               mlp_only_layers: num_experts of moe_intermediate_size, a shared expert of
//               shared_expert_intermediate_size with a [h -> 1] sigmoid gate;
//   qwen3_moe   as qwen2_moe without the shared expert;
//   deepseek_v2, deepseek_v3
//               layers from first_k_dense_replace on are MoE: n_routed_experts of
//               moe_intermediate_size, n_shared_experts of the same width as one shared MLP;
//               DeepSeek's own modeling_deepseek.py also requires i % moe_layer_freq == 0
//               (transformers ignores the field; every published config has 1);
//   gpt_oss     every layer MoE: num_local_experts experts of intermediate_size with biases, a
//               router with a bias;
//   phimoe      as mixtral (PhimoeSparseMoeBlock), 16 experts and top 2 by default;
//   llama4_text the layers in moe_layers, by default every interleave_moe_layer_step-th from
//               step - 1 on, are MoE (Llama4TextMoe): num_local_experts routed experts (16) and
//               one shared expert, all of intermediate_size, top num_experts_per_tok (1), a
//               router without bias; the other layers' MLP is intermediate_size_mlp wide
//               (hf_config.cpp reads it).
// Routing numerics (softmax or sigmoid scores, the scaling factor, the auxiliary loss
// coefficients, top-k renormalisation) change no parameter and no GEMM: they are in
// hf_config.cpp's cost-free list. DeepSeek's group-limited routing (n_group, topk_group) is read:
// it decides how many nodes a token's experts span, which the flex dispatcher's traffic follows.
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "sim/model/hf_reader.h"

namespace zerosim::model_detail {

bool is_moe_field(const std::string& key) {
  static const std::vector<std::string> fields = {
      "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
      "experts_per_token", "moe_intermediate_size", "shared_expert_intermediate_size",
      "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step",
      "expert_interval", "mlp_only_layers", "moe_num_experts", "moe_top_k",
      "interleave_moe_layer_step", "moe_layers"};
  return contains(fields, key);
}

namespace {

// A config's list of layer indices (Qwen's mlp_only_layers, Llama 4's moe_layers), each below
// num_hidden_layers.
std::set<std::int64_t> read_layer_list(const json& list, const std::string& path,
                                       std::int64_t num_layers) {
  if (!list.is_array()) throw InputError(path, "must be a list of layer indices");
  std::set<std::int64_t> layers;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::int64_t layer = read_int(list[i], key_join(path, std::to_string(i)), 0);
    if (layer >= num_layers)
      throw InputError(key_join(path, std::to_string(i)),
                       "must be a layer index below num_hidden_layers (" +
                           std::to_string(num_layers) + "), got " + std::to_string(layer));
    layers.insert(layer);
  }
  return layers;
}

// Llama4TextConfig's layer pattern: moe_layers lists the MoE layers; without it they are
// range(step - 1, layers, step) for step = interleave_moe_layer_step (1: every layer; Maverick's
// 2: every other one, from layer 1).
void read_llama4_moe(HfConfig& c, ModelSpec& m, std::vector<InputWarning>& warnings) {
  MoeSpec& e = m.moe;
  e.num_experts = c.int_or("num_local_experts", 16);
  e.top_k = c.int_or("num_experts_per_tok", 1);
  e.expert_ffn_hidden_size = m.ffn_hidden_size;  // intermediate_size
  e.shared_ffn_hidden_size = m.ffn_hidden_size;  // Llama4TextMLP(config): one shared expert
  const std::int64_t step = c.int_or("interleave_moe_layer_step", 1);
  if (step > m.num_layers)
    throw InputError(c.path("interleave_moe_layer_step"),
                     "puts no MoE layer in the " + std::to_string(m.num_layers) +
                         " layers; allowed: 1 to num_hidden_layers");
  e.first_k_dense = step - 1;
  e.layer_freq = step;
  const json* listed = c.get("moe_layers");
  if (!listed) return;
  const std::set<std::int64_t> layers = read_layer_list(*listed, c.path("moe_layers"), m.num_layers);
  if (layers.empty()) {  // every layer has the dense MLP
    e = MoeSpec{};
    return;
  }
  // Exact when the list is range(first, layers, every), the form Llama4TextConfig writes; else
  // the same count of MoE layers, placed last.
  const std::int64_t first = *layers.begin();
  const std::int64_t every = layers.size() > 1 ? *std::next(layers.begin()) - first : 1;
  bool regular = true;
  std::int64_t expected = first;
  for (std::int64_t layer : layers) {
    regular = regular && layer == expected;
    expected += every;
  }
  regular = regular && expected >= m.num_layers;
  if (regular) {
    e.first_k_dense = first;
    e.layer_freq = every;
    return;
  }
  e.first_k_dense = m.num_layers - static_cast<std::int64_t>(layers.size());
  e.layer_freq = 1;
  c.warn(warnings, "moe_layers",
         "the " + std::to_string(layers.size()) + " listed MoE layers are not evenly spaced to "
         "the last layer; simulated as the last " + std::to_string(layers.size()) +
         " layers (zerosim places MoE layers from first_k_dense on, every moe_layer_freq-th): "
         "the counts are exact, which pipeline stage holds them is not");
}

}  // namespace

void read_hf_moe(HfConfig& c, ModelSpec& m, std::vector<InputWarning>& warnings) {
  const std::string& type = c.type();
  MoeSpec& e = m.moe;
  std::string used;
  if (type == "mixtral" || type == "gpt_oss" || type == "phimoe") {
    // Class defaults: MixtralConfig 8 experts, top 2; GptOssConfig 128 experts, top 4;
    // PhimoeConfig 16 experts, top 2.
    e.num_experts = c.int_or("num_local_experts", type == "mixtral" ? 8 : type == "phimoe" ? 16 : 128);
    const json* k = c.get_any({"num_experts_per_tok", "experts_per_token"}, used);
    e.top_k = k ? read_int(*k, c.path(used)) : (type == "gpt_oss" ? 4 : 2);
    e.expert_ffn_hidden_size = m.ffn_hidden_size;  // intermediate_size is the expert's
    e.router_bias = type == "gpt_oss";
    return;
  }
  if (type == "llama4_text") {
    read_llama4_moe(c, m, warnings);
    return;
  }
  if (type == "qwen2_moe" || type == "qwen3_moe") {
    const bool qwen2 = type == "qwen2_moe";
    // Qwen2MoeConfig / Qwen3MoeConfig defaults: 60 / 128 experts, top 4 / 8, width 1408 / 768.
    e.num_experts = c.int_or("num_experts", qwen2 ? 60 : 128);
    e.top_k = c.int_or("num_experts_per_tok", qwen2 ? 4 : 8);
    e.expert_ffn_hidden_size = c.int_or("moe_intermediate_size", qwen2 ? 1408 : 768);
    if (qwen2) {
      e.shared_ffn_hidden_size = c.int_or("shared_expert_intermediate_size", 5632);
      e.shared_expert_gate = e.shared_ffn_hidden_size > 0;
    }
    // expert_interval: the name of the first Qwen1.5-MoE configs for decoder_sparse_step.
    const json* step = c.get_any({"decoder_sparse_step", "expert_interval"}, used);
    const std::int64_t every = step ? read_int(*step, c.path(used)) : 1;
    if (every > m.num_layers)
      throw InputError(c.path(used), "puts no MoE layer in the " + std::to_string(m.num_layers) +
                                         " layers; allowed: 1 to num_hidden_layers");
    e.first_k_dense = every - 1;  // (i + 1) % every == 0
    e.layer_freq = every;
    if (e.num_experts == 0) {  // num_experts 0: every layer has the dense MLP
      e = MoeSpec{};
      return;
    }
    // mlp_only_layers: layers that keep the dense MLP although (i + 1) % every == 0. zerosim's
    // MoE layers start at first_k_dense and repeat every layer_freq, so the n such layers are
    // taken as the first n MoE positions: exact for a prefix of the layers (the lists published
    // configs carry), the same counts placed first otherwise (said).
    if (const json* dense = c.get("mlp_only_layers")) {
      const std::string path = c.path("mlp_only_layers");
      const std::set<std::int64_t> listed = read_layer_list(*dense, path, m.num_layers);
      std::int64_t moved = 0;  // MoE positions the list turns dense
      for (std::int64_t layer : listed) moved += (layer + 1) % every == 0 ? 1 : 0;
      const std::int64_t moe_positions = m.num_layers / every;
      if (moved >= moe_positions)
        throw InputError(path, "leaves no MoE layer: every one of the " +
                                   std::to_string(moe_positions) + " is listed");
      e.first_k_dense = (moved + 1) * every - 1;
      bool prefix = true;
      for (std::int64_t i = 0; i < moved; ++i)
        prefix = prefix && listed.count((i + 1) * every - 1) > 0;
      if (!prefix)
        c.warn(warnings, "mlp_only_layers",
               "the " + std::to_string(moved) + " listed MoE positions are simulated as the "
               "first ones (zerosim places the MoE layers from first_k_dense on): the counts "
               "are exact, which pipeline stage holds them is not");
    }
    return;
  }
  // deepseek_v2, deepseek_v3. Class defaults: DeepseekV2Config 64 routed and 2 shared experts,
  // first_k_dense_replace 0; DeepseekV3Config 256 and 1, first_k_dense_replace 3, top 8.
  const bool v3 = type == "deepseek_v3";
  e.num_experts = c.int_or("n_routed_experts", v3 ? 256 : 64);
  const json* k = c.get("num_experts_per_tok");
  if (!k && !v3)
    throw InputError(c.path("num_experts_per_tok"),
                     "missing; DeepseekV2Config has no default for the experts per token");
  e.top_k = k ? read_int(*k, c.path("num_experts_per_tok")) : 8;
  e.expert_ffn_hidden_size = c.required({"moe_intermediate_size"}, used);
  const std::int64_t shared = c.int_or("n_shared_experts", v3 ? 1 : 2);
  e.shared_ffn_hidden_size = shared * e.expert_ffn_hidden_size;
  const json* first = c.get("first_k_dense_replace");
  const std::int64_t dense = first ? read_int(*first, c.path("first_k_dense_replace"), 0) : (v3 ? 3 : 0);
  e.layer_freq = c.int_or("moe_layer_freq", 1);
  if (dense >= m.num_layers)
    throw InputError(c.path("first_k_dense_replace"),
                     "leaves no MoE layer in the " + std::to_string(m.num_layers) +
                         " layers; allowed: 0 to num_hidden_layers - 1");
  // The first layer at or after the dense ones that moe_layer_freq divides.
  e.first_k_dense = (dense + e.layer_freq - 1) / e.layer_freq * e.layer_freq;
  // Group-limited routing: DeepseekV3 always routes within its topk_group best groups (noaux_tc;
  // DeepseekV3Config defaults n_group 8, topk_group 4); DeepseekV2 only with topk_method
  // group_limited_greedy (its default greedy picks from all experts).
  const json* method = c.get("topk_method");
  const bool grouped =
      v3 || (method && method->is_string() && method->get<std::string>() == "group_limited_greedy");
  if (grouped) {
    e.router_num_groups = c.int_or("n_group", v3 ? 8 : 1);
    e.router_group_topk = c.int_or("topk_group", v3 ? 4 : 1);
    if (e.router_num_groups == 1) e.router_num_groups = e.router_group_topk = 0;  // no limit
  }
  if (e.layer_freq != 1)
    c.warn(warnings, "moe_layer_freq",
           "DeepSeek's modeling_deepseek.py makes only every " + std::to_string(e.layer_freq) +
               "-th layer MoE, transformers every layer after first_k_dense_replace; zerosim "
               "follows DeepSeek's code");
  if (const json* mtp = c.get("num_nextn_predict_layers"); mtp && read_int(*mtp, c.path("num_nextn_predict_layers"), 0) > 0)
    c.warn(warnings, "num_nextn_predict_layers",
           "the multi-token-prediction module (DeepSeek-V3's extra layer, about 14B parameters "
           "in V3) is not read from a Hugging Face config: transformers does not train it and "
           "Megatron-Bridge's DeepSeek-V3 bridge imports the config without it; give "
           "mtp_num_layers in an inline model (framework megatron) to simulate it");
}

void read_hf_mla(HfConfig& c, ModelSpec& m) {
  MlaSpec& a = m.mla;
  std::string used;
  // DeepseekV2Config / V3Config defaults: q_lora_rank 1536 (null: queries projected directly,
  // V2-Lite), kv_lora_rank 512, head widths 128 (no rotary), 64 (rotary) and 128 (values).
  const json* q = c.get("q_lora_rank");
  a.q_lora_rank = q ? read_int(*q, c.path("q_lora_rank")) : (c.has("q_lora_rank") ? 0 : 1536);
  a.kv_lora_rank = c.int_or("kv_lora_rank", 512);
  a.qk_nope_head_dim = c.int_or("qk_nope_head_dim", 128);
  a.qk_rope_head_dim = c.int_or("qk_rope_head_dim", 64);
  a.v_head_dim = c.int_or("v_head_dim", 128);
  // MLA decompresses keys and values per head: num_key_value_heads (equal to the heads in every
  // DeepSeek config) and head_dim (transformers 5 sets it to qk_rope_head_dim) do not apply.
  c.get("num_key_value_heads");
  c.get("head_dim");
  m.num_kv_heads = m.num_attention_heads;
  m.attention_head_dim = 0;
}

}  // namespace zerosim::model_detail
