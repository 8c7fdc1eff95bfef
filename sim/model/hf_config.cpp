// Reading a Hugging Face config.json into a ModelSpec, family by family, as transformers builds
// each model; the scenario reader (model_json.cpp) calls it for a model given as a config path.
#include "sim/model/hf_config.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/model/hf_reader.h"
#include "sim/model/json_readers.h"
#include "sim/model/model.h"

namespace zerosim::model_detail {
namespace {

// ---- Hugging Face config.json ----
//
// Each family is read as its transformers class builds the model (the modeling_*.py module of
// that model_type), with the class defaults for fields a config leaves out. Every field of a
// config ends in one of four places:
//   modelled   read into ModelSpec (sizes, GQA/MQA, head_dim, biases, tied embeddings, norms per
//              block, sliding window and how many layers have it, ALiBi/rotary/learned
//              positions);
//   warned     read, but simulated otherwise than written (a parallel attention+MLP block's
//              activations, Phi's q/k LayerNorms, a training length the config does not give)
//              or not known to zerosim at all;
//   refused    an InputError (an unknown model_type, an activation the family cannot have,
//              GPT-2's cross-attention);
//   silent     kCostFree below: fields that do not change parameters, FLOPs or bytes.
// Families: Llama-like (llama, mistral, qwen2, phi3, gemma, gemma2): pre-RMSNorm, rotary, gated
// MLP. gpt2: LayerNorm, learned positions, biases, GeLU, tied. gpt_neox: LayerNorm, rotary,
// parallel residual, untied. bloom: LayerNorm, ALiBi, biases, embedding LayerNorm, tied.
// falcon: LayerNorm, rotary or ALiBi, MQA/GQA, parallel block, tied. phi (Phi-2): LayerNorm,
// partial rotary, biases (also on lm_head), parallel block with one norm, untied.
// Llama-like too, with their own fields: qwen3 (q/k norms, head_dim), olmo2 (q/k norms over
// the whole projections, norms after attention and MLP); the Mixture-of-Experts
// types mixtral, qwen2_moe, qwen3_moe, gpt_oss (biases, attention sinks), phimoe (LayerNorms,
// attention and lm_head biases) and deepseek_v2,
// deepseek_v3 (multi-head latent attention), llama4_text (a shared expert, MoE in every
// interleave_moe_layer_step-th layer, chunked attention), whose sparse blocks hf_moe.cpp reads;
// llama4, the multimodal checkpoints' config, whose text_config is read as llama4_text; dbrx,
// with its own names and nested configs, read whole by hf_dbrx.cpp.
const std::vector<std::string> kHfTypes = {
    "llama", "mistral",   "qwen2",     "qwen3",       "phi3",        "gemma",   "gemma2",
    "gemma3_text", "olmo2",
    "gpt2",  "gpt_neox",  "bloom",     "falcon",      "phi",         "mixtral", "qwen2_moe",
    "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss", "dbrx", "phimoe", "llama4",
    "llama4_text"};
const std::vector<std::string> kMoeTypes = {"mixtral",     "qwen2_moe",   "qwen3_moe",
                                            "deepseek_v2", "deepseek_v3", "gpt_oss", "phimoe",
                                            "llama4_text"};

// Fields that change neither parameters, FLOPs nor bytes moved, accepted without a word, each with
// why: labels and token ids; numerics (norm epsilons, initialisation, rope frequencies and
// scaling, softmax in fp32, Llama's pretraining_tp slicing); the embedding's and classifier
// heads' dropout rates (a mask of the first stage's embedding output, one byte per element, not
// counted; the residual and attention rates are read, read_dropout); kernel fusions
// (Megatron-DeepSpeed's BLOOM flags); where the residual is taken
// (apply_residual_connection_post_layernorm); rotary on part of each head (rotary_pct,
// partial_rotary_factor: HF rotates a slice and concatenates, so Q and K are rewritten whole,
// which is what zerosim counts); Gemma 2's logit soft-capping and query scale (a tanh and a
// scalar fused into kernels zerosim already counts); limits of other features
// (original_max_position_embeddings of rope scaling, GPT-2's n_ctx, which equals n_positions).
const std::vector<std::string> kCostFree = {
    "_name_or_path", "architectures", "auto_map", "torch_dtype", "dtype", "transformers_version",
    "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "sep_token_id",
    "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta",
    "rope_scaling", "rotary_emb_base", "rotary_pct", "partial_rotary_factor",
    "original_max_position_embeddings", "pretraining_tp", "attention_softmax_in_fp32",
    "embd_pdrop", "classifier_dropout", "masked_softmax_fusion", "bias_dropout_fusion",
    "skip_bias_add", "skip_bias_add_qkv", "slow_but_exact", "offset_alibi",
    "apply_residual_connection_post_layernorm", "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "summary_type",
    "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "task_specific_params", "n_ctx", "attn_logit_softcapping", "final_logit_softcapping",
    "query_pre_attn_scalar", "cache_implementation", "rope_local_base_freq", "input_jitter_noise",
    // Mixture-of-Experts routing numerics and losses: scores (softmax or sigmoid), group-limited
    // top-k (which hf_moe.cpp reads for DeepSeek), scaling, renormalisation, jitter, auxiliary
    // losses; gpt-oss's SwiGLU clamp; the expert parallelism DeepSeek's inference code was configured with (ep_size: the run's
    // is parallel.*); the rotary layout (rope_interleave); gpt-oss's pre-training length.
    "router_aux_loss_coef", "output_router_logits", "router_jitter_noise", "norm_topk_prob",
    "topk_method", "n_group", "topk_group", "routed_scaling_factor", "scoring_func",
    "aux_loss_alpha", "seq_aux", "swiglu_limit", "ep_size",
    "rope_interleave", "initial_context_length",
    // Llama 4: the L2 norm of queries and keys has no weights (Llama4TextL2Norm), an elementwise
    // pass as uncounted as the other families' q/k norms' traffic; the query temperature of the
    // layers without rotary (attn_temperature_tuning, floor_scale, attn_scale), a scalar per
    // position; which layers skip rotary (no_rope_layers, no_rope_layer_interval; zerosim
    // rotates Q and K in every layer, 4 bytes per element more in a quarter of the layers, as it
    // does for partial rotary).
    "use_qk_norm", "attn_temperature_tuning", "floor_scale", "attn_scale", "no_rope_layers",
    "no_rope_layer_interval",
    // Saved by transformers itself: which attention implementation it picked
    // (_attn_implementation_autoset), and transformers 4.51's switch of Llama 4's experts to one
    // linear each for llm-compressor (for_llm_compressor: the same weights and GEMMs).
    "_attn_implementation_autoset", "for_llm_compressor"};

// The fields of Llama 4's multimodal config (Llama4Config) beside text_config, accepted without a
// word: the image tokens' ids; tie_word_embeddings, Llama4Config's own (false), while the text
// model's head follows text_config's.
const std::vector<std::string> kLlama4WrapperCostFree = {
    "boi_token_index", "eoi_token_index", "image_token_index", "tie_word_embeddings"};

enum class HfFamily { LlamaLike, Gpt2, GptNeox, Bloom, Falcon, Phi };

// The Gemma classes share their defaults: heads of 256, gelu_pytorch_tanh, tied embeddings.
bool gemma_type(const std::string& type) {
  return type == "gemma" || type == "gemma2" || type == "gemma3_text";
}


HfFamily family_of(const std::string& type) {
  if (type == "gpt2") return HfFamily::Gpt2;
  if (type == "gpt_neox") return HfFamily::GptNeox;
  if (type == "bloom") return HfFamily::Bloom;
  if (type == "falcon") return HfFamily::Falcon;
  if (type == "phi") return HfFamily::Phi;
  return HfFamily::LlamaLike;
}


// Activation of the MLP. Llama-like MLPs are gated (three matrices): a SiLU gate is SwiGLU, a
// GeLU gate (Gemma) GeGLU. The other families choose between GeLU and ReLU.
MlpKind read_activation(HfConfig& c, HfFamily family) {
  std::string key = "hidden_act";
  const json* act = nullptr;
  if (family == HfFamily::Gpt2) {
    key = "activation_function";
    act = c.get(key);
  } else if (family == HfFamily::Falcon) {
    key = "activation";
    act = c.get(key);
  } else if (family != HfFamily::Bloom) {
    // Gemma's hidden_activation, where given, is what GemmaMLP uses over hidden_act.
    act = c.get_any({"hidden_activation", "hidden_act"}, key);
  }
  const bool gated = family == HfFamily::LlamaLike;
  // Class defaults: silu (Llama-like), gelu_pytorch_tanh (the Gemma classes), gelu (the others).
  if (!act) return gated ? (gemma_type(c.type()) ? MlpKind::Geglu : MlpKind::Swiglu)
                         : MlpKind::Gelu;
  const std::string a = read_string(*act, c.path(key));
  const std::vector<std::string> silu = {"silu", "swish", "swiglu"};
  const std::vector<std::string> gelu = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh",
                                         "gelu_accurate", "quick_gelu"};
  std::vector<std::string> allowed = gelu;
  if (gated) allowed.insert(allowed.begin(), silu.begin(), silu.end());
  else allowed.push_back("relu");
  if (!contains(allowed, a))
    throw InputError(c.path(key), "unsupported '" + a + "' for model_type " + c.type() +
                                      did_you_mean(a, allowed) + "; allowed: " + join_list(allowed));
  if (gated) return contains(silu, a) ? MlpKind::Swiglu : MlpKind::Geglu;
  return a == "relu" ? MlpKind::Relu : MlpKind::Gelu;
}

// Which layers attend within a sliding window, as each family's transformers code decides:
// Mistral and Phi-3 in every layer when sliding_window is set; Qwen2 only with
// use_sliding_window, from layer max_window_layers on; Gemma 2 every other layer; a config's
// layer_types list, where given, names each layer. The window and how many layers have it are
// modelled (ModelSpec::sliding_window, sliding_window_layers); which layers they are is not, as
// zerosim costs every layer at the layers' average (resolve warns where pipeline stages make
// that matter).
void read_sliding_window(HfConfig& c, ModelSpec& m) {
  const std::string& type = c.type();
  const bool qwen = type == "qwen2" || type == "qwen3" || type == "qwen2_moe" || type == "qwen3_moe";
  const bool everywhere =
      type == "mistral" || type == "phi3" || type == "mixtral" || type == "phimoe";
  const bool alternating = type == "gemma2" || type == "gpt_oss";  // even layers, by default
  const bool gemma3 = type == "gemma3_text";  // all but every sliding_window_pattern-th layer
  if (!qwen && !everywhere && !alternating && !gemma3) return;
  std::int64_t window = 0;
  std::int64_t windowed = 0;  // layers with the window
  if (qwen) {
    const bool on = c.bool_or("use_sliding_window", false);
    const json* first = c.get("max_window_layers");  // Qwen2Config's default: 28
    const std::int64_t from = first ? read_int(*first, c.path("max_window_layers"), 0) : 28;
    const json* w = c.get("sliding_window");
    if (on && w) {
      window = read_int(*w, c.path("sliding_window"));
      windowed = m.num_layers - std::min(m.num_layers, from);
    }
  } else {
    const json* w = c.get("sliding_window");
    if (w) window = read_int(*w, c.path("sliding_window"));
    else if (type == "gemma2" || gemma3) window = 4096;  // Gemma2Config's, Gemma3TextConfig's
    else if (type == "gpt_oss") window = 128;  // GptOssConfig's default
    // Gemma 2, gpt-oss: layers 0, 2, 4, ...; Gemma 3: layer i unless (i + 1) % pattern == 0
    // (Gemma3TextConfig builds layer_types so, sliding_window_pattern 6 by default). Written
    // so that no sum can overflow before validation.
    if (window > 0) {
      windowed = alternating ? m.num_layers / 2 + m.num_layers % 2 : m.num_layers;
      if (gemma3) windowed = m.num_layers - m.num_layers / c.int_or("sliding_window_pattern", 6);
    }
  }
  if (const json* types = c.get("layer_types"); types && window > 0) {
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != m.num_layers)
      throw InputError(c.path("layer_types"),
                       "must list one entry per layer (" + std::to_string(m.num_layers) + ")");
    windowed = 0;
    for (const json& t : *types) windowed += t == "sliding_attention" ? 1 : 0;
  }
  if (window == 0 || windowed == 0) return;
  m.sliding_window = window;
  m.sliding_window_layers = windowed == m.num_layers ? 0 : windowed;
}

