// Reading a model from a scenario (preset name, Hugging Face config.json, inline object) and
// writing it back, with validation that names the offending key path.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/input/json_input.h"
#include "sim/model/model.h"

namespace zerosim {
namespace {

using nlohmann::json;

// Upper bounds keep every count in count_params and every FLOP product far inside int64 / double
// exactness (e.g. 3 * h * ffn * layers < 2^60). They are well above any published model.
constexpr std::int64_t kMaxLayers = 1 << 16;
constexpr std::int64_t kMaxWidth = 1 << 20;  // hidden, ffn, heads
constexpr std::int64_t kMaxTable = 1 << 24;  // vocab, sequence, positions

// The key each ModelSpec field was read from, so errors name what the user wrote.
struct FieldKeys {
  std::string num_layers = "num_layers";
  std::string hidden_size = "hidden_size";
  std::string num_attention_heads = "num_attention_heads";
  std::string num_kv_heads = "num_kv_heads";
  std::string ffn_hidden_size = "ffn_hidden_size";
  std::string vocab_size = "vocab_size";
  std::string seq_length = "seq_length";
  std::string max_position_embeddings = "max_position_embeddings";
  bool max_position_embeddings_given = true;  // false: a class default (Falcon's 2048)
};

void check_range(std::int64_t v, std::int64_t max, const std::string& path) {
  if (v < 1 || v > max)
    throw InputError(path, "must be a positive integer no larger than " + std::to_string(max) +
                               ", got " + std::to_string(v));
}

void validate_fields(const ModelSpec& m, const std::string& key_path, const FieldKeys& k) {
  check_range(m.num_layers, kMaxLayers, key_join(key_path, k.num_layers));
  check_range(m.hidden_size, kMaxWidth, key_join(key_path, k.hidden_size));
  check_range(m.num_attention_heads, kMaxWidth, key_join(key_path, k.num_attention_heads));
  check_range(m.num_kv_heads, kMaxWidth, key_join(key_path, k.num_kv_heads));
  check_range(m.ffn_hidden_size, kMaxWidth, key_join(key_path, k.ffn_hidden_size));
  check_range(m.vocab_size, kMaxTable, key_join(key_path, k.vocab_size));
  check_range(m.seq_length, kMaxTable, key_join(key_path, k.seq_length));
  check_range(m.max_position_embeddings, kMaxTable, key_join(key_path, k.max_position_embeddings));
  if (m.attention_head_dim != 0) {
    check_range(m.attention_head_dim, kMaxWidth, key_join(key_path, "head_dim"));
    // Q's width enters products with hidden and layers: bounded like the other widths.
    if (m.num_attention_heads * m.attention_head_dim > kMaxWidth)
      throw InputError(key_join(key_path, "head_dim"),
                       "heads x head_dim must be at most " + std::to_string(kMaxWidth) + ", got " +
                           std::to_string(m.num_attention_heads * m.attention_head_dim));
  }
  if (m.layer_norms < 1 || m.layer_norms > 4)
    throw InputError(key_join(key_path, "layer_norms"),
                     "must be 1 (one norm shared by a parallel block), 2 or up to 4 (pre and post "
                     "norms), got " + std::to_string(m.layer_norms));
  if (m.sliding_window != 0) check_range(m.sliding_window, kMaxTable, key_join(key_path, "sliding_window"));
  if (m.attention_head_dim == 0 && m.hidden_size % m.num_attention_heads != 0)
    throw InputError(key_join(key_path, k.num_attention_heads),
                     "must divide " + k.hidden_size + " (" + std::to_string(m.hidden_size) +
                         "), got " + std::to_string(m.num_attention_heads));
  if (m.num_attention_heads % m.num_kv_heads != 0)
    throw InputError(key_join(key_path, k.num_kv_heads),
                     "must divide " + k.num_attention_heads + " (" +
                         std::to_string(m.num_attention_heads) + "), got " +
                         std::to_string(m.num_kv_heads));
  if (m.position == PositionKind::Learned && m.seq_length > m.max_position_embeddings)
    throw InputError(key_join(key_path, k.seq_length),
                     std::to_string(m.seq_length) + " exceeds " + k.max_position_embeddings + " (" +
                         std::to_string(m.max_position_embeddings) +
                         "), the rows of the learned position table");
}

// ---- typed readers: each names the key path and what is allowed ----

const char* type_name(const json& v) { return v.type_name(); }

// An integer of at least `min` (1: a positive one, 0: a count that may be empty).
std::int64_t read_int(const json& v, const std::string& path, std::int64_t min = 1) {
  const std::string what = min == 1 ? "a positive integer" : "an integer of at least " + std::to_string(min);
  if (!v.is_number_integer())
    throw InputError(path, "must be " + what + ", got " + type_name(v) +
                               (v.is_number() ? " " + v.dump() : ""));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw InputError(path, "must be " + what + " no larger than 2^63-1, got " + v.dump());
  const std::int64_t x = v.get<std::int64_t>();
  if (x < min) throw InputError(path, "must be " + what + ", got " + std::to_string(x));
  return x;
}

bool read_bool(const json& v, const std::string& path) {
  if (!v.is_boolean())
    throw InputError(path, std::string("must be true or false, got ") + type_name(v));
  return v.get<bool>();
}

std::string read_string(const json& v, const std::string& path) {
  if (!v.is_string()) throw InputError(path, std::string("must be a string, got ") + type_name(v));
  return v.get<std::string>();
}

// One of `choices` (case-sensitive), returned as its index.
std::size_t read_choice(const json& v, const std::string& path,
                        const std::vector<std::string>& choices) {
  const std::string s = read_string(v, path);
  for (std::size_t i = 0; i < choices.size(); ++i)
    if (choices[i] == s) return i;
  throw InputError(path, "unknown value '" + s + "'" + did_you_mean(s, choices) +
                             "; allowed: " + join_list(choices));
}

const std::vector<std::string> kMlpNames = {"gelu", "swiglu", "relu", "geglu"};
const std::vector<std::string> kNormNames = {"layernorm", "rmsnorm"};
const std::vector<std::string> kPositionNames = {"learned", "rotary", "alibi"};
MlpKind mlp_at(std::size_t i) {
  constexpr MlpKind kinds[] = {MlpKind::Gelu, MlpKind::Swiglu, MlpKind::Relu, MlpKind::Geglu};
  return kinds[i];
}
NormKind norm_at(std::size_t i) { return i == 0 ? NormKind::LayerNorm : NormKind::RmsNorm; }
PositionKind position_at(std::size_t i) {
  return i == 0 ? PositionKind::Learned : i == 1 ? PositionKind::Rotary : PositionKind::Alibi;
}

// A head width equal to hidden / heads is the default, stored as 0, so that a config that spells
// it out equals one that does not (and a preset).
void normalize_head_dim(ModelSpec& m) {
  if (m.attention_head_dim != 0 && m.num_attention_heads > 0 &&
      m.hidden_size % m.num_attention_heads == 0 &&
      m.attention_head_dim == m.hidden_size / m.num_attention_heads)
    m.attention_head_dim = 0;
}

// ---- Hugging Face config.json ----
//
// Each family is read as its transformers class builds the model (the modeling_*.py module of
// that model_type), with the class defaults for fields a config leaves out. Every field of a
// config ends in one of four places:
//   modelled   read into ModelSpec (sizes, GQA/MQA, head_dim, biases, tied embeddings, norms per
//              block, sliding window in every layer, ALiBi/rotary/learned positions);
//   warned     read, but simulated otherwise than written (a parallel attention+MLP block's
//              activations, a sliding window in only some layers, Phi's q/k LayerNorms, a
//              training length the config does not give) or not known to zerosim at all;
//   refused    an InputError (an unknown model_type, an activation the family cannot have,
//              GPT-2's cross-attention);
//   silent     kCostFree below: fields that do not change parameters, FLOPs or bytes.
// Families: Llama-like (llama, mistral, qwen2, phi3, gemma, gemma2): pre-RMSNorm, rotary, gated
// MLP. gpt2: LayerNorm, learned positions, biases, GeLU, tied. gpt_neox: LayerNorm, rotary,
// parallel residual, untied. bloom: LayerNorm, ALiBi, biases, embedding LayerNorm, tied.
// falcon: LayerNorm, rotary or ALiBi, MQA/GQA, parallel block, tied. phi (Phi-2): LayerNorm,
// partial rotary, biases (also on lm_head), parallel block with one norm, untied.
const std::vector<std::string> kHfTypes = {"llama", "mistral", "qwen2", "phi3",     "gemma",
                                           "gemma2", "gpt2",   "gpt_neox", "bloom", "falcon",
                                           "phi"};

// Fields that change neither parameters, FLOPs nor bytes moved, accepted without a word, each with
// why: labels and token ids; numerics (norm epsilons, initialisation, rope frequencies and
// scaling, softmax in fp32, Llama's pretraining_tp slicing); dropout rates (the activation model
// keeps the masks whatever the rate, as Korthikanti et al. count them); kernel fusions
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
    "attention_dropout", "hidden_dropout", "attn_pdrop", "embd_pdrop", "resid_pdrop",
    "classifier_dropout", "masked_softmax_fusion", "bias_dropout_fusion", "skip_bias_add",
    "skip_bias_add_qkv", "slow_but_exact", "offset_alibi",
    "apply_residual_connection_post_layernorm", "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "summary_type",
    "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "task_specific_params", "n_ctx", "attn_logit_softcapping", "final_logit_softcapping",
    "query_pre_attn_scalar", "cache_implementation"};

enum class HfFamily { LlamaLike, Gpt2, GptNeox, Bloom, Falcon, Phi };

// A key that is absent or JSON null (HF writes e.g. "num_key_value_heads": null) counts as absent.
const json* find(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// The first of `names` present; records which one in `used`.
const json* find_any(const json& obj, const std::vector<std::string>& names, std::string& used) {
  for (const auto& n : names)
    if (const json* v = find(obj, n)) {
      used = n;
      return v;
    }
  used = names.front();
  return nullptr;
}

HfFamily family_of(const std::string& type) {
  if (type == "gpt2") return HfFamily::Gpt2;
  if (type == "gpt_neox") return HfFamily::GptNeox;
  if (type == "bloom") return HfFamily::Bloom;
  if (type == "falcon") return HfFamily::Falcon;
  if (type == "phi") return HfFamily::Phi;
  return HfFamily::LlamaLike;
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// A config being read: remembers which fields were read, so that reading ends by reporting the
// ones nothing read.
class HfConfig {
 public:
  HfConfig(const json& cfg, std::string origin, std::string type)
      : cfg_(cfg), origin_(std::move(origin)), type_(std::move(type)) {}

  const std::string& origin() const { return origin_; }
  const std::string& type() const { return type_; }
  std::string path(const std::string& key) const { return key_join(origin_, key); }

  // The field, or nullptr when absent or JSON null (HF writes e.g. "num_key_value_heads": null).
  const json* get(const std::string& key) {
    read_.insert(key);
    return find(cfg_, key);
  }
  // The first of `names` present (HF's attribute_map spellings); `used` names it, or the first.
  const json* get_any(const std::vector<std::string>& names, std::string& used) {
    for (const auto& n : names) read_.insert(n);
    return find_any(cfg_, names, used);
  }
  std::int64_t required(const std::vector<std::string>& names, std::string& used) {
    const json* v = get_any(names, used);
    if (!v)
      throw InputError(path(names.front()),
                       "missing; a Hugging Face config of model_type " + type_ + " needs it" +
                           (names.size() > 1
                                ? " (or " +
                                      join_list(std::vector<std::string>(names.begin() + 1,
                                                                         names.end())) +
                                      ")"
                                : std::string()));
    return read_int(*v, path(used));
  }
  std::int64_t int_or(const std::string& key, std::int64_t fallback) {
    const json* v = get(key);
    return v ? read_int(*v, path(key)) : fallback;
  }
  bool bool_or(const std::string& key, bool fallback) {
    const json* v = get(key);
    return v ? read_bool(*v, path(key)) : fallback;
  }

  void warn(std::vector<InputWarning>& out, const std::string& key, std::string message) const {
    out.push_back({path(key), std::move(message)});
  }

  // Fields nothing read and kCostFree does not list: reported, never dropped in silence.
  void report_unread(std::vector<InputWarning>& out) const {
    for (auto it = cfg_.begin(); it != cfg_.end(); ++it) {
      if (it->is_null() || read_.count(it.key()) || contains(kCostFree, it.key())) continue;
      out.push_back({path(it.key()),
                     "not a field zerosim reads for model_type " + type_ +
                         ": ignored; if it changes the architecture, the parameter count and "
                         "the step do not show it"});
    }
  }

 private:
  const json& cfg_;
  std::string origin_, type_;
  std::set<std::string> read_;
};

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
  if (!act) return gated ? MlpKind::Swiglu : MlpKind::Gelu;  // class defaults: silu, gelu
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
// layer_types list, where given, names each layer. A window in every layer is modelled
// (ModelSpec::sliding_window); in some layers only, every layer is costed alike, so all are
// simulated as full attention, with a warning.
void read_sliding_window(HfConfig& c, ModelSpec& m, std::vector<InputWarning>& warnings) {
  const std::string& type = c.type();
  if (type != "mistral" && type != "phi3" && type != "qwen2" && type != "gemma2") return;
  std::int64_t window = 0;
  std::int64_t windowed = 0;  // layers with the window
  std::string key = "sliding_window";
  if (type == "qwen2") {
    const bool on = c.bool_or("use_sliding_window", false);
    const json* first = c.get("max_window_layers");  // Qwen2Config's default: 28
    const std::int64_t from = first ? read_int(*first, c.path("max_window_layers"), 0) : 28;
    const json* w = c.get("sliding_window");
    if (on && w) {
      window = read_int(*w, c.path("sliding_window"));
      windowed = m.num_layers - std::min(m.num_layers, from);
      key = "use_sliding_window";
    }
  } else {
    const json* w = c.get("sliding_window");
    if (w) window = read_int(*w, c.path("sliding_window"));
    else if (type == "gemma2") window = 4096;  // Gemma2Config's default
    // Gemma 2: layers 0, 2, 4, ... (written so that no sum can overflow before validation).
    if (window > 0) windowed = type == "gemma2" ? m.num_layers / 2 + m.num_layers % 2 : m.num_layers;
  }
  if (const json* types = c.get("layer_types"); types && window > 0) {
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != m.num_layers)
      throw InputError(c.path("layer_types"),
                       "must list one entry per layer (" + std::to_string(m.num_layers) + ")");
    windowed = 0;
    for (const json& t : *types) windowed += t == "sliding_attention" ? 1 : 0;
    key = "layer_types";
  }
  if (window == 0 || windowed == 0) return;
  if (windowed == m.num_layers) {
    m.sliding_window = window;
    return;
  }
  c.warn(warnings, key,
         std::to_string(windowed) + " of " + std::to_string(m.num_layers) +
             " layers attend within a sliding window of " + std::to_string(window) +
             " tokens; zerosim costs every layer alike, so all are simulated as full attention "
             "(exact while the sequence is no longer than the window)");
}

// Parses without the final validation and without the training length when the config gives
// none (seq_length 0): an inline object may still give it.
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
  const HfFamily family = family_of(type);
  HfConfig c(cfg, origin, type);
  c.get("model_type");

  ModelSpec m;
  m.name = origin;
  m.source = "Hugging Face config.json, model_type " + type;
  // GPT-2, BLOOM and Falcon spell the sizes their own way; HF maps the spellings (attribute_map).
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
  if (family == HfFamily::LlamaLike) {
    const bool gemma = type == "gemma" || type == "gemma2";
    m.attention_head_dim = c.int_or("head_dim", gemma ? 256 : 0);
    normalize_head_dim(m);
  }

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

  m.norm = family == HfFamily::LlamaLike ? NormKind::RmsNorm : NormKind::LayerNorm;
  m.position = family == HfFamily::Gpt2    ? PositionKind::Learned
               : family == HfFamily::Bloom ? PositionKind::Alibi
                                           : PositionKind::Rotary;
  if (family == HfFamily::Falcon && c.bool_or("alibi", false)) m.position = PositionKind::Alibi;
  m.embedding_norm = family == HfFamily::Bloom;

  // Biases, as each modeling file builds its linears.
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
      if (type == "llama" || type == "gemma" || type == "gemma2")
        attention_bias = c.bool_or("attention_bias", false);
      if (type == "llama") mlp_bias = c.bool_or("mlp_bias", false);
      break;
  }
  m.qkv_bias = attention_bias || qkv_only;
  m.attention_output_bias = attention_bias;
  m.mlp_bias = mlp_bias;
  m.output_bias = family == HfFamily::Phi;  // PhiForCausalLM's lm_head has a bias

