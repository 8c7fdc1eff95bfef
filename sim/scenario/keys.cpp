// The binding table of scenario keys (keys.h). One entry per key; adding a key is adding an
// entry here (and, if it constrains other keys, a rule in resolve.cpp).
#include "sim/scenario/keys.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <type_traits>

#include "sim/core/error.h"
#include "sim/fitted/fitted_constants.h"
#include "sim/input/quantity.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// ---- value readers: one per key type, each naming the key path in its errors -----------------

std::int64_t read_integer(const json& v, const std::string& path, std::int64_t min,
                          std::int64_t max) {
  double d;
  if (v.is_number_integer()) {
    d = static_cast<double>(v.get<std::int64_t>());
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>())) {
    d = v.get<double>();
  } else {
    throw InputError(path, "expected an integer, got " + v.dump());
  }
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    throw InputError(path, "must be between " + std::to_string(min) + " and " +
                               std::to_string(max) + ", got " + v.dump());
  }
  return static_cast<std::int64_t>(d);
}

// Element counts take units ("50M") and, where the Hugging Face DeepSpeed integration defines
// it, "auto" (computed with int(), which truncates), which is reported with the value it became.
struct AutoRule {
  double (*value)(const Scenario&) = nullptr;
  const char* formula = "";  // "hidden_size^2"
};
std::int64_t read_count(const json& v, const std::string& path, const AutoRule& rule,
                        Scenario& s) {
  if (v.is_string() && v.get<std::string>() == "auto") {
    if (!rule.value) {
      throw InputError(path, "\"auto\" is not defined for this key; give a number of elements");
    }
    const auto n = static_cast<std::int64_t>(rule.value(s));
    s.warnings.push_back({path, "\"auto\" resolved to " + std::to_string(n) + " = " +
                                    rule.formula +
                                    ", as the Hugging Face DeepSpeed integration fills it"});
    return n;
  }
  const double d = parse_quantity(v, Dimension::Count, path);
  if (d < 0 || d > 1e15 || d != std::floor(d)) {
    throw InputError(path, "must be a whole number of elements between 0 and 1e15, got " +
                               v.dump());
  }
  return static_cast<std::int64_t>(d);
}

double read_number(const json& v, const std::string& path, double min, double max) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    throw InputError(path, "expected a number, got " + v.dump());
  }
  const double d = v.get<double>();
  if (d < min || d > max) {
    throw InputError(path, "must be between " + std::to_string(min) + " and " +
                               std::to_string(max) + ", got " + v.dump());
  }
  return d;
}

bool read_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) throw InputError(path, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

// A list of non-negative integers below `limit`: a JSON array, or a comma-separated string from
// --set; sorted, duplicates dropped.
std::vector<int> read_ranks(const json& v, const std::string& path, int limit) {
  std::vector<int> out;
  auto add = [&](double d) {
    if (!(d >= 0 && d < limit && d == std::floor(d))) {
      throw InputError(path, "each entry must be an integer from 0 to " +
                                 std::to_string(limit - 1) + ", got " + json(d).dump());
    }
    out.push_back(static_cast<int>(d));
  };
  if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number()) throw InputError(path, "expected integers, got " + e.dump());
      add(e.get<double>());
    }
  } else if (v.is_number()) {
    add(v.get<double>());
  } else if (v.is_string()) {
    std::stringstream in(v.get<std::string>());
    std::string item;
    while (std::getline(in, item, ',')) {
      char* end = nullptr;
      double d = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0') {
        throw InputError(path, "expected integers separated by commas, got " + v.dump());
      }
      add(d);
    }
  } else {
    throw InputError(path, "expected a list of integers, got " + v.dump());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

template <class E>
E read_choice(const json& v, const std::string& path, std::span<const EnumName<E>> names) {
  const std::vector<std::string> allowed = names_of(names);
  if (!v.is_string()) {
    throw InputError(path, "expected one of " + join_list(allowed) + ", got " + v.dump());
  }
  const std::string s = v.get<std::string>();
  if (auto e = value_of(names, s)) return *e;
  throw InputError(path, "unknown value '" + s + "'" + did_you_mean(s, allowed) +
                             "; allowed: " + join_list(allowed));
}

// ---- entries: a factory per key type binds the key to its Scenario field ----------------------

// Where a key lands in the Scenario, for reading and for the echo.
#define FIELD(member) [](auto& s) -> auto& { return s.member; }

template <class Get>
using FieldType = std::remove_reference_t<decltype(std::declval<Get>()(std::declval<Scenario&>()))>;

KeySpec entry(std::string path, std::string type, json def, std::string help) {
  KeySpec k;
  k.path = std::move(path);
  k.type = std::move(type);
  k.default_value = std::move(def);
  k.help = std::move(help);
  return k;
}

template <class Get>
KeySpec int_key(std::string path, json def, std::int64_t min, std::int64_t max, std::string help,
                Get get) {
  KeySpec k = entry(std::move(path), "int", std::move(def), std::move(help));
  k.read = [get, min, max, p = k.path](const json& v, Scenario& s) {
    get(s) = static_cast<FieldType<Get>>(read_integer(v, p, min, max));
  };
  k.echo = [get](const Scenario& s) { return json(get(s)); };
  return k;
}

// An int key whose 0 means "not given" (an optional Megatron argument): echoed as null then, so
// that the echo resolves to itself.
template <class Get>
KeySpec optional_int_key(std::string path, std::int64_t min, std::int64_t max, std::string help,
                         Get get) {
  KeySpec k = int_key(std::move(path), nullptr, min, max, std::move(help), get);
  k.echo = [get](const Scenario& s) { return get(s) == 0 ? json() : json(get(s)); };
  return k;
}

// Megatron-core's pipeline_model_parallel_layout: its string form as given, or its list form
// (one list of layer names per virtual stage) written as that string.
KeySpec layout_key(std::string path, std::string help) {
  KeySpec k = entry(std::move(path), "layout", nullptr, std::move(help));
  k.read = [p = k.path](const json& v, Scenario& s) {
    if (v.is_string()) {
      s.parallel.pipeline_layout = v.get<std::string>();
      return;
    }
    const std::string allowed =
        "Megatron-core's layout string (e.g. \"Et*3|(tt|)*29,L\") or a list of lists of "
        "'embedding', 'decoder', 'mtp', 'loss'";
    if (!v.is_array() || v.empty()) throw InputError(p, "expected " + allowed + ", got " + v.dump());
    std::string layout;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string at = p + "[" + std::to_string(i) + "]";
      if (!v[i].is_array()) throw InputError(at, "expected a list of layer names, got " + v[i].dump());
      if (i > 0) layout += '|';
      for (const json& name : v[i]) {
        const std::string n = name.is_string() ? name.get<std::string>() : name.dump();
        if (n == "embedding") layout += 'E';
        else if (n == "decoder") layout += 't';
        else if (n == "mtp") layout += 'm';
        else if (n == "loss") layout += 'L';
        else throw InputError(at, "unknown layer '" + n + "'; allowed: embedding, decoder, mtp, loss");
      }
    }
    s.parallel.pipeline_layout = layout;
  };
  k.echo = [](const Scenario& s) {
    return s.parallel.pipeline_layout.empty() ? json() : json(s.parallel.pipeline_layout);
  };
  return k;
}