// Llama 4's chunked attention (Llama4TextConfig, modeling_llama4.py): the layers that
// layer_types names chunked_attention attend within chunks of attention_chunk_size tokens (8192
// by default; null: none). Without layer_types they are the layers with rotary positions,
// no_rope_layers[i] == 1, by default every layer but each no_rope_layer_interval-th (4): 36 of
// Scout's and Maverick's 48.
void read_attention_chunks(HfConfig& c, ModelSpec& m) {
  const std::int64_t layers = m.num_layers;
  const json* size = c.get("attention_chunk_size");
  const std::int64_t chunk = size ? read_int(*size, c.path("attention_chunk_size"))
                                  : (c.has("attention_chunk_size") ? 0 : 8192);
  if (chunk > kMaxTable)
    throw InputError(c.path("attention_chunk_size"),
                     "must be at most " + std::to_string(kMaxTable) + ", got " + std::to_string(chunk));
  std::int64_t chunked = 0;
  const json* rope = c.get("no_rope_layers");
  if (const json* types = c.get("layer_types")) {
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != layers)
      throw InputError(c.path("layer_types"),
                       "must list one entry per layer (" + std::to_string(layers) + ")");
    for (const json& t : *types) chunked += t == "chunked_attention" ? 1 : 0;
  } else if (rope && !(rope->is_array() && rope->empty())) {
    // "At least the same length as the number of layers": the first num_hidden_layers count.
    if (!rope->is_array() || static_cast<std::int64_t>(rope->size()) < layers)
      throw InputError(c.path("no_rope_layers"),
                       "must list at least one entry per layer (" + std::to_string(layers) +
                           "): 1 for a layer with rotary positions, 0 for one without");
    for (std::int64_t i = 0; i < layers; ++i) {
      const json& v = (*rope)[static_cast<std::size_t>(i)];
      const std::string at = key_join(c.path("no_rope_layers"), std::to_string(i));
      chunked += (v.is_boolean() ? v.get<bool>() : read_int(v, at, 0) != 0) ? 1 : 0;
    }
  } else {
    chunked = layers - layers / c.int_or("no_rope_layer_interval", 4);
  }
  if (chunk == 0 || chunked == 0) return;
  m.attention_chunk_size = chunk;
  m.chunked_attention_layers = chunked == layers ? 0 : chunked;
}

