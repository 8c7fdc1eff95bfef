#pragma once
// Reading one Hugging Face config.json: the pieces the family readers share (hf_config.cpp for
// the dense families and the common fields, hf_moe.cpp for the Mixture-of-Experts and latent
// attention fields).
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/model/json_readers.h"
#include "sim/model/model.h"

namespace zerosim::model_detail {

// A key that is absent or JSON null (HF writes e.g. "num_key_value_heads": null) counts as absent.
inline const json* find(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// The first of `names` present; records which one in `used`.
inline const json* find_any(const json& obj, const std::vector<std::string>& names, std::string& used) {
  for (const auto& n : names)
    if (const json* v = find(obj, n)) {
      used = n;
      return v;
    }
  used = names.front();
  return nullptr;
}
// Config fields that only a Mixture-of-Experts model has: in a config of a dense model_type they
// are an error, never ignored (a dense reading would miss the experts' parameters).
bool is_moe_field(const std::string& key);

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
  // Whether the config has the key at all (JSON null included: "q_lora_rank": null means none).
  bool has(const std::string& key) const { return cfg_.contains(key); }
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
  // A Mixture-of-Experts field nothing read in a dense model_type is an error instead (a dense
  // reading would miss the experts); in an MoE type it is one that family does not have, which
  // transformers ignores: reported like any other.
  void report_unread(std::vector<InputWarning>& out, const std::vector<std::string>& cost_free,
                     bool moe_type = false) const {
    for (auto it = cfg_.begin(); it != cfg_.end(); ++it) {
      if (it->is_null() || read_.count(it.key()) || contains(cost_free, it.key())) continue;
      if (!moe_type && is_moe_field(it.key()))
        throw InputError(path(it.key()),
                         "a Mixture-of-Experts field, but model_type " + type_ +
                             " is a dense model in transformers; an MoE config needs its own "
                             "model_type (mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, "
                             "gpt_oss, phimoe, dbrx)");
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

// The Mixture-of-Experts fields of a config of model_type mixtral, qwen2_moe, qwen3_moe,
// deepseek_v2, deepseek_v3 or gpt_oss, read into m.moe as transformers builds the model (and,
// where the publisher's own modeling code differs, as it does, with a warning).
void read_hf_moe(HfConfig& c, ModelSpec& m, std::vector<InputWarning>& warnings);
// DeepSeek's multi-head latent attention (deepseek_v2, deepseek_v3) into m.mla.
void read_hf_mla(HfConfig& c, ModelSpec& m);
// A whole config of model_type dbrx (hf_dbrx.cpp), as parse_hf reads the others; `cost_free`:
// the top-level fields accepted without a word.
ModelSpec parse_dbrx(const json& cfg, const std::string& origin, FieldKeys& keys,
                     std::vector<InputWarning>& warnings, const std::vector<std::string>& cost_free);
}  // namespace zerosim::model_detail