// Megatron-core's recompute_modules: a list of module names (transformer_config.py's choices).
// The ones zerosim replays set RecomputeModules; Megatron's others for this architecture (moe,
// shared_experts) are warned about and not simulated; anything else is an error.
KeySpec recompute_modules_key(std::string path, std::string help) {
  KeySpec k = entry(std::move(path), "list", nullptr, std::move(help));
  k.read = [p = k.path](const json& v, Scenario& s) {
    if (v.is_null()) return;
    const std::vector<std::string> simulated = {"core_attn", "layernorm", "moe_act",
                                                "mla_up_proj", "mlp"};
    const std::vector<std::string> warned = {"moe", "shared_experts"};
    if (!v.is_array())
      throw InputError(p, "expected a list of Megatron-core module names, got " + v.dump());
    RecomputeModules m{false, false, false, false, false};
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string at = p + "[" + std::to_string(i) + "]";
      const std::string n = v[i].is_string() ? v[i].get<std::string>() : v[i].dump();
      if (n == "core_attn") m.core_attn = true;
      else if (n == "layernorm") m.layernorm = true;
      else if (n == "moe_act") m.moe_act = true;
      else if (n == "mla_up_proj") m.mla_up_proj = true;
      else if (n == "mlp") m.mlp = true;
      else if (std::find(warned.begin(), warned.end(), n) != warned.end())
        s.warnings.push_back({at, "Megatron-core's '" + n + "' recomputation is not simulated: "
                                  "its activations are counted as kept and its replay as not run"});
      else
        throw InputError(at, "unknown module '" + n + "'" + did_you_mean(n, simulated) +
                                 "; allowed: core_attn, layernorm, moe_act, mla_up_proj, mlp "
                                 "(and moe, shared_experts, not simulated)");
    }
    s.parallel.recompute_modules = m;
  };
  k.echo = [](const Scenario& s) {
    const RecomputeModules& m = s.parallel.recompute_modules;
    if (m == RecomputeModules{}) return json();
    json out = json::array();
    if (m.core_attn) out.push_back("core_attn");
    if (m.layernorm) out.push_back("layernorm");
    if (m.moe_act) out.push_back("moe_act");
    if (m.mla_up_proj) out.push_back("mla_up_proj");
    if (m.mlp) out.push_back("mlp");
    return out;
  };
  return k;
}

// Megatron-core's hierarchical_context_parallel_sizes: the degrees of CP's levels, [a2a, p2p] for
// cp_comm_type a2a+p2p (Transformer Engine takes two groups).
KeySpec hierarchical_cp_key(std::string path, std::string help) {
  KeySpec k = entry(std::move(path), "list", nullptr, std::move(help));
  k.read = [p = k.path](const json& v, Scenario& s) {
    if (v.is_null()) return;
    if (!v.is_array() || v.size() != 2)
      throw InputError(p, "expected two degrees [a2a, p2p] (Transformer Engine's a2a+p2p has "
                          "two levels), got " + v.dump());
    std::vector<int> sizes;
    for (std::size_t i = 0; i < v.size(); ++i)
      sizes.push_back(static_cast<int>(
          read_integer(v[i], p + "[" + std::to_string(i) + "]", 1, std::int64_t{1} << 24)));
    s.parallel.hierarchical_cp_sizes = sizes;
  };
  k.echo = [](const Scenario& s) {
    return s.parallel.hierarchical_cp_sizes.empty() ? json()
                                                   : json(s.parallel.hierarchical_cp_sizes);
  };
  return k;
}

template <class Get>
KeySpec count_key(std::string path, json def, std::string help, Get get, AutoRule rule = {}) {
  KeySpec k = entry(std::move(path), "count", std::move(def), std::move(help));
  k.unit = "elements";
  k.read = [get, rule, p = k.path](const json& v, Scenario& s) {
    get(s) = read_count(v, p, rule, s);
  };
  k.echo = [get](const Scenario& s) { return json(get(s)); };
  return k;
}

template <class Get>
KeySpec bool_key(std::string path, json def, std::string help, Get get) {
  KeySpec k = entry(std::move(path), "bool", std::move(def), std::move(help));
  k.read = [get, p = k.path](const json& v, Scenario& s) { get(s) = read_bool(v, p); };
  k.echo = [get](const Scenario& s) { return json(get(s)); };
  return k;
}

template <class Get>
KeySpec number_key(std::string path, json def, double min, double max, std::string help,
                   Get get) {
  KeySpec k = entry(std::move(path), "number", std::move(def), std::move(help));
  k.read = [get, min, max, p = k.path](const json& v, Scenario& s) {
    get(s) = read_number(v, p, min, max);
  };
  k.echo = [get](const Scenario& s) { return json(get(s)); };
  return k;
}

template <class E, std::size_t N, class Get>
KeySpec enum_key(std::string path, json def, const EnumName<E> (&names)[N], std::string help,
                 Get get) {
  KeySpec k = entry(std::move(path), "enum", std::move(def), std::move(help));
  const std::span<const EnumName<E>> table(names);
  k.allowed = names_of(table);
  k.read = [get, table, p = k.path](const json& v, Scenario& s) {
    get(s) = read_choice(v, p, table);
  };
  k.echo = [get, table](const Scenario& s) { return json(name_of<E>(table, get(s))); };
  return k;
}

template <class Get>
KeySpec time_key(std::string path, json def, double max_s, std::string help, Get get) {
  KeySpec k = entry(std::move(path), "time", std::move(def), std::move(help));
  k.unit = "s";
  k.read = [get, max_s, p = k.path](const json& v, Scenario& s) {
    const double t = parse_quantity(v, Dimension::Time, p);
    if (!(t >= 0 && t <= max_s)) {
      throw InputError(p, "must be between 0 and " + quantity_text(max_s, Dimension::Time) +
                              ", got " + v.dump());
    }
    get(s) = t;
  };
  k.echo = [get](const Scenario& s) { return json(quantity_text(get(s), Dimension::Time)); };
  return k;
}

using RankLimit = int (*)(const Scenario&);
template <class Get>
KeySpec ranks_key(std::string path, std::string help, Get get, RankLimit limit) {
  KeySpec k = entry(std::move(path), "ranks", json::array(), std::move(help));
  k.read = [get, limit, p = k.path](const json& v, Scenario& s) {
    get(s) = read_ranks(v, p, limit(s));
  };
  k.echo = [get](const Scenario& s) { return json(get(s)); };
  return k;
}

