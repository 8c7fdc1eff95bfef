// Reading a model from a scenario (preset name, Hugging Face config.json, inline object) and
// writing it back, with validation that names the offending key path.
#include <cstdint>
#include <fstream>
#include <map>
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

std::int64_t read_int(const json& v, const std::string& path) {
  if (!v.is_number_integer())
    throw InputError(path, std::string("must be a positive integer, got ") + type_name(v) +
                               (v.is_number() ? " " + v.dump() : ""));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw InputError(path, "must be a positive integer no larger than 2^63-1, got " + v.dump());
  const std::int64_t x = v.get<std::int64_t>();
  if (x < 1) throw InputError(path, "must be a positive integer, got " + std::to_string(x));
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

std::int64_t required_int(const json& obj, const std::vector<std::string>& names,
                          const std::string& origin, std::string& used) {
  const json* v = find_any(obj, names, used);
  if (!v)
    throw InputError(key_join(origin, names.front()),
                     "missing; a Hugging Face config of this model_type needs it" +
                         (names.size() > 1
                              ? " (or " + join_list(std::vector<std::string>(names.begin() + 1, names.end())) + ")"
                                           : std::string()));
  return read_int(*v, key_join(origin, used));
}

// Families zerosim understands. Llama-like: pre-RMSNorm, rotary, gated SiLU MLP, no biases,
// untied by default (LlamaConfig/MistralConfig/Qwen2Config default tie_word_embeddings=False).
// Qwen2's q/k/v biases (about 0.001% of parameters) are not modelled.
// gpt2: LayerNorm, learned positions, biases, GeLU, tied (PretrainedConfig default True).
// gpt_neox: LayerNorm, rotary, biases, GeLU, untied (GPTNeoXConfig default False).
// bloom: LayerNorm, ALiBi, biases, GeLU, embedding LayerNorm, tied (BloomConfig default True).
const std::vector<std::string> kHfTypes = {"llama", "mistral", "qwen2", "gpt2", "gpt_neox", "bloom"};

// Parses without the final validation, so an inline object may still fill seq_length.
ModelSpec parse_hf(const json& cfg, const std::string& origin, FieldKeys& keys) {
  if (!cfg.is_object())
    throw InputError(origin, std::string("a Hugging Face config must be a JSON object, got ") +
                                 type_name(cfg));
  const json* type_value = find(cfg, "model_type");
  if (!type_value)
    throw InputError(key_join(origin, "model_type"),
                     "missing; supported model_type values: " + join_list(kHfTypes));
  const std::string type = read_string(*type_value, key_join(origin, "model_type"));
  bool known = false;
  for (const auto& t : kHfTypes) known = known || t == type;
  if (!known)
    throw InputError(key_join(origin, "model_type"),
                     "unsupported '" + type + "'" + did_you_mean(type, kHfTypes) +
                         "; supported: " + join_list(kHfTypes));

  const bool llama_like = type == "llama" || type == "mistral" || type == "qwen2";
  const bool gpt2 = type == "gpt2";
  const bool bloom = type == "bloom";

  ModelSpec m;
  m.name = origin;
  m.source = "Hugging Face config.json, model_type " + type;
  // GPT-2 and BLOOM spell the sizes their own way; HF maps both spellings (attribute_map).
  m.hidden_size = required_int(cfg, gpt2 ? std::vector<std::string>{"n_embd", "hidden_size"}
                                    : bloom ? std::vector<std::string>{"hidden_size", "n_embed"}
                                            : std::vector<std::string>{"hidden_size"},
                               origin, keys.hidden_size);
  m.num_layers = required_int(cfg, gpt2 || bloom
                                       ? std::vector<std::string>{"n_layer", "num_hidden_layers"}
                                       : std::vector<std::string>{"num_hidden_layers"},
                              origin, keys.num_layers);
  m.num_attention_heads = required_int(cfg, gpt2 || bloom
                                                ? std::vector<std::string>{"n_head", "num_attention_heads"}
                                                : std::vector<std::string>{"num_attention_heads"},
                                       origin, keys.num_attention_heads);
  m.vocab_size = required_int(cfg, {"vocab_size"}, origin, keys.vocab_size);

  keys.num_kv_heads = "num_key_value_heads";
  const json* kv = llama_like ? find(cfg, "num_key_value_heads") : nullptr;
  m.num_kv_heads = kv ? read_int(*kv, key_join(origin, keys.num_kv_heads)) : m.num_attention_heads;

  // zerosim assumes head_dim = hidden / heads; configs that decouple them are not supported.
  if (const json* hd = find(cfg, "head_dim")) {
    const std::int64_t d = read_int(*hd, key_join(origin, "head_dim"));
    if (m.hidden_size % m.num_attention_heads == 0 && d != m.hidden_size / m.num_attention_heads)
      throw InputError(key_join(origin, "head_dim"),
                       "must equal hidden_size / num_attention_heads (" +
                           std::to_string(m.hidden_size / m.num_attention_heads) + "), got " +
                           std::to_string(d) + "; decoupled head_dim is not supported");
  }

  if (llama_like || type == "gpt_neox") {
    m.ffn_hidden_size = required_int(cfg, {"intermediate_size"}, origin, keys.ffn_hidden_size);
  } else if (gpt2 && find(cfg, "n_inner")) {
    m.ffn_hidden_size = read_int(*find(cfg, "n_inner"), key_join(origin, "n_inner"));
    keys.ffn_hidden_size = "n_inner";
  } else {
    m.ffn_hidden_size = 4 * m.hidden_size;  // GPT-2 n_inner=None and BLOOM: 4h
    keys.ffn_hidden_size = gpt2 ? "n_inner" : "hidden_size";
  }

  // Activation. Llama-like MLPs are gated (three matrices) whatever the gate's function, so any
  // SiLU spelling maps to Swiglu; the others choose between GeLU and ReLU.
  const std::string act_key = gpt2 ? "activation_function" : "hidden_act";
  if (const json* act = bloom ? nullptr : find(cfg, act_key)) {
    const std::string a = read_string(*act, key_join(origin, act_key));
    const std::vector<std::string> gated = {"silu", "swish", "swiglu"};
    const std::vector<std::string> plain = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh",
                                            "gelu_accurate", "quick_gelu", "relu"};
    const auto& allowed = llama_like ? gated : plain;
    bool ok = false;
    for (const auto& x : allowed) ok = ok || x == a;
    if (!ok)
      throw InputError(key_join(origin, act_key), "unsupported '" + a + "' for model_type " + type +
                                                      did_you_mean(a, allowed) +
                                                      "; allowed: " + join_list(allowed));
    m.mlp = llama_like ? MlpKind::Swiglu : a == "relu" ? MlpKind::Relu : MlpKind::Gelu;
  } else {
    m.mlp = llama_like ? MlpKind::Swiglu : MlpKind::Gelu;
  }

  m.norm = llama_like ? NormKind::RmsNorm : NormKind::LayerNorm;
  m.position = gpt2 ? PositionKind::Learned : bloom ? PositionKind::Alibi : PositionKind::Rotary;
  m.qkv_bias = m.attention_output_bias = m.mlp_bias = !llama_like;
  m.embedding_norm = bloom;

  const bool tie_default = gpt2 || bloom;
  const json* tie = find(cfg, "tie_word_embeddings");
  m.tied_embeddings = tie ? read_bool(*tie, key_join(origin, "tie_word_embeddings")) : tie_default;

  // Positions: n_positions (GPT-2) or max_position_embeddings; BLOOM (ALiBi) has neither.
  const json* pos = find_any(cfg, gpt2 ? std::vector<std::string>{"n_positions", "max_position_embeddings"}
                                       : std::vector<std::string>{"max_position_embeddings"},
                             keys.max_position_embeddings);
  if (pos) {
    m.max_position_embeddings = read_int(*pos, key_join(origin, keys.max_position_embeddings));
  } else if (!bloom) {
    throw InputError(key_join(origin, keys.max_position_embeddings), "missing");
  }
  // Training length: the config's own seq_length when it has one, else the position limit.
  if (const json* seq = find(cfg, "seq_length")) {
    m.seq_length = read_int(*seq, key_join(origin, "seq_length"));
  } else {
    m.seq_length = m.max_position_embeddings;  // 0 for BLOOM: must be given inline
    keys.seq_length = pos ? keys.max_position_embeddings : "seq_length";
  }
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  return m;
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

ModelSpec from_hf_file(const std::string& file, const std::string& key_path, bool validate) {
  const json cfg = read_json_file(file, key_path);
  const std::string origin = key_path + "(" + file + ")";
  FieldKeys keys;
  ModelSpec m = parse_hf(cfg, origin, keys);
  m.name = file;
  m.source += ": " + file;
  if (validate) {
    if (m.seq_length == 0)
      throw InputError(key_join(origin, "seq_length"),
                       "missing: this config has no max_position_embeddings; give it inline, e.g. "
                       "{\"hf_config\": \"" + file + "\", \"seq_length\": 2048}");
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

ModelSpec from_object(const json& obj, const std::string& key_path) {
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
  if (const json* p = at("preset")) {
    m = model_preset(read_string(*p, path("preset")), path("preset"));
    has_base = true;
  } else if (const json* p = at("hf_config")) {
    m = from_hf_file(read_string(*p, path("hf_config")), path("hf_config"), false);
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
  set_int("seq_length", m.seq_length);
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
    if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;  // BLOOM config
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

  if (m.seq_length == 0)
    throw InputError(path("seq_length"), "missing; the base config does not give a sequence length");
  normalize_head_dim(m);
  validate_fields(m, key_path, FieldKeys{});
  return m;
}

}  // namespace

void validate_model(const ModelSpec& m, const std::string& key_path) {
  validate_fields(m, key_path, FieldKeys{});
}

ModelSpec model_from_hf_config(const nlohmann::json& config, const std::string& origin) {
  FieldKeys keys;
  ModelSpec m = parse_hf(config, origin, keys);
  if (m.seq_length == 0)
    throw InputError(key_join(origin, "seq_length"),
                     "missing: this config has no max_position_embeddings or seq_length");
  validate_fields(m, origin, keys);
  return m;
}

ModelSpec model_from_json(const nlohmann::json& value, const std::string& key_path) {
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    for (const auto& n : model_preset_names())
      if (n == s) return model_preset(s, key_path);
    if (looks_like_path(s)) return from_hf_file(s, key_path, true);
    return model_preset(s, key_path);  // throws: unknown preset, with the list
  }
  if (value.is_object()) return from_object(value, key_path);
  throw InputError(key_path, std::string("must be a preset name, a path to a Hugging Face "
                                         "config.json, or an object; got ") +
                                 value.type_name());
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
