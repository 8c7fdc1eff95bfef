#pragma once
// What the two readers of a model share: the scenario reader (model_json.cpp: preset, inline
// object, validation, writing back) and the Hugging Face config.json reader (hf_config.cpp):
// the size bounds, the key each field was read from, and typed readers that name the key path
// and what is allowed, so that both word their errors alike.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim::model_detail {

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

// ---- typed readers: each names the key path and what is allowed ----

inline const char* type_name(const json& v) { return v.type_name(); }

// An integer of at least `min` (1: a positive one, 0: a count that may be empty).
inline std::int64_t read_int(const json& v, const std::string& path, std::int64_t min = 1) {
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

// A dropout probability, in [0, 1).
inline double read_dropout_probability(const json& v, const std::string& path) {
  if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() < 1))
    throw InputError(path, "must be a dropout probability in [0, 1), got " + v.dump());
  return v.get<double>();
}

inline bool read_bool(const json& v, const std::string& path) {
  if (!v.is_boolean())
    throw InputError(path, std::string("must be true or false, got ") + type_name(v));
  return v.get<bool>();
}

inline std::string read_string(const json& v, const std::string& path) {
  if (!v.is_string()) throw InputError(path, std::string("must be a string, got ") + type_name(v));
  return v.get<std::string>();
}

// One of `choices` (case-sensitive), returned as its index.
inline std::size_t read_choice(const json& v, const std::string& path,
                        const std::vector<std::string>& choices) {
  const std::string s = read_string(v, path);
  for (std::size_t i = 0; i < choices.size(); ++i)
    if (choices[i] == s) return i;
  throw InputError(path, "unknown value '" + s + "'" + did_you_mean(s, choices) +
                             "; allowed: " + join_list(choices));
}

inline bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// A head width equal to hidden / heads is the default, stored as 0, so that a config that spells
// it out equals one that does not (and a preset).
inline void normalize_head_dim(ModelSpec& m) {
  if (m.attention_head_dim != 0 && m.num_attention_heads > 0 &&
      m.hidden_size % m.num_attention_heads == 0 &&
      m.attention_head_dim == m.hidden_size / m.num_attention_heads)
    m.attention_head_dim = 0;
}

}  // namespace zerosim::model_detail