// Keys whose values are names for a flag.
inline constexpr EnumName<Stage3Implementation> kStage3ImplementationNames[] = {
    {Stage3Implementation::Coalesced, "coalesced"},
    {Stage3Implementation::CoalescedV060, "coalesced-v0.6.0"},
    {Stage3Implementation::PerParameter, "per-parameter"}};
inline constexpr EnumName<bool> kGranularityNames[] = {{true, "layer"}};
inline constexpr EnumName<bool> kRanksNames[] = {{true, "folded"}, {false, "all"}};

constexpr std::int64_t kMaxDegree = 1 << 24;
constexpr std::int64_t kMaxBatch = std::int64_t{1} << 40;

double hidden_squared(const Scenario& s) {
  const double h = static_cast<double>(s.model.hidden_size);
  return h * h;
}
double prefetch_auto(const Scenario& s) { return 0.9 * hidden_squared(s); }
double persistence_auto(const Scenario& s) { return 10 * static_cast<double>(s.model.hidden_size); }

void add_model_and_cluster(std::vector<KeySpec>& t) {
  KeySpec model = entry("model", "object", "llama2-7b",
                        "a preset name (zerosim list models), a path to a Hugging Face "
                        "config.json, or an object with the case-format keys");
  model.read = [](const json& v, Scenario& s) {
    s.model = model_from_json(v, "model", &s.warnings);
  };
  model.echo = [](const Scenario& s) { return model_to_json(s.model); };
  t.push_back(std::move(model.flag("model", "model preset, HF config.json path (sets model)")
                            .in_cases("model")));
  KeySpec cluster = entry("cluster", "object", json{{"preset", "dgx-h100"}, {"nodes", 2}},
                          "{\"preset\": name, \"nodes\": n} or {\"preset\": name, \"num_gpus\": "
                          "g}, plus overrides");
  cluster.read = [](const json& v, Scenario& s) { s.cluster = cluster_from_json(v, "cluster"); };
  cluster.echo = [](const Scenario& s) { return cluster_to_json(s.cluster); };
  t.push_back(std::move(cluster.flag("cluster", "cluster preset (sets cluster.preset)", "preset")
                            .flag("nodes", "number of nodes (sets cluster.nodes)", "nodes")
                            .flag("num-gpus", "number of GPUs (sets cluster.num_gpus)", "num_gpus")
                            .in_cases("cluster")));
}

// A key that only some scenarios use (`used`): left out of the echo of the others.
KeySpec echoed_when(KeySpec k, bool (*used)(const Scenario&)) {
  k.echo = [echo = k.echo, used](const Scenario& s) { return used(s) ? echo(s) : json(); };
  return k;
}
// Only MoE models; only DeepSpeed's sequence parallelism; only Megatron; only fp8 training; only
// Megatron-core's precision-aware optimizer.
KeySpec moe_only(KeySpec k) {
  return echoed_when(std::move(k), [](const Scenario& s) { return s.model.is_moe(); });
}
KeySpec ulysses_only(KeySpec k) {
  return echoed_when(std::move(k), [](const Scenario& s) { return s.deepspeed_ulysses(); });
}
KeySpec megatron_only(KeySpec k) {
  return echoed_when(std::move(k), [](const Scenario& s) {
    return s.parallel.framework == Framework::Megatron;
  });
}
KeySpec fp8_only(KeySpec k) {
  return echoed_when(std::move(k),
                     [](const Scenario& s) { return s.training.precision == Precision::Fp8; });
}
KeySpec precision_aware_only(KeySpec k) {
  return echoed_when(std::move(k),
                     [](const Scenario& s) { return s.training.precision_aware_optimizer; });
}

