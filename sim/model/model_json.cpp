// Reading a model from a scenario (preset name, Hugging Face config.json, inline object) and
// writing it back, with validation that names the offending key path. The config.json itself
// is read by hf_config.cpp.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/input/json_input.h"
#include "sim/model/hf_config.h"
#include "sim/model/json_readers.h"
#include "sim/model/model.h"

namespace zerosim {
// The bounds, field spellings and typed readers shared with hf_config.cpp.
using namespace model_detail;

namespace {

void check_range(std::int64_t v, std::int64_t max, const std::string& path) {
  if (v < 1 || v > max)
    throw InputError(path, "must be a positive integer no larger than " + std::to_string(max) +
                               ", got " + std::to_string(v));
}

// The experts and the latent attention. The bound on the experts' summed width keeps an MoE
// layer's parameters times the layers inside int64, as kMaxWidth does for a dense one.
constexpr std::int64_t kMaxExperts = 1 << 16;
constexpr std::int64_t kMaxRoutedWidth = 1 << 22;  // num_experts x expert_ffn_hidden_size

// Megatron-core's checks on group-limited routing (router.py, topk_routing_with_score_function
// via group_limited_topk): equal groups, no more selected groups than groups, and enough experts
// in the selected groups for the top_k.
void validate_router_groups(const MoeSpec& e, const std::string& moe) {
  const std::string groups = key_join(moe, "router_num_groups");
  const std::string topk = key_join(moe, "router_group_topk");
  if ((e.router_num_groups == 0) != (e.router_group_topk == 0))
    throw InputError(e.router_num_groups == 0 ? groups : topk,
                     "missing; group-limited routing needs router_num_groups and "
                     "router_group_topk together");
  if (e.router_num_groups == 0) return;
  if (e.router_num_groups > e.num_experts || e.num_experts % e.router_num_groups != 0)
    throw InputError(groups, "must divide num_experts (" + std::to_string(e.num_experts) +
                                 ") into equal groups, got " +
                                 std::to_string(e.router_num_groups));
  if (e.router_group_topk > e.router_num_groups)
    throw InputError(topk, "must be between 1 and router_num_groups (" +
                               std::to_string(e.router_num_groups) + "), got " +
                               std::to_string(e.router_group_topk));
  if (e.router_group_topk * (e.num_experts / e.router_num_groups) < e.top_k)
    throw InputError(topk, "leaves " +
                               std::to_string(e.router_group_topk *
                                              (e.num_experts / e.router_num_groups)) +
                               " experts to choose top_k " + std::to_string(e.top_k) +
                               " from; allowed: router_group_topk x num_experts / "
                               "router_num_groups >= top_k");
}
void validate_moe(const ModelSpec& m, const std::string& key_path) {
  if (m.moe.num_experts != 0) {
    const MoeSpec& e = m.moe;
    const std::string moe = key_join(key_path, "moe");
    check_range(e.num_experts, kMaxExperts, key_join(moe, "num_experts"));
    check_range(e.expert_ffn_hidden_size, kMaxWidth, key_join(moe, "expert_ffn_hidden_size"));
    if (e.top_k < 1 || e.top_k > e.num_experts)
      throw InputError(key_join(moe, "top_k"), "must be between 1 and num_experts (" +
                                                   std::to_string(e.num_experts) + "), got " +
                                                   std::to_string(e.top_k));
    if (e.num_experts * e.expert_ffn_hidden_size > kMaxRoutedWidth)
      throw InputError(key_join(moe, "num_experts"),
                       "num_experts x expert_ffn_hidden_size must be at most " +
                           std::to_string(kMaxRoutedWidth) + ", got " +
                           std::to_string(e.num_experts * e.expert_ffn_hidden_size));
    if (e.shared_ffn_hidden_size != 0)
      check_range(e.shared_ffn_hidden_size, kMaxWidth, key_join(moe, "shared_ffn_hidden_size"));
    if (e.first_k_dense < 0 || e.first_k_dense >= m.num_layers)
      throw InputError(key_join(moe, "first_k_dense"),
                       "must be a count of leading dense layers from 0 to num_layers - 1 (" +
                           std::to_string(m.num_layers - 1) + "), got " + std::to_string(e.first_k_dense));
    check_range(e.layer_freq, kMaxLayers, key_join(moe, "moe_layer_freq"));
    if (e.shared_expert_gate && e.shared_ffn_hidden_size == 0)
      throw InputError(key_join(moe, "shared_expert_gate"),
                       "gates a shared expert: needs shared_ffn_hidden_size > 0");
    validate_router_groups(e, moe);
  }
  if (m.mla.kv_lora_rank != 0) {
    const MlaSpec& a = m.mla;
    const std::string mla = key_join(key_path, "mla");
    check_range(a.kv_lora_rank, kMaxWidth, key_join(mla, "kv_lora_rank"));
    if (a.q_lora_rank != 0) check_range(a.q_lora_rank, kMaxWidth, key_join(mla, "q_lora_rank"));
    check_range(a.qk_nope_head_dim, kMaxWidth, key_join(mla, "qk_nope_head_dim"));
    check_range(a.qk_rope_head_dim, kMaxWidth, key_join(mla, "qk_rope_head_dim"));
    check_range(a.v_head_dim, kMaxWidth, key_join(mla, "v_head_dim"));
    const std::int64_t widest = std::max(a.qk_nope_head_dim + a.qk_rope_head_dim,
                                         a.qk_nope_head_dim + a.v_head_dim);
    if (m.num_attention_heads * widest > kMaxWidth)
      throw InputError(key_join(mla, "qk_nope_head_dim"),
                       "heads x the widest head (" + std::to_string(widest) +
                           ") must be at most " + std::to_string(kMaxWidth));
    if (m.num_kv_heads != m.num_attention_heads)
      throw InputError(key_join(key_path, "num_kv_heads"),
                       "MLA decompresses keys and values for every head: must equal "
                       "num_attention_heads (" + std::to_string(m.num_attention_heads) + ")");
  }
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
  if (m.qk_norm_projection && !m.qk_norm)
    throw InputError(key_join(key_path, "qk_norm_projection"),
                     "says how wide the q/k norms are: needs qk_norm true");
  if (m.sliding_window_layers < 0 || m.sliding_window_layers > m.num_layers)
    throw InputError(key_join(key_path, "sliding_window_layers"),
                     "must be 1 to num_layers (" + std::to_string(m.num_layers) +
                         ") layers attending within sliding_window, or 0 for every layer, got " +
                         std::to_string(m.sliding_window_layers));
  if (m.attention_chunk_size != 0)
    check_range(m.attention_chunk_size, kMaxTable, key_join(key_path, "attention_chunk_size"));
  if (m.chunked_attention_layers < 0 || m.chunked_attention_layers > m.num_layers)
    throw InputError(key_join(key_path, "chunked_attention_layers"),
                     "must be 1 to num_layers (" + std::to_string(m.num_layers) +
                         ") layers attending within chunks of attention_chunk_size, or 0 for "
                         "every layer, got " + std::to_string(m.chunked_attention_layers));
  if (m.attention_chunk_size != 0 && m.sliding_window != 0)
    throw InputError(key_join(key_path, "attention_chunk_size"),
                     "a model attends either within a sliding window or within chunks: remove "
                     "sliding_window or attention_chunk_size");
  if (m.mtp_num_layers < 0 || m.mtp_num_layers > m.num_layers)
    throw InputError(key_join(key_path, "mtp_num_layers"),
                     "must be 0 (no multi-token prediction) to num_layers (" +
                         std::to_string(m.num_layers) + "), got " + std::to_string(m.mtp_num_layers));
  if (m.attention_head_dim == 0 && m.hidden_size % m.num_attention_heads != 0)
    throw InputError(key_join(key_path, k.num_attention_heads),
                     "must divide " + k.hidden_size + " (" + std::to_string(m.hidden_size) +
                         "), got " + std::to_string(m.num_attention_heads));
  if (m.num_attention_heads % m.num_kv_heads != 0)
    throw InputError(key_join(key_path, k.num_kv_heads),
                     "must divide " + k.num_attention_heads + " (" +
                         std::to_string(m.num_attention_heads) + "), got " +
                         std::to_string(m.num_kv_heads));
  validate_moe(m, key_path);
  if (m.position == PositionKind::Learned && m.seq_length > m.max_position_embeddings)
    throw InputError(key_join(key_path, k.seq_length),
                     std::to_string(m.seq_length) + " exceeds " + k.max_position_embeddings + " (" +
                         std::to_string(m.max_position_embeddings) +
                         "), the rows of the learned position table");
}

const std::vector<std::string> kMlpNames = {"gelu", "swiglu", "relu", "geglu"};
const std::vector<std::string> kNormNames = {"layernorm", "rmsnorm", "layernorm_no_bias"};
const std::vector<std::string> kPositionNames = {"learned", "rotary", "alibi"};
MlpKind mlp_at(std::size_t i) {
  constexpr MlpKind kinds[] = {MlpKind::Gelu, MlpKind::Swiglu, MlpKind::Relu, MlpKind::Geglu};
  return kinds[i];
}
NormKind norm_at(std::size_t i) {
  constexpr NormKind kinds[] = {NormKind::LayerNorm, NormKind::RmsNorm, NormKind::LayerNormNoBias};
  return kinds[i];
}
PositionKind position_at(std::size_t i) {
  return i == 0 ? PositionKind::Learned : i == 1 ? PositionKind::Rotary : PositionKind::Alibi;
}

// A key given twice keeps its last value, as transformers' json reader keeps it, and is said.
json read_json_file(const std::string& file, const std::string& key_path,
                    std::vector<InputWarning>& warnings) {
  std::vector<std::string> repeated;
  json cfg = read_json_input_file(file, key_path,
                                  "cannot open Hugging Face config '" + file +
                                      "' (paths are relative to the working directory)",
                                  &repeated);
  for (const std::string& key : repeated)
    warnings.push_back({key_join(key_path + "(" + file + ")", key),
                        "given twice: the last value is read, as transformers reads it"});
  return cfg;
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() >= 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

// `keys` receives the config's spellings; `complete`: the file is the whole model (not the base
// of an inline object), so its training length is defaulted here and it is validated.
ModelSpec from_hf_file(const std::string& file, const std::string& key_path, bool complete,
                       FieldKeys& keys, std::vector<InputWarning>& warnings) {
  const json cfg = read_json_file(file, key_path, warnings);
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
    "layer_norms", "sliding_window", "sliding_window_layers", "attention_chunk_size",
    "chunked_attention_layers", "qk_norm", "qk_norm_projection", "attention_sinks", "moe", "mla", "mtp_num_layers",
    "hidden_dropout", "attention_dropout"};

// The integer and boolean fields of an object-valued key (moe, mla), each bound to its field.
struct IntField {
  const char* key;
  std::int64_t* field;
  std::int64_t min;  // 1, or 0 for a count or index that may be 0
};
struct BoolField {
  const char* key;
  bool* field;
};

// Reads `value` (an object of those fields and no others) at `path` over the fields' current
// values; returns whether any changed.
bool read_fields(const json& value, const std::string& path, const std::vector<IntField>& ints,
                 const std::vector<BoolField>& bools) {
  if (!value.is_object())
    throw InputError(path, std::string("must be an object, got ") + value.type_name());
  std::vector<std::string> allowed;
  for (const IntField& f : ints) allowed.push_back(f.key);
  for (const BoolField& f : bools) allowed.push_back(f.key);
  bool changed = false;
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string key = it.key(), at = key_join(path, key);
    if (!contains(allowed, key))
      throw InputError(at, "unknown key" + did_you_mean(key, allowed) + "; allowed: " + join_list(allowed));
    for (const IntField& f : ints)
      if (key == f.key) {
        const std::int64_t x = read_int(*it, at, f.min);
        changed = changed || x != *f.field;
        *f.field = x;
      }
    for (const BoolField& f : bools)
      if (key == f.key) {
        const bool x = read_bool(*it, at);
        changed = changed || x != *f.field;
        *f.field = x;
      }
  }
  return changed;
}

// Fields still 0 after an object over its base were given by neither: the first such is missing.
void require_given(const std::string& path, const std::string& what,
                   std::initializer_list<std::pair<const char*, std::int64_t>> fields) {
  for (const auto& [key, value] : fields)
    if (value == 0) throw InputError(key_join(path, key), "missing; " + what + " needs it");
}

// model.moe and model.mla of an inline object, over the base's. The moe keys are the
// zerosim-published-cases/1 format's (num_experts, top_k, expert_ffn_hidden_size,
// shared_experts: a count of experts of the expert width, first_k_dense, moe_layer_freq,
// capacity_factor) and zerosim's own (shared_ffn_hidden_size: the shared experts' summed width
// when it is no such multiple, shared_expert_gate, router_bias) and Megatron-core's group-limited
// routing (router_num_groups, router_group_topk). A MoE object without a base's
// experts needs num_experts, top_k and expert_ffn_hidden_size; an MLA one kv_lora_rank and the
// three head widths.
bool read_moe_and_mla(const json& obj, const std::string& key_path, ModelSpec& m,
                      std::vector<InputWarning>& warnings) {
  bool changed = false;
  if (auto it = obj.find("moe"); it != obj.end()) {
    MoeSpec& e = m.moe;
    const std::string path = key_join(key_path, "moe");
    if (!it->is_object()) throw InputError(path, std::string("must be an object, got ") + it->type_name());
    json fields = *it;
    std::int64_t shared_experts = -1;
    if (auto s = fields.find("shared_experts"); s != fields.end()) {
      shared_experts = read_int(*s, key_join(path, "shared_experts"), 0);
      fields.erase(s);
    }
    if (auto c = fields.find("capacity_factor"); c != fields.end()) {
      if (!c->is_null()) {
        if (!c->is_number() || !(c->get<double>() > 0))
          throw InputError(key_join(path, "capacity_factor"),
                           "must be a positive number, or null (dropless)");
        warnings.push_back(
            {key_join(path, "capacity_factor"),
             "token dropping beyond " + c->dump() + " x an expert's mean share is not simulated: "
             "zerosim routes every token (dropless), balanced unless "
             "training.moe_load_imbalance says otherwise"});
      }
      fields.erase(c);
    }
    changed = read_fields(fields, path,
                          {{"num_experts", &e.num_experts, 1},
                           {"top_k", &e.top_k, 1},
                           {"expert_ffn_hidden_size", &e.expert_ffn_hidden_size, 1},
                           {"shared_ffn_hidden_size", &e.shared_ffn_hidden_size, 0},
                           {"first_k_dense", &e.first_k_dense, 0},
                           {"moe_layer_freq", &e.layer_freq, 1},
                           {"router_num_groups", &e.router_num_groups, 1},
                           {"router_group_topk", &e.router_group_topk, 1}},
                          {{"shared_expert_gate", &e.shared_expert_gate},
                           {"router_bias", &e.router_bias}});
    if (shared_experts >= 0) {
      if (e.expert_ffn_hidden_size > kMaxWidth)
        throw InputError(key_join(path, "expert_ffn_hidden_size"),
                         "must be at most " + std::to_string(kMaxWidth));
      const std::int64_t width = shared_experts * e.expert_ffn_hidden_size;
      if (fields.contains("shared_ffn_hidden_size") && width != e.shared_ffn_hidden_size)
        throw InputError(key_join(path, "shared_experts"),
                         "says " + std::to_string(width) + " of shared width, shared_ffn_hidden_size " +
                             std::to_string(e.shared_ffn_hidden_size) + "; give one of them");
      changed = changed || width != e.shared_ffn_hidden_size;
      e.shared_ffn_hidden_size = width;
    }
    require_given(path, "an MoE block",
                  {{"num_experts", e.num_experts}, {"top_k", e.top_k},
                   {"expert_ffn_hidden_size", e.expert_ffn_hidden_size}});
  }
  if (auto it = obj.find("mla"); it != obj.end()) {
    MlaSpec& a = m.mla;
    changed = read_fields(*it, key_join(key_path, "mla"),
                          {{"q_lora_rank", &a.q_lora_rank, 0},
                           {"kv_lora_rank", &a.kv_lora_rank, 1},
                           {"qk_nope_head_dim", &a.qk_nope_head_dim, 1},
                           {"qk_rope_head_dim", &a.qk_rope_head_dim, 1},
                           {"v_head_dim", &a.v_head_dim, 1}},
                          {}) || changed;
    require_given(key_join(key_path, "mla"), "MLA",
                  {{"kv_lora_rank", a.kv_lora_rank}, {"qk_nope_head_dim", a.qk_nope_head_dim},
                   {"qk_rope_head_dim", a.qk_rope_head_dim}, {"v_head_dim", a.v_head_dim}});
    // MLA decompresses K and V for every head; a different num_kv_heads given is refused by
    // validate_moe.
    if (!obj.contains("num_kv_heads")) m.num_kv_heads = m.num_attention_heads;
  }
  return changed;
}

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
  // A count of layers with a limited attention span (0: every layer), which needs that span.
  auto set_layer_count = [&](const char* k, std::int64_t& field, const char* span,
                             std::int64_t span_value) {
    if (const json* v = at(k)) {
      if (span_value == 0)
        throw InputError(path(k), std::string("counts the layers that attend within ") + span +
                                      ": needs " + span);
      const std::int64_t x = read_int(*v, path(k), 0);
      overridden = overridden || x != field;
      field = x;
    }
  };
  set_int("sliding_window", m.sliding_window);
  set_layer_count("sliding_window_layers", m.sliding_window_layers, "sliding_window",
                  m.sliding_window);
  set_int("attention_chunk_size", m.attention_chunk_size);
  set_layer_count("chunked_attention_layers", m.chunked_attention_layers, "attention_chunk_size",
                  m.attention_chunk_size);
  set_bool("qk_norm", m.qk_norm);
  set_bool("qk_norm_projection", m.qk_norm_projection);
  set_bool("attention_sinks", m.attention_sinks);
  set_int("mtp_num_layers", m.mtp_num_layers);
  // Training settings, not the architecture: the model keeps its name.
  auto set_probability = [&](const char* k, double& field) {
    if (const json* v = at(k)) field = read_dropout_probability(*v, path(k));
  };
  set_probability("hidden_dropout", m.hidden_dropout);
  set_probability("attention_dropout", m.attention_dropout);
  overridden = read_moe_and_mla(obj, key_path, m, warnings) || overridden;
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
  if (m.sliding_window_layers != 0) j["sliding_window_layers"] = m.sliding_window_layers;
  if (m.attention_chunk_size != 0) j["attention_chunk_size"] = m.attention_chunk_size;
  if (m.chunked_attention_layers != 0) j["chunked_attention_layers"] = m.chunked_attention_layers;
  if (m.qk_norm) j["qk_norm"] = true;
  if (m.qk_norm_projection) j["qk_norm_projection"] = true;
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (m.mtp_num_layers != 0) j["mtp_num_layers"] = m.mtp_num_layers;
  const ModelSpec megatron_defaults;
  if (m.hidden_dropout != megatron_defaults.hidden_dropout) j["hidden_dropout"] = m.hidden_dropout;
  if (m.attention_dropout != megatron_defaults.attention_dropout)
    j["attention_dropout"] = m.attention_dropout;
  if (m.is_moe()) {
    const MoeSpec& e = m.moe;
    j["moe"] = {{"num_experts", e.num_experts},
                {"top_k", e.top_k},
                {"expert_ffn_hidden_size", e.expert_ffn_hidden_size},
                {"shared_ffn_hidden_size", e.shared_ffn_hidden_size},
                {"shared_expert_gate", e.shared_expert_gate},
                {"router_bias", e.router_bias},
                {"first_k_dense", e.first_k_dense},
                {"moe_layer_freq", e.layer_freq}};
    if (e.router_num_groups != 0) {
      j["moe"]["router_num_groups"] = e.router_num_groups;
      j["moe"]["router_group_topk"] = e.router_group_topk;
    }
  }
  if (m.is_mla()) {
    const MlaSpec& a = m.mla;
    j["mla"] = {{"q_lora_rank", a.q_lora_rank},
                {"kv_lora_rank", a.kv_lora_rank},
                {"qk_nope_head_dim", a.qk_nope_head_dim},
                {"qk_rope_head_dim", a.qk_rope_head_dim},
                {"v_head_dim", a.v_head_dim}};
  }
  j["source"] = m.source;
  return j;
}

}  // namespace zerosim