// A config without a training length takes kDefaultHfSeqLength capped at its position limit,
// and says so under `key_path`.
void default_seq_length(ModelSpec& m, const std::string& key_path, const FieldKeys& keys,
                        std::vector<InputWarning>& warnings) {
  std::string took;
  if (m.max_position_embeddings > 0) {
    m.seq_length = std::min(m.max_position_embeddings, kDefaultHfSeqLength);
    took = "; took " + std::to_string(m.seq_length) + " = min(max_position_embeddings " +
           std::to_string(m.max_position_embeddings) +
           (keys.max_position_embeddings_given ? "" : " (the class default; the config omits it)") + ", " +
           std::to_string(kDefaultHfSeqLength) +
           "): the position limit is what the positions allow, not the length a run trains at";
  } else {
    m.seq_length = kDefaultHfSeqLength;
    took = " nor a position limit; took " + std::to_string(m.seq_length);
  }
  warnings.push_back({key_path, kNoTrainingLength + took +
                                    ". Set training.seq_length (--seq-length) to the length you "
                                    "train at"});
}

// Dropout rates, which decide whether masks are kept (activation_tensors_per_layer): the
// residual branches' (hidden_dropout; GPT-2 and Phi call it resid_pdrop) and the attention
// probabilities' (attention_dropout, attn_pdrop), each at its transformers config class's default
// when absent: GPT2Config 0.1, every other class here 0.0 (the Llama-like classes have no hidden
// dropout at all).
void read_dropout(HfConfig& c, HfFamily family, ModelSpec& m) {
  const double fallback = family == HfFamily::Gpt2 ? 0.1 : 0.0;
  auto probability = [&](const std::vector<std::string>& names) {
    std::string used;
    const json* v = c.get_any(names, used);
    return v ? read_dropout_probability(*v, c.path(used)) : fallback;
  };
  m.hidden_dropout = probability({"hidden_dropout", "resid_pdrop"});
  m.attention_dropout = probability({"attention_dropout", "attn_pdrop"});
}