void add_training_keys(std::vector<KeySpec>& t) {
  // The training length belongs to the run, not to the architecture: set here it applies to any
  // model (a preset, a Hugging Face config, an inline object) and replaces the model's own. The
  // model is read before it (table order), so the length is checked against its position table.
  KeySpec seq = entry("training.seq_length", "int", nullptr,
                      "tokens per sequence (default: the model's; a Hugging Face config gives "
                      "none, so min(max_position_embeddings, 4096) with a warning)");
  seq.read = [](const json& v, Scenario& s) {
    const std::string path = "training.seq_length";
    set_training_seq_length(s.model, read_integer(v, path, 1, std::int64_t{1} << 24), path,
                            s.warnings);
  };
  seq.echo = [](const Scenario& s) { return json(s.model.seq_length); };
  t.push_back(std::move(seq.flag("seq-length", "training sequence length (sets training.seq_length)")));
  t.push_back(int_key("training.micro_batch_size", nullptr, 1, kMaxBatch,
                      "sequences per GPU per micro-batch (DeepSpeed "
                      "train_micro_batch_size_per_gpu)",
                      FIELD(training.micro_batch_size))
                  .flag("mbs", "micro-batch size (sets training.micro_batch_size)")
                  .in_deepspeed("train_micro_batch_size_per_gpu")
                  .in_cases("training.micro_batch_size"));
  t.push_back(int_key("training.global_batch_size", nullptr, 1, kMaxBatch,
                      "sequences per optimizer step over all DP ranks (DeepSpeed "
                      "train_batch_size)",
                      FIELD(training.global_batch_size))
                  .flag("gbs", "global batch size (sets training.global_batch_size)")
                  .in_deepspeed("train_batch_size")
                  .in_cases("training.global_batch_size"));
  t.push_back(int_key("training.gradient_accumulation_steps", nullptr, 1, kMaxBatch,
                      "micro-batches per step on each DP rank; the missing one of the three "
                      "batch keys is derived with DeepSpeed's rule",
                      FIELD(training.gradient_accumulation_steps))
                  .flag("gas", "gradient accumulation steps")
                  .in_deepspeed("gradient_accumulation_steps"));
  t.push_back(enum_key("training.precision", "bf16", kTrainingPrecisionNames,
                       "training precision: bf16, fp16, or fp8 (Transformer Engine: the layers' "
                       "linear GEMMs in FP8, the rest bf16)",
                       FIELD(training.precision))
                  .flag("precision", "bf16, fp16 or fp8 (sets training.precision)")
                  .in_cases("training.precision"));
  t.push_back(fp8_only(enum_key("training.fp8_recipe", nullptr, kFp8RecipeNames,
                                "fp8 only: how FP8 tensors are scaled (Megatron-core's "
                                "--fp8-recipe): delayed (the default; amax history), tensorwise "
                                "(current scaling; the default and only choice under fsdp, "
                                "torchao's Float8Linear), mxfp8 (Blackwell) or blockwise (1x128 "
                                "/ 128x128 tiles)",
                                FIELD(training.fp8_recipe)))
                  .in_cases("training.fp8_recipe"));
  // Megatron-core's precision-aware optimizer: the flag echoed under framework megatron, the
  // settings where it is on.
  t.push_back(megatron_only(bool_key("training.use_precision_aware_optimizer", false,
                                     "megatron with the distributed optimizer: Megatron-core's "
                                     "--use-precision-aware-optimizer (Transformer Engine's "
                                     "FusedAdam keeps the master weights and Adam moments in the "
                                     "dtypes below)",
                                     FIELD(training.precision_aware_optimizer)))
                  .in_cases("training.use_precision_aware_optimizer"));
  t.push_back(precision_aware_only(
                  enum_key("training.main_params_dtype", "fp32", kMainParamsDtypeNames,
                           "precision-aware optimizer: master weights' dtype "
                           "(--main-params-dtype)",
                           FIELD(training.main_params_dtype)))
                  .in_cases("training.main_params_dtype"));
  t.push_back(precision_aware_only(
                  enum_key("training.exp_avg_dtype", "fp32", kMomentDtypeNames,
                           "precision-aware optimizer: Adam's first moment (--exp-avg-dtype)",
                           FIELD(training.exp_avg_dtype)))
                  .in_cases("training.exp_avg_dtype"));
  t.push_back(precision_aware_only(
                  enum_key("training.exp_avg_sq_dtype", "fp32", kMomentDtypeNames,
                           "precision-aware optimizer: Adam's second moment "
                           "(--exp-avg-sq-dtype)",
                           FIELD(training.exp_avg_sq_dtype)))
                  .in_cases("training.exp_avg_sq_dtype"));
  t.push_back(precision_aware_only(
                  bool_key("training.store_param_remainders", true,
                           "precision-aware optimizer with bf16 weights and master weights "
                           "Transformer Engine keeps: only their low 16 bits stored "
                           "(Megatron-core's store_param_remainders)",
                           FIELD(training.store_param_remainders)))
                  .in_cases("training.store_param_remainders"));
  t.push_back(bool_key("training.fp8_param_gather", false,
                       "fp8 with ZeRO-3 / FSDP or Megatron's distributed optimizer: the "
                       "layers' weights all-gathered in FP8 (torchao's "
                       "enable_fsdp_float8_all_gather; Megatron's --fp8-param-gather, whose FP8 "
                       "weights replace the 16-bit ones)",
                       FIELD(training.fp8_param_gather))
                  .in_cases("training.fp8_param_gather"));
  t.push_back(bool_key("training.flash_attention", true, "fused attention without the s^2 matrix",
                       FIELD(training.flash_attention))
                  .in_cases("training.flash_attention"));
  t.push_back(bool_key("training.torch_compile", false,
                       "torch.compile fuses the model's elementwise ops (torchtitan: framework fsdp)",
                       FIELD(training.torch_compile))
                  .in_cases("training.torch_compile"));
  t.push_back(bool_key("training.moe_grouped_gemm", nullptr,
                       "MoE layers: the experts' GEMMs as one grouped GEMM (Megatron "
                       "--moe-grouped-gemm) instead of one launch per expert (default: true for "
                       "megatron, false for deepspeed, fsdp and nanotron, which loop over the "
                       "experts)",
                       FIELD(training.moe_grouped_gemm))
                  .in_cases("training.moe_grouped_gemm"));
  t.push_back(number_key("training.moe_load_imbalance", 1.0, 1.0, 1e3,
                         "MoE layers: the busiest expert's routed tokens over the mean (1 = "
                         "balanced; Megatron's moe_expert_capacity_factor with padding to "
                         "capacity); the expert GEMMs and all-to-alls of every rank scale by it",
                         FIELD(training.moe_load_imbalance))
                  .in_cases("training.moe_load_imbalance"));
}