  // Norms per block and parallel attention + MLP. A parallel block has the parameters and FLOPs
  // of a sequential one; what differs is the activations (model.cpp counts the shared input
  // twice), so it is read and warned about.
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
  if (type == "gemma2") m.layer_norms = 4;  // pre and post norms around attention and MLP
  if (!parallel_key.empty())
    c.warn(warnings, parallel_key,
           "parallel attention and MLP: parameters and FLOPs as written; activation memory is "
           "counted as for a sequential block (the shared input twice, about 2 of ~34 sbh)");
  if (family == HfFamily::Gpt2 && c.bool_or("add_cross_attention", false))
    throw InputError(c.path("add_cross_attention"),
                     "cross-attention (an encoder-decoder GPT-2) is not simulated; allowed: false");

  const bool tie_default = family == HfFamily::Gpt2 || family == HfFamily::Bloom ||
                           family == HfFamily::Falcon || type == "gemma" || type == "gemma2";
  m.tied_embeddings = c.bool_or("tie_word_embeddings", tie_default);

  // Positions: n_positions (GPT-2) or max_position_embeddings; BLOOM (ALiBi) has neither and
  // Falcon's config may leave it to FalconConfig's default, 2048.
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
  read_sliding_window(c, m, warnings);
  // Training length: the config's own seq_length when it has one (Megatron-style configs), else
  // left to the caller (settle_seq_length).
  if (const json* seq = c.get("seq_length")) m.seq_length = read_int(*seq, c.path("seq_length"));
  c.report_unread(warnings);
  return m;
}