// The sizes. GPT-2, BLOOM and Falcon spell them their own way; HF maps the spellings
// (attribute_map).
void read_sizes(HfConfig& c, HfFamily family, ModelSpec& m, FieldKeys& keys) {
  using Names = std::vector<std::string>;
  const bool gpt_names = family == HfFamily::Gpt2 || family == HfFamily::Bloom;
  m.hidden_size = c.required(family == HfFamily::Gpt2    ? Names{"n_embd", "hidden_size"}
                             : family == HfFamily::Bloom ? Names{"hidden_size", "n_embed"}
                                                         : Names{"hidden_size"},
                             keys.hidden_size);
  m.num_layers = c.required(gpt_names ? Names{"n_layer", "num_hidden_layers"}
                            : family == HfFamily::Falcon ? Names{"num_hidden_layers", "n_layer"}
                                                         : Names{"num_hidden_layers"},
                            keys.num_layers);
  m.num_attention_heads =
      c.required(gpt_names ? Names{"n_head", "num_attention_heads"}
                 : family == HfFamily::Falcon ? Names{"num_attention_heads", "n_head"}
                                              : Names{"num_attention_heads"},
                 keys.num_attention_heads);
  m.vocab_size = c.required({"vocab_size"}, keys.vocab_size);
}

// Biases, as each modeling file builds its linears.
void read_biases(HfConfig& c, HfFamily family, ModelSpec& m) {
  const std::string& type = c.type();
  bool attention_bias = false, mlp_bias = false, qkv_only = false;
  switch (family) {
    case HfFamily::Gpt2:
    case HfFamily::Bloom:
    case HfFamily::Phi: attention_bias = mlp_bias = true; break;
    case HfFamily::GptNeox:  // the MLP always has biases; attention unless attention_bias=false
      attention_bias = c.bool_or("attention_bias", true);
      mlp_bias = true;
      break;
    case HfFamily::Falcon: attention_bias = mlp_bias = c.bool_or("bias", false); break;
    case HfFamily::LlamaLike:
      if (type == "qwen2") qkv_only = true;  // Qwen2Attention: q/k/v biases, o_proj none
      if (type == "qwen2_moe") qkv_only = c.bool_or("qkv_bias", true);
      if (type == "llama" || gemma_type(type) || type == "olmo2" || type == "qwen3" ||
          type == "qwen3_moe" || type == "deepseek_v2" || type == "deepseek_v3" ||
          type == "llama4_text")
        attention_bias = c.bool_or("attention_bias", false);
      // GptOssConfig: attention biases (transformers 4.57 forces them on); its experts have
      // biases, always.
      if (type == "gpt_oss") {
        attention_bias = c.bool_or("attention_bias", true);
        mlp_bias = true;
      }
      // PhimoeConfig: attention_bias (false by default) on q, k, v and o; its experts and
      // router have none.
      if (type == "phimoe") attention_bias = c.bool_or("attention_bias", false);
      if (type == "llama" || type == "deepseek_v2" || type == "deepseek_v3")
        mlp_bias = c.bool_or("mlp_bias", false);
      break;
  }
  m.qkv_bias = attention_bias || qkv_only;
  m.attention_output_bias = attention_bias;
  m.mlp_bias = mlp_bias;
  // PhiForCausalLM's lm_head has a bias; PhimoeForCausalLM's with lm_head_bias.
  m.output_bias = family == HfFamily::Phi || (type == "phimoe" && c.bool_or("lm_head_bias", false));
}