void add_parallel_keys(std::vector<KeySpec>& t) {
  t.push_back(int_key("parallel.tp", 1, 1, kMaxDegree, "tensor-parallel degree", FIELD(parallel.tp))
                  .flag("tp", "tensor-parallel degree (sets parallel.tp)")
                  .in_cases("parallel.tp"));
  t.push_back(int_key("parallel.pp", 1, 1, kMaxDegree, "pipeline-parallel degree",
                      FIELD(parallel.pp))
                  .flag("pp", "pipeline-parallel degree (sets parallel.pp)")
                  .in_cases("parallel.pp"));
  t.push_back(int_key("parallel.dp", nullptr, 1, kMaxDegree,
                      "data-parallel degree (derived: GPUs / (tp*pp*cp))", FIELD(parallel.dp))
                  .flag("dp", "data-parallel degree (sets parallel.dp; derived if absent)")
                  .in_cases("parallel.dp"));
  t.push_back(int_key("parallel.cp", 1, 1, kMaxDegree,
                      "context-parallel degree: each sequence split over cp ranks (Megatron-core)",
                      FIELD(parallel.cp))
                  .flag("cp", "context-parallel degree (sets parallel.cp)")
                  .in_cases("parallel.cp"));
  t.push_back(enum_key("parallel.cp_comm_type", "p2p", kCpCommTypeNames,
                       "how context parallelism exchanges keys and values (Megatron "
                       "--cp-comm-type): p2p (ring attention, overlapped), all_gather, a2a "
                       "(Ulysses: all-to-alls that trade tokens for heads) or a2a+p2p (a2a over "
                       "the first level of hierarchical_context_parallel_sizes, the ring over "
                       "the second)",
                       FIELD(parallel.cp_comm_type))
                  .in_cases("parallel.cp_comm_type"));
  t.push_back(hierarchical_cp_key("parallel.hierarchical_context_parallel_sizes",
                                  "Megatron --hierarchical-context-parallel-sizes: [a2a, p2p] "
                                  "degrees multiplying to cp, for cp_comm_type a2a+p2p (the a2a "
                                  "level consecutive ranks)")
                  .in_cases("parallel.hierarchical_context_parallel_sizes"));
  t.push_back(int_key("parallel.ep", 1, 1, kMaxDegree,
                      "expert-parallel degree (MoE models): each group of ep consecutive DP ranks "
                      "holds num_experts / ep experts per rank and exchanges tokens all-to-all",
                      FIELD(parallel.ep))
                  .flag("ep", "expert-parallel degree (sets parallel.ep)")
                  .in_cases("parallel.ep"));
  t.push_back(int_key("parallel.etp", nullptr, 1, kMaxDegree,
                      "tensor-parallel degree of the expert layers (Megatron-core's "
                      "expert_tensor_parallel_size; default tp); simulated as tp, with a warning "
                      "when it differs",
                      FIELD(parallel.etp))
                  .in_cases("parallel.etp"));
  t.push_back(int_key("parallel.virtual_stages", 1, 1, kMaxDegree,
                      "interleaved pipeline stages per GPU", FIELD(parallel.virtual_stages))
                  .in_cases("parallel.virtual_stages"));
  // Megatron-core's TransformerConfig names (Megatron-LM --decoder-first-pipeline-num-layers,
  // --decoder-last-pipeline-num-layers, --account-for-embedding-in-pipeline-split,
  // --account-for-loss-in-pipeline-split); the rules are in pipeline_split.cpp.
  t.push_back(optional_int_key("parallel.num_layers_in_first_pipeline_stage", 1, kMaxDegree,
                               "layers on the first pipeline stage (Megatron-core's uneven "
                               "split; default: an even share)",
                               FIELD(parallel.first_stage_layers))
                  .in_cases("parallel.num_layers_in_first_pipeline_stage"));
  t.push_back(optional_int_key("parallel.num_layers_in_last_pipeline_stage", 1, kMaxDegree,
                               "layers on the last pipeline stage (Megatron-core's uneven "
                               "split; default: an even share)",
                               FIELD(parallel.last_stage_layers))
                  .in_cases("parallel.num_layers_in_last_pipeline_stage"));
  t.push_back(bool_key("parallel.account_for_embedding_in_pipeline_split", false,
                       "count the embedding as a layer of the first virtual stage when splitting "
                       "layers over pipeline stages (Megatron-core)",
                       FIELD(parallel.account_for_embedding_in_pipeline_split))
                  .in_cases("parallel.account_for_embedding_in_pipeline_split"));
  t.push_back(bool_key("parallel.account_for_loss_in_pipeline_split", false,
                       "count the output layer and loss as a layer of the last virtual stage when "
                       "splitting layers over pipeline stages (Megatron-core)",
                       FIELD(parallel.account_for_loss_in_pipeline_split))
                  .in_cases("parallel.account_for_loss_in_pipeline_split"));
  t.push_back(layout_key("parallel.pipeline_model_parallel_layout",
                         "Megatron-core's explicit pipeline layout: virtual stages separated by "
                         "'|', E the embedding, t a decoder layer, L the loss, (..)*n and x*n "
                         "repeats (e.g. \"Et|(tt|)*30,L\"), or its list form; sets "
                         "virtual_stages").in_cases("parallel.pipeline_model_parallel_layout"));
  t.push_back(enum_key("parallel.pipeline_schedule", nullptr, kPipelineScheduleNames,
                       "pipeline schedule (default: interleaved when virtual_stages > 1, else "
                       "1f1b; with framework nanotron gpipe, its afab engine, or 1f1b, default "
                       "gpipe; zero-bubble is ZB-H1, or ZB-V with virtual_stages 2; dualpipe is "
                       "DeepSeek-V3's DualPipe, two "
                       "copies of the model; dualpipev its V-shaped cut in half, with "
                       "virtual_stages 2)",
                       FIELD(parallel.pipeline_schedule))
                  .in_cases("parallel.pipeline_schedule"));
  t.push_back(bool_key("parallel.sequence_parallel", false, "Megatron sequence parallelism",
                       FIELD(parallel.sequence_parallel))
                  .in_cases("parallel.sequence_parallel"));
  t.push_back(enum_key("parallel.recompute", "none", kRecomputeNames, "activation recomputation",
                       FIELD(parallel.recompute))
                  .flag("recompute", "none, selective, selective-op or full (sets parallel.recompute)")
                  .in_cases("parallel.recompute"));
  t.push_back(bool_key("parallel.cpu_checkpointing", false,
                       "DeepSpeed activation_checkpointing.cpu_checkpointing (Megatron-DeepSpeed "
                       "--checkpoint-in-cpu), with recompute full: each layer's checkpoint goes to "
                       "the host in the forward and comes back before its recomputation",
                       FIELD(parallel.cpu_checkpointing))
                  .in_cases("parallel.cpu_checkpointing"));
  t.push_back(bool_key("parallel.partition_activations", false,
                       "DeepSpeed activation_checkpointing.partition_activations "
                       "(Megatron-DeepSpeed --partition-activations), with recompute full: each "
                       "TP rank keeps 1/tp of a layer's checkpoint, all-gathered over the TP group "
                       "before its recomputation",
                       FIELD(parallel.partition_activations))
                  .in_cases("parallel.partition_activations"));
  t.push_back(recompute_modules_key(
      "parallel.recompute_modules",
      "Megatron-core --recompute-modules, with recompute selective: core_attn (the default), "
      "layernorm, moe_act, mla_up_proj, mlp (dense layers); moe and shared_experts are read and "
      "warned about (not simulated)").in_cases("parallel.recompute_modules"));
  t.push_back(megatron_only(bool_key("parallel.activation_func_fp8_input_store", false,
                                     "Megatron-core --activation-func-fp8-input-store: the fused "
                                     "SwiGLU keeps its input for backward in FP8, 1 byte per "
                                     "element instead of 2 (dense MLPs and experts; needs "
                                     "framework megatron and a SwiGLU model)",
                                     FIELD(parallel.activation_func_fp8_input_store)))
                  .in_cases("parallel.activation_func_fp8_input_store"));
  t.push_back(enum_key("parallel.framework", "deepspeed", kFrameworkNames,
                       "whose schedule to mirror", FIELD(parallel.framework))
                  .flag("framework", "deepspeed, megatron, fsdp or nanotron")
                  .in_cases("parallel.framework"));
  t.push_back(bool_key("parallel.overlap_grad_reduce", false,
                       "Megatron --overlap-grad-reduce: DP gradient reduction bucket by bucket "
                       "during the last micro-batch's backward",
                       FIELD(parallel.overlap_grad_reduce))
                  .in_cases("parallel.overlap_grad_reduce"));
  t.push_back(bool_key("parallel.overlap_param_gather", false,
                       "Megatron --overlap-param-gather: the distributed optimizer's parameter "
                       "all-gather overlapped with the next step's forward",
                       FIELD(parallel.overlap_param_gather))
                  .in_cases("parallel.overlap_param_gather"));
  t.push_back(bool_key("parallel.tp_comm_overlap", false,
                       "Megatron --tp-comm-overlap (Transformer Engine userbuffers): the attention "
                       "and MLP blocks' TP all-gathers and reduce-scatters pipelined with their "
                       "GEMMs (needs sequence_parallel)",
                       FIELD(parallel.tp_comm_overlap))
                  .in_cases("parallel.tp_comm_overlap"));
  t.push_back(echoed_when(
                  bool_key("parallel.tp_linear_async_communication", nullptr,
                           "the column-parallel linear that opens an attention or MLP block "
                           "all-reduces (with sequence_parallel reduce-scatters) its input "
                           "gradient beside its weight-gradient GEMM: Megatron-LM's "
                           "LinearWithGradAccumulationAndAsyncCommunication and Transformer "
                           "Engine's linears (--no-async-tensor-model-parallel-allreduce turned "
                           "the all-reduce off; with sequence parallelism always on), nanotron's "
                           "tp_linear_async_communication (default: true for megatron, false for "
                           "nanotron as nanotron's config; DeepSpeed and FSDP reduce after the "
                           "linear's backward)",
                           FIELD(parallel.tp_linear_async_communication)),
                  [](const Scenario& s) {
                    return s.parallel.framework == Framework::Megatron ||
                           s.parallel.framework == Framework::Nanotron;
                  })
                  .in_cases("parallel.tp_linear_async_communication"));
  t.push_back(echoed_when(
                  bool_key("parallel.scatter_gather_tensors_in_pipeline", nullptr,
                           "each TP rank sends 1/tp of the activation or gradient between "
                           "pipeline stages and the receiver all-gathers it over TP, without "
                           "sequence_parallel: Megatron-LM's scatter_gather_tensors_in_pipeline "
                           "(default on from 2021-02 until Megatron-core's pipeline, 2023-03; "
                           "--no-scatter-gather-tensors-in-pipeline), DeepSpeed's "
                           "PipelineEngine (pipe_partitioned and grad_partitioned) (default: true "
                           "for deepspeed, false for megatron as Megatron-core sends whole "
                           "tensors)",
                           FIELD(parallel.scatter_gather_tensors_in_pipeline)),
                  [](const Scenario& s) { return s.pipeline_tensors_whole_over_tp(); })
                  .in_cases("parallel.scatter_gather_tensors_in_pipeline"));
  t.push_back(megatron_only(bool_key("parallel.overlap_p2p_comm", nullptr,
                                     "Megatron-core's overlap_p2p_comm (Megatron-LM "
                                     "--no-overlap-p2p-communication turns it off): with the "
                                     "interleaved schedule each pipeline receive is posted one "
                                     "pass early, its transfer under the other direction's "
                                     "compute (default: true with the interleaved schedule, not "
                                     "the combined 1F1B, as Megatron-LM since 2023-10 and "
                                     "Megatron-Bridge set it)",
                                     FIELD(parallel.overlap_p2p_comm)))
                  .in_cases("parallel.overlap_p2p_comm"));
  t.push_back(bool_key("parallel.overlap_moe_expert_parallel_comm", false,
                       "Megatron-core --overlap-moe-expert-parallel-comm (Bridge's moe_a2a_overlap): "
                       "the combined 1F1B schedule, a steady-state forward and the next backward "
                       "run layer by layer side by side, their MoE all-to-alls on their own "
                       "stream behind each other's compute (needs ep > 1 and, with pp > 1, "
                       "virtual_stages > 1)",
                       FIELD(parallel.overlap_moe_expert_parallel_comm))
                  .in_cases("parallel.overlap_moe_expert_parallel_comm"));
  t.push_back(megatron_only(bool_key("parallel.delay_wgrad_compute", false,
                                     "Megatron-core --delay-wgrad-compute (Bridge's "
                                     "comm_overlap.delay_wgrad_compute), with "
                                     "overlap_moe_expert_parallel_comm: in the combined 1F1B "
                                     "each layer block's weight gradient runs after its input "
                                     "gradient, which the next all-to-all waits for alone",
                                     FIELD(parallel.delay_wgrad_compute)))
                  .in_cases("parallel.delay_wgrad_compute"));
  t.push_back(moe_only(enum_key(
                       "parallel.moe_token_dispatcher_type", "alltoall", kMoeDispatcherNames,
                       "Megatron-core --moe-token-dispatcher-type: alltoall (every token once "
                       "per expert, NCCL all-to-all), flex (DeepEP: once per node over the "
                       "network, forwarded once per rank over NVLink; needs framework megatron "
                       "and expert TP 1), allgather (simulated as alltoall)",
                       FIELD(parallel.moe_token_dispatcher_type))
                  .in_cases("parallel.moe_token_dispatcher_type")));
  t.push_back(moe_only(bool_key("parallel.moe_permute_fusion", false,
                                "Megatron-core --moe-permute-fusion: Transformer Engine's fused "
                                "permute / unpermute kernels; changes the MoE block's host ops "
                                "(their HBM traffic is priced as the unfused permutation's)",
                                FIELD(parallel.moe_permute_fusion))
                           .in_cases("parallel.moe_permute_fusion")));
  t.push_back(moe_only(enum_key("parallel.moe_dispatch_fwd_dtype", "bf16", kWireDtypeNames,
                       "Megatron-core --moe-dispatch-fwd-dtype: the flex dispatcher's forward "
                       "dispatch on the wire, bf16 or mxfp8 (DeepSeek-V3's FP8 dispatch moves "
                       "the same bytes)",
                       FIELD(parallel.moe_dispatch_fwd_dtype))
                  .in_cases("parallel.moe_dispatch_fwd_dtype")));
  t.push_back(moe_only(enum_key("parallel.moe_combine_bwd_dtype", "bf16", kWireDtypeNames,
                       "Megatron-core --moe-combine-bwd-dtype: the flex dispatcher's combine "
                       "backward (the output gradients sent to the experts) on the wire, bf16 "
                       "or mxfp8",
                       FIELD(parallel.moe_combine_bwd_dtype))
                  .in_cases("parallel.moe_combine_bwd_dtype")));
  KeySpec ddp_bucket = count_key("parallel.ddp_bucket_size", nullptr,
                                 "Megatron-core --ddp-bucket-size: parameters per DDP gradient "
                                 "bucket with overlap_grad_reduce (default: max(40M, 1M x "
                                 "data-parallel size)); as Megatron-core does, pipeline stages "
                                 "after the first, model chunks after the first and every chunk "
                                 "without overlap_grad_reduce keep one bucket",
                                 FIELD(parallel.ddp_bucket_size));
  ddp_bucket.echo = [](const Scenario& s) {
    return s.parallel.ddp_bucket_size > 0 ? json(s.parallel.ddp_bucket_size) : json();
  };
  t.push_back(megatron_only(std::move(ddp_bucket)).in_cases("parallel.ddp_bucket_size"));
  // Only Megatron has it: the echo of another framework's scenario leaves it out.
  t.push_back(megatron_only(bool_key("parallel.grad_reduce_in_fp32", nullptr,
                                     "Megatron-core's DDP grad_reduce_in_fp32: gradients "
                                     "accumulated and reduced in fp32 (default: true with bf16 "
                                     "or fp8, as Megatron-LM sets it unless "
                                     "--grad-reduce-in-bf16; false with fp16)",
                                     FIELD(parallel.grad_reduce_in_fp32)))
                  .in_cases("parallel.grad_reduce_in_fp32"));
}