// The message of the warning settle_seq_length gives starts with this, so that a training length
// set afterwards (set_training_seq_length) can retract it.
const std::string kNoTrainingLength = "the config gives no training sequence length";

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

// Once parsing and any inline override are done: the training length defaulted where still
// unknown (seq_length 0); a config without a position limit (ALiBi: BLOOM) takes it as one.
void settle_seq_length(ModelSpec& m, const std::string& key_path, const FieldKeys& keys,
                       std::vector<InputWarning>& warnings) {
  if (m.seq_length == 0) default_seq_length(m, key_path, keys, warnings);
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
}

json read_json_file(const std::string& file, const std::string& key_path) {
  return read_json_input_file(file, key_path,
                              "cannot open Hugging Face config '" + file +
                                  "' (paths are relative to the working directory)");
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() >= 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

// `keys` receives the config's spellings; `complete`: the file is the whole model (not the base
// of an inline object), so its training length is defaulted here and it is validated.
ModelSpec from_hf_file(const std::string& file, const std::string& key_path, bool complete,
                       FieldKeys& keys, std::vector<InputWarning>& warnings) {
  const json cfg = read_json_file(file, key_path);
  const std::string origin = key_path + "(" + file + ")";
  ModelSpec m = parse_hf(cfg, origin, keys, warnings);
  m.name = file;
  m.source += ": " + file;
  if (complete) {
    settle_seq_length(m, key_join(origin, "seq_length"), keys, warnings);
    validate_fields(m, origin, keys);
  }
  return m;
}

// ---- inline object ----

const std::vector<std::string> kObjectKeys = {
    "preset", "hf_config", "name", "source", "num_layers", "hidden_size", "num_attention_heads",
    "num_kv_heads", "ffn_hidden_size", "mlp", "vocab_size", "seq_length", "tied_embeddings",
    "max_position_embeddings", "norm", "position", "linear_bias", "qkv_bias",
    "attention_output_bias", "mlp_bias", "output_bias", "embedding_norm", "head_dim",
    "layer_norms", "sliding_window"};

ModelSpec from_object(const json& obj, const std::string& key_path,
                      std::vector<InputWarning>& warnings) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const auto& k : kObjectKeys) known = known || k == it.key();
    if (!known)
      throw InputError(key_join(key_path, it.key()),
                       "unknown key" + did_you_mean(it.key(), kObjectKeys) +
                           "; allowed: " + join_list(kObjectKeys));
  }
  auto at = [&](const char* k) -> const json* {
    auto it = obj.find(k);
    return it == obj.end() ? nullptr : &*it;
  };
  auto path = [&](const char* k) { return key_join(key_path, k); };

  if (at("preset") && at("hf_config"))
    throw InputError(path("hf_config"), "give either preset or hf_config as the base, not both");

  ModelSpec m;
  bool has_base = false;
  FieldKeys hf_keys;  // the base config's spellings, for its defaulted training length
  if (const json* p = at("preset")) {
    m = model_preset(read_string(*p, path("preset")), path("preset"));
    has_base = true;
  } else if (const json* p = at("hf_config")) {
    m = from_hf_file(read_string(*p, path("hf_config")), path("hf_config"), false, hf_keys,
                     warnings);
    has_base = true;
  }

  // Without a base, the case format describes a Megatron-style model: the MLP kind decides the
  // rest. gelu/relu -> GPT (LayerNorm, learned positions, biases, tied, ffn 4h);
  // swiglu/geglu -> Llama (RMSNorm, rotary, no biases, untied; ffn_hidden_size required).
  if (!has_base) {
    m.name = "inline";
    m.mlp = at("mlp") ? mlp_at(read_choice(*at("mlp"), path("mlp"), kMlpNames)) : MlpKind::Gelu;
    const bool llama = m.mlp == MlpKind::Swiglu || m.mlp == MlpKind::Geglu;
    m.norm = llama ? NormKind::RmsNorm : NormKind::LayerNorm;
    m.position = llama ? PositionKind::Rotary : PositionKind::Learned;
    m.qkv_bias = m.attention_output_bias = m.mlp_bias = !llama;
    m.tied_embeddings = !llama;
    const char* required[] = {"num_layers", "hidden_size", "num_attention_heads", "vocab_size",
                              "seq_length"};
    for (const char* k : required)
      if (!at(k)) throw InputError(path(k), "missing; an inline model needs it (or a preset)");
    if (llama && !at("ffn_hidden_size"))
      throw InputError(path("ffn_hidden_size"),
                       "missing; required with mlp \"" + to_string(m.mlp) + "\"");
  }

  bool overridden = false;  // architecture changed relative to the base
  auto set_int = [&](const char* k, std::int64_t& field) {
    if (const json* v = at(k)) {
      const std::int64_t x = read_int(*v, path(k));
      overridden = overridden || x != field;
      field = x;
    }
  };
  auto set_bool = [&](const char* k, bool& field) {
    if (const json* v = at(k)) {
      const bool x = read_bool(*v, path(k));
      overridden = overridden || x != field;
      field = x;
    }
  };
  set_int("num_layers", m.num_layers);
  set_int("hidden_size", m.hidden_size);
  set_int("num_attention_heads", m.num_attention_heads);
  set_int("ffn_hidden_size", m.ffn_hidden_size);
  set_int("vocab_size", m.vocab_size);
  // Giving the length a Hugging Face base lacks is no change to it (a preset's own is).
  const bool base_has_length = m.seq_length != 0;
  const bool changed_before = overridden;
  set_int("seq_length", m.seq_length);
  if (!base_has_length) overridden = changed_before;
  set_int("max_position_embeddings", m.max_position_embeddings);
  set_int("num_kv_heads", m.num_kv_heads);
  set_bool("tied_embeddings", m.tied_embeddings);
  if (const json* v = at("linear_bias")) {  // all three; the keys below refine it
    const bool x = read_bool(*v, path("linear_bias"));
    overridden = overridden || x != m.qkv_bias || x != m.attention_output_bias || x != m.mlp_bias;
    m.qkv_bias = m.attention_output_bias = m.mlp_bias = x;
  }
  set_bool("qkv_bias", m.qkv_bias);
  set_bool("attention_output_bias", m.attention_output_bias);
  set_bool("mlp_bias", m.mlp_bias);
  set_bool("output_bias", m.output_bias);
  set_bool("embedding_norm", m.embedding_norm);
  set_int("head_dim", m.attention_head_dim);
  set_int("layer_norms", m.layer_norms);
  set_int("sliding_window", m.sliding_window);
  if (!has_base) {
    if (!at("num_kv_heads")) m.num_kv_heads = m.num_attention_heads;
    // Derived before validate_model checks sizes: keep the product inside int64.
    if (!at("ffn_hidden_size")) {
      if (m.hidden_size > (std::int64_t{1} << 40)) {
        throw InputError(path("hidden_size"), "must be at most 2^40");
      }
      m.ffn_hidden_size = 4 * m.hidden_size;
    }
    if (!at("max_position_embeddings")) m.max_position_embeddings = m.seq_length;
  } else {
    settle_seq_length(m, path("seq_length"), hf_keys, warnings);  // an HF config's
    if (const json* v = at("mlp")) {
      const MlpKind x = mlp_at(read_choice(*v, path("mlp"), kMlpNames));
      overridden = overridden || x != m.mlp;
      m.mlp = x;
    }
  }
  if (const json* v = at("norm")) {
    const NormKind x = norm_at(read_choice(*v, path("norm"), kNormNames));
    overridden = overridden || x != m.norm;
    m.norm = x;
  }
  if (const json* v = at("position")) {
    const PositionKind x = position_at(read_choice(*v, path("position"), kPositionNames));
    overridden = overridden || x != m.position;
    m.position = x;
  }
  if (has_base && overridden) m.name += "-modified";
  if (const json* v = at("name")) m.name = read_string(*v, path("name"));
  if (const json* v = at("source")) m.source = read_string(*v, path("source"));

  normalize_head_dim(m);
  validate_fields(m, key_path, FieldKeys{});
  return m;
}

}  // namespace