// Norms per block and parallel attention + MLP. A parallel block has the parameters and FLOPs
// of a sequential one; what differs is the activations (model.cpp counts the shared input
// twice), so it is read and warned about.
void read_block_layout(HfConfig& c, HfFamily family, bool falcon_new, ModelSpec& m,
                       std::vector<InputWarning>& warnings) {
  const std::string& type = c.type();
  std::string parallel_key;
  if (family == HfFamily::GptNeox && c.bool_or("use_parallel_residual", true))
    parallel_key = "use_parallel_residual";
  if (family == HfFamily::Falcon) {
    if (falcon_new) {
      // ln_attn and ln_mlp, or one shared norm with num_ln_in_parallel_attn = 1.
      m.layer_norms = c.int_or("num_ln_in_parallel_attn", 2) == 1 ? 1 : 2;
      parallel_key = "new_decoder_architecture";
    } else if (c.bool_or("parallel_attn", true)) {
      m.layer_norms = 1;  // input_layernorm feeds both
      parallel_key = "parallel_attn";
    }
  }
  if (family == HfFamily::Phi) {
    m.layer_norms = 1;  // PhiDecoderLayer: input_layernorm feeds attention and MLP
    parallel_key = "model_type";
    if (c.bool_or("qk_layernorm", false))
      c.warn(warnings, "qk_layernorm",
             "Phi's q/k LayerNorms (4 x head_dim parameters per layer) are not counted");
  }
  // Pre and post norms around attention and MLP.
  if (type == "gemma2" || type == "gemma3_text") m.layer_norms = 4;
  if (!parallel_key.empty())
    c.warn(warnings, parallel_key,
           "parallel attention and MLP: parameters and FLOPs as written; activation memory is "
           "counted as for a sequential block (the shared input twice, about 2 of ~34 sbh)");
}