// DeepSpeed's zero_optimization section, with DeepSpeed's names and units.
void add_zero_keys(std::vector<KeySpec>& t) {
  const std::string ds = "zero_optimization.";
  t.push_back(int_key("zero.stage", 0, 0, 3, "ZeRO stage 0 (DDP), 1, 2 or 3", FIELD(zero.stage))
                  .flag("zero", "ZeRO stage 0-3 (sets zero.stage)")
                  .in_deepspeed(ds + "stage")
                  .in_cases("parallel.zero_stage"));
  t.push_back(count_key("zero.reduce_bucket_size", 500000000,
                        "elements per gradient reduction bucket (\"auto\" = hidden^2)",
                        FIELD(zero.reduce_bucket_size), {hidden_squared, "hidden_size^2"})
                  .in_deepspeed(ds + "reduce_bucket_size")
                  .in_cases("parallel.reduce_bucket_size"));
  t.push_back(enum_key("zero.communication_data_type", "default", kCommDtypeNames,
                       "dtype gradients are reduced in (DeepSpeed communication_data_type): "
                       "default = the framework's own (16-bit for DeepSpeed, fp32 for Megatron "
                       "and nanotron in bf16)",
                       FIELD(zero.communication_dtype))
                  .in_deepspeed("communication_data_type"));
  // DeepSpeed's engine (runtime/engine.py) replaces communication_data_type by this one when
  // sequence parallelism is on; its default is fp32 (runtime/constants.py).
  t.push_back(ulysses_only(enum_key("zero.seq_parallel_communication_data_type", "fp32",
                                    kSeqCommDtypeNames,
                                    "dtype gradients are reduced in under DeepSpeed's sequence "
                                    "parallelism (deepspeed, cp > 1), in place of "
                                    "communication_data_type (DeepSpeed "
                                    "seq_parallel_communication_data_type)",
                                    FIELD(zero.seq_parallel_communication_dtype)))
                  .in_deepspeed("seq_parallel_communication_data_type"));
  t.push_back(count_key("zero.allgather_bucket_size", 500000000,
                        "elements per parameter all-gather bucket after the step (stages 1, 2)",
                        FIELD(zero.allgather_bucket_size))
                  .in_deepspeed(ds + "allgather_bucket_size"));
  t.push_back(bool_key("zero.overlap_comm", nullptr,
                       "reduce gradients on a side stream during backward (DeepSpeed default: "
                       "true for stage 3, false otherwise)",
                       FIELD(zero.overlap_comm))
                  .in_deepspeed(ds + "overlap_comm")
                  .in_cases("parallel.overlap_comm"));
  t.push_back(bool_key("zero.contiguous_gradients", true,
                       "copy gradients into a contiguous buffer", FIELD(zero.contiguous_gradients))
                  .in_deepspeed(ds + "contiguous_gradients")
                  .in_cases("parallel.contiguous_gradients"));
  t.push_back(bool_key("zero.reduce_scatter", true, "reduce gradients with reduce-scatter",
                       FIELD(zero.reduce_scatter))
                  .in_deepspeed(ds + "reduce_scatter"));
  t.push_back(bool_key("zero.use_multi_rank_bucket_allreduce", true,
                       "stages 1/2: reduce each bucket with one all-reduce (DeepSpeed >= 0.12) "
                       "instead of one reduce per owning rank",
                       FIELD(zero.use_multi_rank_bucket_allreduce))
                  .in_deepspeed(ds + "use_multi_rank_bucket_allreduce"));
  t.push_back(count_key("zero.stage3_prefetch_bucket_size", 50000000,
                        "elements of parameters fetched ahead (\"auto\" = 0.9 hidden^2)",
                        FIELD(zero.stage3_prefetch_bucket_size),
                        {prefetch_auto, "0.9 x hidden_size^2"})
                  .in_deepspeed(ds + "stage3_prefetch_bucket_size")
                  .in_cases("parallel.stage3_prefetch_bucket_size"));
  t.push_back(count_key("zero.stage3_max_live_parameters", 1000000000,
                        "elements of gathered parameters kept alive at most",
                        FIELD(zero.stage3_max_live_parameters))
                  .in_deepspeed(ds + "stage3_max_live_parameters")
                  .in_cases("parallel.stage3_max_live_parameters"));
  t.push_back(count_key("zero.stage3_max_reuse_distance", 1000000000,
                        "elements; a parameter reused within this distance is not released",
                        FIELD(zero.stage3_max_reuse_distance))
                  .in_deepspeed(ds + "stage3_max_reuse_distance")
                  .in_cases("parallel.stage3_max_reuse_distance"));
  t.push_back(count_key("zero.stage3_param_persistence_threshold", 100000,
                        "elements; smaller parameters stay gathered (\"auto\" = 10 hidden)",
                        FIELD(zero.stage3_param_persistence_threshold),
                        {persistence_auto, "10 x hidden_size"})
                  .in_deepspeed(ds + "stage3_param_persistence_threshold")
                  .in_cases("parallel.stage3_param_persistence_threshold"));
  t.push_back(enum_key("zero.stage3_implementation", "coalesced", kStage3ImplementationNames,
                       "coalesced: DeepSpeed >= 0.6.4 (module hooks, prefetched gathers; as "
                       "0.6.6 and later keep what their prefetch skipped past); "
                       "coalesced-v0.6.0: DeepSpeed 0.6.0-0.6.3, whose prefetch also counts the "
                       "parameters it finds gathered toward stage3_prefetch_bucket_size; "
                       "per-parameter: DeepSpeed 0.3.13-0.5 (2021), one synchronous all-gather "
                       "and one reduce-scatter per parameter tensor, each building world-size "
                       "tensor lists on the host",
                       FIELD(zero.stage3_implementation))
                  .in_cases("parallel.stage3_implementation"));
  t.push_back(enum_key("zero.offload_optimizer.device", "none", kOffloadDeviceNames,
                       "where optimizer states live", FIELD(zero.offload_optimizer))
                  .in_deepspeed(ds + "offload_optimizer.device")
                  .in_cases("parallel.offload_optimizer"));
  t.push_back(enum_key("zero.offload_param.device", "none", kOffloadDeviceNames,
                       "where stage-3 parameters live", FIELD(zero.offload_param))
                  .in_deepspeed(ds + "offload_param.device")
                  .in_cases("parallel.offload_param"));
  t.push_back(bool_key("zero.offload_optimizer.delayed_param_update", false,
                       "ZeRO-Offload's one-step delayed parameter update (DPU): the CPU step of "
                       "step i overlaps the forward and backward of step i+1 (zerosim's key; "
                       "DeepSpeed has no config key)",
                       FIELD(zero.delayed_param_update))
                  .in_cases("parallel.delayed_param_update"));
  t.push_back(bool_key("zero.zero_quantized_weights", false,
                       "ZeRO++ qwZ: stage-3 parameter all-gathers in int8 blocks with fp32 scales",
                       FIELD(zero.quantized_weights))
                  .in_deepspeed(ds + "zero_quantized_weights")
                  .in_cases("parallel.zero_quantized_weights"));
  t.push_back(int_key("zero.zero_hpz_partition_size", 1, 1, 1 << 20,
                      "ZeRO++ hpZ: a secondary copy of the parameters sharded over this many "
                      "ranks (a node) serves the backward all-gathers; 1 = off",
                      FIELD(zero.hpz_partition_size))
                  .in_deepspeed(ds + "zero_hpz_partition_size")
                  .in_cases("parallel.zero_hpz_partition_size"));
  t.push_back(bool_key("zero.zero_quantized_gradients", false,
                       "ZeRO++ qgZ: stage-3 gradients reduced in int4 with a hierarchical "
                       "all-to-all",
                       FIELD(zero.quantized_gradients))
                  .in_deepspeed(ds + "zero_quantized_gradients")
                  .in_cases("parallel.zero_quantized_gradients"));
  t.push_back(int_key("zero.mics_shard_size", -1, -1, 1 << 20,
                      "MiCS / FSDP HYBRID_SHARD: shard the model states over groups of this many "
                      "ranks and replicate across the groups; -1 = shard over the whole DP group",
                      FIELD(zero.mics_shard_size))
                  .in_deepspeed(ds + "mics_shard_size")
                  .in_cases("parallel.mics_shard_size"));
}

