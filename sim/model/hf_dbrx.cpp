// DBRX (model_type dbrx), read as transformers builds DbrxForCausalLM (models/dbrx/
// configuration_dbrx.py and modeling_dbrx.py): its own names for the sizes (d_model, n_heads,
// n_layers, max_seq_len) and two nested configs, attn_config (kv_n_heads, clip_qkv, rope_theta,
// attn_pdrop) and ffn_config (ffn_hidden_size, moe_num_experts, moe_top_k, ffn_act_fn, the
// routing numerics). Every block: a LayerNorm without bias before attention and before the
// experts, a fused Wqkv and an out_proj without biases, rotary positions, a router without bias
// and moe_num_experts gated experts (w1, v1, w2) of ffn_hidden_size with ffn_act_fn, no biases;
// a final LayerNorm without bias and an untied lm_head (tie_word_embeddings false by default).
// Defaults where a field is absent: DbrxConfig's, DbrxAttentionConfig's and DbrxFFNConfig's.
#include <string>
#include <vector>

#include "sim/model/hf_reader.h"

namespace zerosim::model_detail {

ModelSpec parse_dbrx(const json& cfg, const std::string& origin, FieldKeys& keys,
                     std::vector<InputWarning>& warnings,
                     const std::vector<std::string>& cost_free) {
  HfConfig c(cfg, origin, "dbrx");
  c.get("model_type");
  ModelSpec m;
  m.name = origin;
  m.source = "Hugging Face config.json, model_type dbrx";
  m.hidden_size = c.required({"d_model"}, keys.hidden_size);
  m.num_layers = c.required({"n_layers"}, keys.num_layers);
  m.num_attention_heads = c.required({"n_heads"}, keys.num_attention_heads);
  m.vocab_size = c.required({"vocab_size"}, keys.vocab_size);
  keys.max_position_embeddings = "max_seq_len";
  const json* length = c.get("max_seq_len");
  m.max_position_embeddings = length ? read_int(*length, c.path("max_seq_len")) : 2048;
  keys.max_position_embeddings_given = length != nullptr;
  m.hidden_dropout = 0.0;
  if (const json* v = c.get("resid_pdrop"))
    m.hidden_dropout = read_dropout_probability(*v, c.path("resid_pdrop"));
  m.tied_embeddings = c.bool_or("tie_word_embeddings", false);

  // A nested config must be an object; absent or null, the class's defaults.
  auto nested = [&](const char* key) -> const json& {
    static const json kEmpty = json::object();
    const json* v = c.get(key);
    if (!v) return kEmpty;
    if (!v->is_object())
      throw InputError(c.path(key), std::string("must be an object, got ") + type_name(*v));
    return *v;
  };
  // What a nested config may hold that changes no cost: the numerics of attention (the QKV
  // clamp, an elementwise op on the projection's output, and the rotary base) and of routing,
  // and the attributes every transformers PretrainedConfig has (generation, outputs, labels),
  // which DBRX's sub-configs, PretrainedConfigs themselves, may write out in full: some
  // re-uploads of DBRX carry them inside attn_config and ffn_config.
  std::vector<std::string> nested_cost_free = {
      "model_type", "clip_qkv", "rope_theta", "moe_jitter_eps", "moe_loss_weight",
      "moe_normalize_expert_weights", "uniform_expert_assignment"};
  for (const char* k :
       {"return_dict", "output_hidden_states", "output_attentions", "torchscript", "torch_dtype",
        "use_bfloat16", "tf_legacy_loss", "pruned_heads", "tie_word_embeddings",
        "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder",
        "cross_attention_hidden_size", "add_cross_attention", "tie_encoder_decoder", "max_length",
        "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
        "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
        "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
        "num_return_sequences", "output_scores", "return_dict_in_generate",
        "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
        "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
        "architectures", "finetuning_task", "id2label", "label2id", "tokenizer_class", "prefix",
        "bos_token_id", "pad_token_id", "eos_token_id", "sep_token_id", "decoder_start_token_id",
        "task_specific_params", "problem_type", "_name_or_path", "transformers_version"})
    nested_cost_free.emplace_back(k);

  HfConfig attn(nested("attn_config"), c.path("attn_config"), "dbrx");
  keys.num_kv_heads = "attn_config.kv_n_heads";
  m.num_kv_heads = attn.int_or("kv_n_heads", 1);  // DbrxAttentionConfig's default
  m.attention_dropout = 0.0;
  if (const json* v = attn.get("attn_pdrop"))
    m.attention_dropout = read_dropout_probability(*v, attn.path("attn_pdrop"));
  attn.report_unread(warnings, nested_cost_free, true);

  HfConfig ffn(nested("ffn_config"), c.path("ffn_config"), "dbrx");
  keys.ffn_hidden_size = "ffn_config.ffn_hidden_size";
  m.ffn_hidden_size = ffn.int_or("ffn_hidden_size", 3584);
  MoeSpec& e = m.moe;
  e.num_experts = ffn.int_or("moe_num_experts", 4);
  e.top_k = ffn.int_or("moe_top_k", 1);
  e.expert_ffn_hidden_size = m.ffn_hidden_size;
  // The experts are gated (DbrxExpertGLU: act(x w1) * (x v1), then w2) with ffn_act_fn's name.
  m.mlp = MlpKind::Swiglu;
  if (const json* act = ffn.get("ffn_act_fn")) {
    const std::string path = ffn.path("ffn_act_fn");
    if (!act->is_object())
      throw InputError(path, std::string("must be an object like {\"name\": \"silu\"}, got ") +
                                 type_name(*act));
    const json* name = find(*act, "name");
    if (!name) throw InputError(key_join(path, "name"), "missing; allowed: silu, gelu");
    const std::string n = read_string(*name, key_join(path, "name"));
    if (n == "gelu" || n == "gelu_new" || n == "gelu_pytorch_tanh") m.mlp = MlpKind::Geglu;
    else if (n != "silu" && n != "swish")
      throw InputError(key_join(path, "name"),
                       "unknown activation '" + n + "'; allowed: silu, swish, gelu, gelu_new, "
                       "gelu_pytorch_tanh");
    for (auto it = act->begin(); it != act->end(); ++it)
      if (it.key() != "name" && !it->is_null())
        warnings.push_back({key_join(path, it.key()),
                            "an argument of the activation: changes no cost, not read"});
  }
  ffn.report_unread(warnings, nested_cost_free, true);
  if (e.top_k > e.num_experts)
    throw InputError(ffn.path("moe_top_k"), "must be at most moe_num_experts (" +
                                                std::to_string(e.num_experts) + ")");

  m.norm = NormKind::LayerNormNoBias;
  m.position = PositionKind::Rotary;
  m.qkv_bias = m.attention_output_bias = m.mlp_bias = false;
  if (const json* seq = c.get("seq_length")) m.seq_length = read_int(*seq, c.path("seq_length"));
  // emb_pdrop: the embedding's dropout, which the other families' readers take as cost-free.
  std::vector<std::string> top_cost_free = cost_free;
  top_cost_free.push_back("emb_pdrop");
  c.report_unread(warnings, top_cost_free, true);
  return m;
}

}  // namespace zerosim::model_detail