// One config read as the transformers class of model_type `type` builds its model.
ModelSpec parse_typed(const json& cfg, const std::string& origin, const std::string& type,
                      FieldKeys& keys, std::vector<InputWarning>& warnings) {
  const HfFamily family = family_of(type);
  HfConfig c(cfg, origin, type);
  c.get("model_type");

  ModelSpec m;
  m.name = origin;
  m.source = "Hugging Face config.json, model_type " + type;
  read_sizes(c, family, m, keys);

  // Key/value heads: num_key_value_heads (GQA; MQA at 1) where the family has it; Falcon's
  // multi_query (one) or, with the new decoder architecture, num_kv_heads.
  keys.num_kv_heads = "num_key_value_heads";
  m.num_kv_heads = m.num_attention_heads;
  if (family == HfFamily::LlamaLike || family == HfFamily::Phi) {
    m.num_kv_heads = c.int_or("num_key_value_heads", m.num_attention_heads);
  }
  const bool falcon_new = family == HfFamily::Falcon && c.bool_or("new_decoder_architecture", false);
  if (family == HfFamily::Falcon) {
    const bool multi_query = c.bool_or("multi_query", true);  // FalconConfig's default
    keys.num_kv_heads = falcon_new ? "num_kv_heads" : "multi_query";
    if (falcon_new) m.num_kv_heads = c.int_or("num_kv_heads", m.num_attention_heads);
    else m.num_kv_heads = multi_query ? 1 : m.num_attention_heads;
  }

  // head_dim: Llama-like models may decouple it from hidden / heads (Gemma: 256, its default).
  const bool mla = type == "deepseek_v2" || type == "deepseek_v3";
  if (family == HfFamily::LlamaLike && !mla) {
    // Class defaults: 256 (Gemma), 64 (GptOssConfig), 128 (Llama4TextConfig, whose explicit
    // null is hidden / heads); 0 is hidden / heads.
    std::int64_t fallback = 0;
    if (gemma_type(type)) fallback = 256;
    if (type == "gpt_oss") fallback = 64;
    if (type == "llama4_text" && !c.has("head_dim")) fallback = 128;
    m.attention_head_dim = c.int_or("head_dim", fallback);
    normalize_head_dim(m);
  }
  if (mla) read_hf_mla(c, m);
  // q_norm and k_norm over each head (Qwen3Attention, Gemma3Attention).
  m.qk_norm = type == "qwen3" || type == "qwen3_moe" || type == "gemma3_text" || type == "olmo2";
  m.qk_norm_projection = type == "olmo2";  // Olmo2Attention: over num_heads x head_dim
  m.attention_sinks = type == "gpt_oss";               // GptOssAttention's sinks
  read_dropout(c, family, m);

  if (family == HfFamily::LlamaLike || family == HfFamily::GptNeox || family == HfFamily::Phi) {
    m.ffn_hidden_size = c.required({"intermediate_size"}, keys.ffn_hidden_size);
  } else if (const json* inner = family == HfFamily::Gpt2     ? c.get("n_inner")
                                 : family == HfFamily::Falcon ? c.get("ffn_hidden_size")
                                                              : nullptr) {
    keys.ffn_hidden_size = family == HfFamily::Gpt2 ? "n_inner" : "ffn_hidden_size";
    m.ffn_hidden_size = read_int(*inner, c.path(keys.ffn_hidden_size));
  } else {
    // GPT-2 n_inner=None, BLOOM, Falcon: 4h. Sizes are validated after parsing, so a hidden size
    // past the bound (which validation refuses) forms no product here.
    m.ffn_hidden_size = m.hidden_size <= kMaxWidth ? 4 * m.hidden_size : m.hidden_size;
    keys.ffn_hidden_size = family == HfFamily::Gpt2 ? "n_inner" : "hidden_size";
  }
  if (family == HfFamily::Bloom && c.get("n_inner"))
    c.warn(warnings, "n_inner", "BloomMLP is 4 x hidden_size whatever n_inner says: ignored");
  m.mlp = read_activation(c, family);
  if (contains(kMoeTypes, type)) read_hf_moe(c, m, warnings);
  if (type == "llama4_text") {
    // intermediate_size is the experts' and the shared expert's width (read above); the dense
    // layers' MLP is intermediate_size_mlp wide (Llama4TextConfig's default 16384).
    m.ffn_hidden_size = c.int_or("intermediate_size_mlp", 16384);
    keys.ffn_hidden_size = "intermediate_size_mlp";
  }

  // PhiMoE's blocks use LayerNorm with bias (nn.LayerNorm in modeling_phimoe.py), whatever
  // its rms_norm_eps is called.
  m.norm = family == HfFamily::LlamaLike && type != "phimoe" ? NormKind::RmsNorm : NormKind::LayerNorm;
  m.position = family == HfFamily::Gpt2    ? PositionKind::Learned
               : family == HfFamily::Bloom ? PositionKind::Alibi
                                           : PositionKind::Rotary;
  if (family == HfFamily::Falcon && c.bool_or("alibi", false)) m.position = PositionKind::Alibi;
  m.embedding_norm = family == HfFamily::Bloom;

  read_biases(c, family, m);
  read_block_layout(c, family, falcon_new, m, warnings);
  if (family == HfFamily::Gpt2 && c.bool_or("add_cross_attention", false))
    throw InputError(c.path("add_cross_attention"),
                     "cross-attention (an encoder-decoder GPT-2) is not simulated; allowed: false");

  const bool tie_default = family == HfFamily::Gpt2 || family == HfFamily::Bloom ||
                           family == HfFamily::Falcon || gemma_type(type);
  m.tied_embeddings = c.bool_or("tie_word_embeddings", tie_default);

  // Positions: n_positions (GPT-2) or max_position_embeddings; BLOOM (ALiBi) has neither and
  // Falcon's config may leave it to FalconConfig's default, 2048.
  using Names = std::vector<std::string>;
  const json* pos = c.get_any(family == HfFamily::Gpt2
                                  ? Names{"n_positions", "max_position_embeddings"}
                                  : Names{"max_position_embeddings"},
                              keys.max_position_embeddings);
  if (pos) {
    m.max_position_embeddings = read_int(*pos, c.path(keys.max_position_embeddings));
  } else if (family == HfFamily::Falcon) {
    m.max_position_embeddings = 2048;
    keys.max_position_embeddings_given = false;
  } else if (family != HfFamily::Bloom) {
    throw InputError(c.path(keys.max_position_embeddings), "missing");
  }
  read_sliding_window(c, m);
  if (type == "llama4_text") read_attention_chunks(c, m);
  // Training length: the config's own seq_length when it has one (Megatron-style configs), else
  // left to the caller (settle_seq_length).
  if (const json* seq = c.get("seq_length")) m.seq_length = read_int(*seq, c.path("seq_length"));
  c.report_unread(warnings, kCostFree, contains(kMoeTypes, type));
  return m;
}