int num_gpus(const Scenario& s) { return s.cluster.num_gpus(); }
int num_nodes(const Scenario& s) { return s.cluster.nodes; }

void add_sim_and_whatif_keys(std::vector<KeySpec>& t) {
  t.push_back(enum_key("sim.network", "flow", kNetworkModelNames,
                       "analytical: NCCL's closed form per collective, no contention; flow: "
                       "collectives as flows sharing the topology's links max-min fairly; "
                       "alpha-beta: one ring formula per link class",
                       FIELD(sim.network)));
  t.push_back(enum_key("sim.granularity", "layer", kGranularityNames, "one op per layer pass",
                       FIELD(sim.layer_granularity)));
  t.push_back(enum_key("sim.ranks", "folded", kRanksNames,
                       "folded: simulate one data-parallel replica, which stands for all (exact "
                       "when replicas cannot contend, as with the analytical network); all: every "
                       "rank",
                       FIELD(sim.folded)));
  KeySpec slow = ranks_key("whatif.slow_ranks",
                           "cluster ranks whose GPUs are slower (stragglers), e.g. [3] or \"0,17\"",
                           FIELD(whatif.slow_ranks), num_gpus);
  slow.unit = "cluster ranks";
  t.push_back(std::move(slow));
  t.push_back(number_key("whatif.slowdown", 1.0, 1.0, 1e6,
                         "how much longer their compute takes: 1.25 = 25 % slower (>= 1)",
                         FIELD(whatif.slowdown)));
  t.push_back(number_key("whatif.nic_bandwidth_factor", 1.0, 1e-6, 1.0,
                         "scale of every NIC's bandwidth on the degraded nodes, 0 < f <= 1",
                         FIELD(whatif.nic_bandwidth_factor)));
  KeySpec degraded = ranks_key("whatif.degraded_nodes",
                               "nodes whose NICs run at nic_bandwidth_factor (a degraded or "
                               "flapping link)",
                               FIELD(whatif.degraded_nodes), num_nodes);
  degraded.unit = "nodes";
  t.push_back(std::move(degraded));
  t.push_back(int_key("whatif.background_nodes", 0, 0, 1 << 20,
                      "nodes of a second job on the same fabric (added to the cluster's; "
                      "sim.network=flow)",
                      FIELD(whatif.background_nodes)));
  t.push_back(enum_key("whatif.background_placement", "interleaved", kPlacementNames,
                       "where the second job's nodes sit: alternating with this job's, or after "
                       "them",
                       FIELD(whatif.background_placement)));
  t.push_back(enum_key("whatif.background_pattern", "ring", kPatternNames,
                       "the second job's traffic: a ring through its nodes on every rail (DP "
                       "all-reduce), or every node to every other",
                       FIELD(whatif.background_pattern)));
  t.push_back(number_key("whatif.background_load", 1.0, 1e-6, 1.0,
                         "share of each NIC's bandwidth the second job offers, 0 < load <= 1",
                         FIELD(whatif.background_load)));
  KeySpec adam = number_key("sim.adam_params_per_s", nullptr, 1e3, 1e15,
                            "measured optimizer rate per GPU (from --calibration); default: HBM "
                            "bandwidth / 34 B",
                            FIELD(sim.adam_params_per_s));
  adam.echo = [](const Scenario& s) {
    return s.sim.adam_params_per_s > 0 ? json(s.sim.adam_params_per_s) : json();
  };
  t.push_back(std::move(adam));
  t.push_back(bool_key("sim.allow_oom", false,
                       "simulate even when the peak memory exceeds the GPU's (the report says it "
                       "does not fit)",
                       FIELD(sim.allow_oom))
                  .switch_flag("allow-oom", "simulate even if the step does not fit"));
}