void validate_model(const ModelSpec& m, const std::string& key_path) {
  validate_fields(m, key_path, FieldKeys{});
}

ModelSpec model_from_hf_config(const nlohmann::json& config, const std::string& origin,
                               std::vector<InputWarning>* warnings) {
  std::vector<InputWarning> found;
  FieldKeys keys;
  ModelSpec m = parse_hf(config, origin, keys, found);
  settle_seq_length(m, key_join(origin, "seq_length"), keys, found);
  validate_fields(m, origin, keys);
  if (warnings) warnings->insert(warnings->end(), found.begin(), found.end());
  return m;
}

bool model_string_is_file(const std::string& s) {
  const std::vector<std::string> presets = model_preset_names();
  if (contains(presets, s)) return false;
  std::error_code ec;
  return looks_like_path(s) || std::filesystem::is_regular_file(s, ec);
}

ModelSpec model_from_json(const nlohmann::json& value, const std::string& key_path,
                          std::vector<InputWarning>* warnings) {
  std::vector<InputWarning> found;
  ModelSpec m;
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (!model_string_is_file(s)) return model_preset(s, key_path);  // unknown: lists presets
    FieldKeys keys;
    m = from_hf_file(s, key_path, true, keys, found);
  } else if (value.is_object()) {
    m = from_object(value, key_path, found);
  } else {
    throw InputError(key_path, std::string("must be a preset name, a path to a Hugging Face "
                                           "config.json, or an object; got ") +
                                   value.type_name());
  }
  if (warnings) warnings->insert(warnings->end(), found.begin(), found.end());
  return m;
}