// Llama 4's checkpoints (Llama4ForConditionalGeneration, model_type llama4) hold the text model's
// config in text_config, beside the vision encoder's: the text model is read as llama4_text and
// the encoder is said to be left out. The key names of the result carry the text_config prefix.
ModelSpec parse_llama4(const json& cfg, const std::string& origin, FieldKeys& keys,
                       std::vector<InputWarning>& warnings) {
  HfConfig c(cfg, origin, "llama4");
  c.get("model_type");
  const json* text = c.get("text_config");
  if (!text)
    throw InputError(c.path("text_config"),
                     "missing: a Llama 4 config holds the text model's fields (Llama4TextConfig) "
                     "there");
  if (!text->is_object())
    throw InputError(c.path("text_config"),
                     std::string("must be an object (Llama4TextConfig's fields), got ") + type_name(*text));
  const std::string text_origin = c.path("text_config");
  if (const json* inner = find(*text, "model_type"); inner && *inner != "llama4_text")
    warnings.push_back({key_join(text_origin, "model_type"),
                        "read as llama4_text, the class Llama4Config builds text_config with"});
  if (c.get("vision_config"))
    c.warn(warnings, "vision_config",
           "the vision encoder (Llama4VisionModel) and its projector are not simulated: the text "
           "model is, on text tokens");
  std::vector<std::string> cost_free = kCostFree;
  cost_free.insert(cost_free.end(), kLlama4WrapperCostFree.begin(), kLlama4WrapperCostFree.end());
  c.report_unread(warnings, cost_free, true);
  ModelSpec m = parse_typed(*text, text_origin, "llama4_text", keys, warnings);
  for (std::string* key : {&keys.num_layers, &keys.hidden_size, &keys.num_attention_heads,
                           &keys.num_kv_heads, &keys.ffn_hidden_size, &keys.vocab_size,
                           &keys.max_position_embeddings})
    *key = key_join("text_config", *key);
  m.name = origin;
  m.source = "Hugging Face config.json, model_type llama4 (its text_config)";
  return m;
}

}  // namespace