// The fitted constants (sim/fitted/fitted_constants.h): each key's help says what it was fitted
// on and how, so `zerosim list keys` shows it.
std::string fitted_help(const fitted::FittedConstant& c, const std::string& what) {
  return what + "; FITTED on " + c.fitted_on + "; " + c.method;
}

void add_fitted_keys(std::vector<KeySpec>& t) {
  using namespace fitted;
  t.push_back(number_key(kGemmSustained.key, kGemmSustained.value, 0.05, 1.0,
                         fitted_help(kGemmSustained,
                                     "share of the GPU's best GEMM rate (MAMF) a training step "
                                     "sustains"),
                         FIELD(fitted.gemm_sustained)));
  t.push_back(time_key(kNcclLaunchOverhead.key,
                       quantity_text(kNcclLaunchOverhead.value, Dimension::Time), 1e-3,
                       fitted_help(kNcclLaunchOverhead,
                                   "host and launch time of one NCCL call outside CUDA graphs"),
                       FIELD(fitted.nccl_launch_overhead)));
  t.push_back(time_key(kLayerHostOpTime.key,
                       quantity_text(kLayerHostOpTime.value, Dimension::Time), 1e-3,
                       fitted_help(kLayerHostOpTime,
                                   "host time per counted PyTorch op of a layer block's pass "
                                   "(eager Megatron / DeepSpeed layers)"),
                       FIELD(fitted.layer_host_op_time)));
}

#undef FIELD

std::vector<KeySpec> build_table() {
  std::vector<KeySpec> t;
  add_model_and_cluster(t);
  add_training_keys(t);
  add_parallel_keys(t);
  add_zero_keys(t);
  add_sim_and_whatif_keys(t);
  add_fitted_keys(t);
  return t;
}

}  // namespace

const std::vector<KeySpec>& scenario_keys() {
  static const std::vector<KeySpec> keys = build_table();
  return keys;
}

const KeySpec* find_key(const std::string& path) {
  for (const auto& k : scenario_keys()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

std::vector<BoundFlag> scenario_flags() {
  std::vector<BoundFlag> out;
  for (const KeySpec& k : scenario_keys()) {
    for (const ScenarioFlag& f : k.flags) {
      out.push_back({&f, f.sub.empty() ? k.path : key_join(k.path, f.sub)});
    }
  }
  return out;
}

std::string to_string(Framework f) { return name_of<Framework>(kFrameworkNames, f); }

}  // namespace zerosim