void set_training_seq_length(ModelSpec& m, std::int64_t seq_length, const std::string& key_path,
                             std::vector<InputWarning>& warnings) {
  check_range(seq_length, kMaxTable, key_path);
  if (m.position == PositionKind::Learned && seq_length > m.max_position_embeddings)
    throw InputError(key_path, std::to_string(seq_length) + " exceeds model.max_position_embeddings (" +
                                   std::to_string(m.max_position_embeddings) +
                                   "), the rows of the learned position table");
  m.seq_length = seq_length;
  std::erase_if(warnings, [](const InputWarning& w) {
    return w.message.rfind(kNoTrainingLength, 0) == 0;
  });
}

nlohmann::json model_to_json(const ModelSpec& m) {
  json j;
  j["name"] = m.name;
  j["num_layers"] = m.num_layers;
  j["hidden_size"] = m.hidden_size;
  j["num_attention_heads"] = m.num_attention_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["ffn_hidden_size"] = m.ffn_hidden_size;
  j["mlp"] = to_string(m.mlp);
  j["vocab_size"] = m.vocab_size;
  j["seq_length"] = m.seq_length;
  j["tied_embeddings"] = m.tied_embeddings;
  j["max_position_embeddings"] = m.max_position_embeddings;
  j["norm"] = to_string(m.norm);
  j["position"] = to_string(m.position);
  // Fields added for Hugging Face families are written only where they differ from the
  // default, so that the echo of a preset or a case-format model keeps its keys.
  if (m.linear_bias() || (!m.qkv_bias && !m.attention_output_bias && !m.mlp_bias)) {
    j["linear_bias"] = m.linear_bias();
  } else {
    j["qkv_bias"] = m.qkv_bias;
    j["attention_output_bias"] = m.attention_output_bias;
    j["mlp_bias"] = m.mlp_bias;
  }
  if (m.output_bias) j["output_bias"] = true;
  j["embedding_norm"] = m.embedding_norm;
  if (m.attention_head_dim != 0) j["head_dim"] = m.attention_head_dim;
  if (m.layer_norms != 2) j["layer_norms"] = m.layer_norms;
  if (m.sliding_window != 0) j["sliding_window"] = m.sliding_window;
  j["source"] = m.source;
  return j;
}

}  // namespace zerosim