ModelSpec parse_hf(const json& cfg, const std::string& origin, FieldKeys& keys,
                   std::vector<InputWarning>& warnings) {
  if (!cfg.is_object())
    throw InputError(origin, std::string("a Hugging Face config must be a JSON object, got ") +
                                 type_name(cfg));
  const json* type_value = find(cfg, "model_type");
  if (!type_value)
    throw InputError(key_join(origin, "model_type"),
                     "missing; supported model_type values: " + join_list(kHfTypes));
  const std::string type = read_string(*type_value, key_join(origin, "model_type"));
  if (!contains(kHfTypes, type))
    throw InputError(key_join(origin, "model_type"),
                     "unsupported '" + type + "'" + did_you_mean(type, kHfTypes) +
                         "; supported: " + join_list(kHfTypes));
  if (type == "dbrx") return parse_dbrx(cfg, origin, keys, warnings, kCostFree);
  if (type == "llama4") return parse_llama4(cfg, origin, keys, warnings);
  return parse_typed(cfg, origin, type, keys, warnings);
}

void settle_seq_length(ModelSpec& m, const std::string& key_path, const FieldKeys& keys,
                       std::vector<InputWarning>& warnings) {
  if (m.seq_length == 0) default_seq_length(m, key_path, keys, warnings);
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
}

}  // namespace zerosim::model_detail
