#include "sim/scenario/scenario.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/json_input.h"
#include "sim/core/quantity.h"

namespace zerosim {

std::string to_string(Framework f) {
  switch (f) {
    case Framework::DeepSpeed: return "deepspeed";
    case Framework::Megatron: return "megatron";
    case Framework::Fsdp: return "fsdp";
    case Framework::Nanotron: return "nanotron";
  }
  return "?";
}

namespace {

using json = nlohmann::json;

const std::vector<KeySpec>& registry() {
  static const std::vector<KeySpec> keys = {
      {"model", "object", "llama2-7b", {},
       "a preset name (zerosim list models), a path to a Hugging Face config.json, or an object "
       "with the case-format keys"},
      {"cluster", "object", json{{"preset", "dgx-h100"}, {"nodes", 2}}, {},
       "{\"preset\": name, \"nodes\": n} or {\"preset\": name, \"num_gpus\": g}, plus overrides"},
      {"training.micro_batch_size", "int", nullptr, {},
       "sequences per GPU per micro-batch (DeepSpeed train_micro_batch_size_per_gpu)"},
      {"training.global_batch_size", "int", nullptr, {},
       "sequences per optimizer step over all DP ranks (DeepSpeed train_batch_size)"},
      {"training.gradient_accumulation_steps", "int", nullptr, {},
       "micro-batches per step on each DP rank; the missing one of the three batch keys is "
       "derived with DeepSpeed's rule"},
      {"training.precision", "enum", "bf16", {"bf16", "fp16"}, "16-bit training precision"},
      {"training.flash_attention", "bool", true, {}, "fused attention without the s^2 matrix"},
      {"parallel.tp", "int", 1, {}, "tensor-parallel degree"},
      {"parallel.pp", "int", 1, {}, "pipeline-parallel degree"},
      {"parallel.dp", "int", nullptr, {}, "data-parallel degree (derived: GPUs / (tp*pp*cp))"},
      {"parallel.cp", "int", 1, {}, "context-parallel degree"},
      {"parallel.virtual_stages", "int", 1, {}, "interleaved pipeline stages per GPU"},
      {"parallel.pipeline_schedule", "enum", nullptr, {"1f1b", "gpipe", "interleaved"},
       "pipeline schedule (default: interleaved when virtual_stages > 1, else 1f1b)"},
      {"parallel.sequence_parallel", "bool", false, {}, "Megatron sequence parallelism"},
      {"parallel.recompute", "enum", "none", {"none", "selective", "full"},
       "activation recomputation"},
      {"parallel.framework", "enum", "deepspeed", {"deepspeed", "megatron", "fsdp", "nanotron"},
       "whose schedule to mirror"},
      {"parallel.overlap_grad_reduce", "bool", false, {},
       "Megatron --overlap-grad-reduce: DP gradient reduction bucket by bucket during the last "
       "micro-batch's backward"},
      {"parallel.overlap_param_gather", "bool", false, {},
       "Megatron --overlap-param-gather: the distributed optimizer's parameter all-gather "
       "overlapped with the next step's forward"},
      {"zero.stage", "int", 0, {}, "ZeRO stage 0 (DDP), 1, 2 or 3"},
      {"zero.reduce_bucket_size", "count", 500000000, {},
       "elements per gradient reduction bucket (\"auto\" = hidden^2)"},
      {"zero.allgather_bucket_size", "count", 500000000, {},
       "elements per parameter all-gather bucket after the step (stages 1, 2)"},
      {"zero.overlap_comm", "bool", nullptr, {},
       "reduce gradients on a side stream during backward (DeepSpeed default: true for stage 3, "
       "false otherwise)"},
      {"zero.contiguous_gradients", "bool", true, {}, "copy gradients into a contiguous buffer"},
      {"zero.reduce_scatter", "bool", true, {}, "reduce gradients with reduce-scatter"},
      {"zero.use_multi_rank_bucket_allreduce", "bool", true, {},
       "stages 1/2: reduce each bucket with one all-reduce (DeepSpeed >= 0.12) instead of one "
       "reduce per owning rank"},
      {"zero.stage3_prefetch_bucket_size", "count", 50000000, {},
       "elements of parameters fetched ahead (\"auto\" = 0.9 hidden^2)"},
      {"zero.stage3_max_live_parameters", "count", 1000000000, {},
       "elements of gathered parameters kept alive at most"},
      {"zero.stage3_max_reuse_distance", "count", 1000000000, {},
       "elements; a parameter reused within this distance is not released"},
      {"zero.stage3_param_persistence_threshold", "count", 100000, {},
       "elements; smaller parameters stay gathered (\"auto\" = 10 hidden)"},
      {"zero.stage3_implementation", "enum", "coalesced", {"coalesced", "per-parameter"},
       "coalesced: DeepSpeed >= 0.6 (batched, prefetched gathers); per-parameter: DeepSpeed "
       "0.3.13-0.5 (2021), one synchronous all-gather and one reduce-scatter per parameter "
       "tensor, each building world-size tensor lists on the host"},
      {"zero.offload_optimizer.device", "enum", "none", {"none", "cpu", "nvme"},
       "where optimizer states live"},
      {"zero.offload_param.device", "enum", "none", {"none", "cpu", "nvme"},
       "where stage-3 parameters live"},
      {"zero.offload_optimizer.delayed_param_update", "bool", false, {},
       "ZeRO-Offload's one-step delayed parameter update (DPU): the CPU step of step i overlaps "
       "the forward and backward of step i+1 (zerosim's key; DeepSpeed has no config key)"},
      {"zero.zero_quantized_weights", "bool", false, {},
       "ZeRO++ qwZ: stage-3 parameter all-gathers in int8 blocks with fp32 scales"},
      {"zero.zero_hpz_partition_size", "int", 1, {},
       "ZeRO++ hpZ: a secondary copy of the parameters sharded over this many ranks (a node) "
       "serves the backward all-gathers; 1 = off"},
      {"zero.zero_quantized_gradients", "bool", false, {},
       "ZeRO++ qgZ: stage-3 gradients reduced in int4 with a hierarchical all-to-all"},
      {"zero.mics_shard_size", "int", -1, {},
       "MiCS / FSDP HYBRID_SHARD: shard the model states over groups of this many ranks and "
       "replicate across the groups; -1 = shard over the whole DP group"},
      {"sim.network", "enum", "flow", {"analytical", "flow", "alpha-beta"},
       "analytical: NCCL's closed form per collective, no contention; flow: collectives as "
       "flows sharing the topology's links max-min fairly; alpha-beta: one ring formula per "
       "link class"},
      {"sim.granularity", "enum", "layer", {"layer"}, "one op per layer pass"},
      {"sim.ranks", "enum", "folded", {"folded", "all"},
       "folded: simulate one data-parallel replica, which stands for all (exact when replicas "
       "cannot contend, as with the analytical network); all: every rank"},
      {"whatif.slow_ranks", "ranks", json::array(), {},
       "cluster ranks whose GPUs are slower (stragglers), e.g. [3] or \"0,17\""},
      {"whatif.slowdown", "number", 1.0, {},
       "how much longer their compute takes: 1.25 = 25 % slower (>= 1)"},
      {"whatif.nic_bandwidth_factor", "number", 1.0, {},
       "scale of every NIC's bandwidth on the degraded nodes, 0 < f <= 1"},
      {"whatif.degraded_nodes", "ranks", json::array(), {},
       "nodes whose NICs run at nic_bandwidth_factor (a degraded or flapping link)"},
      {"whatif.background_nodes", "int", 0, {},
       "nodes of a second job on the same fabric (added to the cluster's; sim.network=flow)"},
      {"whatif.background_placement", "enum", "interleaved", {"interleaved", "after"},
       "where the second job's nodes sit: alternating with this job's, or after them"},
      {"whatif.background_pattern", "enum", "ring", {"ring", "all-to-all"},
       "the second job's traffic: a ring through its nodes on every rail (DP all-reduce), or "
       "every node to every other"},
      {"whatif.background_load", "number", 1.0, {},
       "share of each NIC's bandwidth the second job offers, 0 < load <= 1"},
      {"sim.adam_params_per_s", "number", nullptr, {},
       "measured optimizer rate per GPU (from --calibration); default: HBM bandwidth / 34 B"},
      {"sim.allow_oom", "bool", false, {},
       "simulate even when the peak memory exceeds the GPU's (the report says it does not fit)"},
  };
  return keys;
}

const KeySpec* find_key(const std::string& path) {
  for (const auto& k : registry()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

std::vector<std::string> all_paths() {
  std::vector<std::string> out;
  for (const auto& k : registry()) out.push_back(k.path);
  return out;
}

// Keys whose value is "auto" in a DeepSpeed config and resolved from the model.
bool accepts_auto(const std::string& path) {
  return path == "zero.reduce_bucket_size" || path == "zero.stage3_prefetch_bucket_size" ||
         path == "zero.stage3_param_persistence_threshold";
}

// Reports the first key of `doc` that the registry does not declare.
void check_unknown_keys(const json& node, const std::string& prefix) {
  if (!node.is_object()) {
    throw InputError(prefix, std::string("expected an object, got ") + node.type_name());
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string path = key_join(prefix, it.key());
    const KeySpec* spec = find_key(path);
    if (spec) continue;
    bool is_section = false;
    for (const auto& k : registry()) {
      if (k.path.rfind(path + ".", 0) == 0) is_section = true;
    }
    if (is_section) {
      check_unknown_keys(it.value(), path);
      continue;
    }
    std::vector<std::string> siblings;
    for (const auto& k : registry()) {
      if (prefix.empty() || k.path.rfind(prefix + ".", 0) == 0) {
        siblings.push_back(prefix.empty() ? k.path.substr(0, k.path.find('.')) : k.path);
      }
    }
    std::vector<std::string> names;
    std::set<std::string> seen;
    for (const auto& s : siblings) {
      std::string name = prefix.empty() ? s : s.substr(prefix.size() + 1);
      if (seen.insert(name).second) names.push_back(name);
    }
    throw InputError(path, "unknown key" + did_you_mean(it.key(), names) + "; allowed here: " +
                               join_list(names));
  }
}

const json* lookup(const json& doc, const std::string& path) {
  const json* node = &doc;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

json& lookup_or_create(json& doc, const std::string& path) {
  json* node = &doc;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object()) *node = json::object();
    node = &(*node)[part];
    if (dot == std::string::npos) return *node;
    start = dot + 1;
  }
}

// Typed access to the document with the key path in every error.
class Reader {
 public:
  explicit Reader(const json& doc) : doc_(doc) {}

  bool has(const std::string& path) const {
    const json* v = lookup(doc_, path);
    return v && !v->is_null();
  }
  const json& raw(const std::string& path) const {
    const json* v = lookup(doc_, path);
    if (v && !v->is_null()) return *v;
    return find_key(path)->default_value;
  }
  std::int64_t integer(const std::string& path, std::int64_t min, std::int64_t max) const {
    const json& v = raw(path);
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
  std::int64_t count(const std::string& path, double auto_value) const {
    const json& v = raw(path);
    // The Hugging Face integration computes these with int(), which truncates.
    if (v.is_string() && v.get<std::string>() == "auto") return static_cast<std::int64_t>(auto_value);
    double d = parse_quantity(v, Dimension::Count, path);
    if (d < 0 || d > 1e15 || d != std::floor(d)) {
      throw InputError(path, "must be a whole number of elements between 0 and 1e15, got " +
                                 v.dump());
    }
    return static_cast<std::int64_t>(d);
  }
  double number(const std::string& path, double min, double max) const {
    const json& v = raw(path);
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
  // A list of non-negative integers: a JSON array, or a comma-separated string from --set.
  std::vector<int> ranks(const std::string& path, int limit) const {
    const json& v = raw(path);
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
  bool boolean(const std::string& path) const {
    const json& v = raw(path);
    if (!v.is_boolean()) throw InputError(path, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string choice(const std::string& path) const {
    const json& v = raw(path);
    const KeySpec* spec = find_key(path);
    if (!v.is_string()) {
      throw InputError(path, "expected one of " + join_list(spec->allowed) + ", got " + v.dump());
    }
    std::string s = v.get<std::string>();
    for (const auto& a : spec->allowed) {
      if (a == s) return s;
    }
    throw InputError(path, "unknown value '" + s + "'" + did_you_mean(s, spec->allowed) +
                               "; allowed: " + join_list(spec->allowed));
  }

 private:
  const json& doc_;
};

OffloadDevice offload_device(const std::string& s) {
  return s == "cpu" ? OffloadDevice::Cpu : s == "nvme" ? OffloadDevice::Nvme : OffloadDevice::None;
}

Recompute recompute_from(const std::string& s) {
  return s == "selective" ? Recompute::Selective : s == "full" ? Recompute::Full : Recompute::None;
}

Framework framework_from(const std::string& s) {
  return s == "megatron" ? Framework::Megatron
         : s == "fsdp"   ? Framework::Fsdp
         : s == "nanotron" ? Framework::Nanotron
                         : Framework::DeepSpeed;
}

constexpr std::int64_t kMaxDegree = 1 << 24;

// DeepSpeed's rule (runtime/config.py, _set_batch_related_parameters): of train_batch_size,
// micro-batch and gradient accumulation, any two determine the third; all three must agree.
void resolve_batch(const Reader& in, TrainingConfig& t, int dp) {
  bool has_gbs = in.has("training.global_batch_size");
  bool has_mbs = in.has("training.micro_batch_size");
  bool has_gas = in.has("training.gradient_accumulation_steps");
  const std::int64_t lim = std::int64_t{1} << 40;
  std::int64_t gbs = has_gbs ? in.integer("training.global_batch_size", 1, lim) : 0;
  std::int64_t mbs = has_mbs ? in.integer("training.micro_batch_size", 1, lim) : 0;
  std::int64_t gas = has_gas ? in.integer("training.gradient_accumulation_steps", 1, lim) : 0;
  auto per_dp = [&](const char* what) {
    return "global_batch_size " + std::to_string(gbs) + " is not divisible by " + what;
  };
  if (has_gbs && has_mbs && has_gas) {
    if (gbs != mbs * gas * dp) {
      throw InputError("training.global_batch_size",
                       "must equal micro_batch_size x gradient_accumulation_steps x dp = " +
                           std::to_string(mbs) + " x " + std::to_string(gas) + " x " +
                           std::to_string(dp) + " = " + std::to_string(mbs * gas * dp) +
                           ", got " + std::to_string(gbs));
    }
  } else if (has_gbs && has_mbs) {
    if (gbs % (mbs * dp) != 0) {
      throw InputError("training.global_batch_size",
                       per_dp(("micro_batch_size x dp = " + std::to_string(mbs * dp)).c_str()));
    }
    gas = gbs / (mbs * dp);
  } else if (has_gbs && has_gas) {
    if (gbs % (gas * dp) != 0) {
      throw InputError("training.global_batch_size",
                       per_dp(("gradient_accumulation_steps x dp = " + std::to_string(gas * dp))
                                  .c_str()));
    }
    mbs = gbs / (gas * dp);
  } else if (has_gbs) {
    if (gbs % dp != 0) {
      throw InputError("training.global_batch_size", per_dp(("dp = " + std::to_string(dp)).c_str()));
    }
    gas = 1;
    mbs = gbs / dp;
  } else {
    if (!has_mbs) mbs = 1;
    if (!has_gas) gas = 1;
    gbs = mbs * gas * dp;
  }
  t.micro_batch_size = mbs;
  t.gradient_accumulation_steps = gas;
  t.global_batch_size = gbs;
}

}  // namespace

const std::vector<KeySpec>& scenario_keys() { return registry(); }

json default_scenario_document() {
  // GPT-3 175B on 128 DGX A100 nodes with Megatron's 3D layout: TP 8 inside a node, PP 8 with
  // two interleaved stages per GPU, ZeRO-1 (distributed optimizer), sequence parallelism and
  // selective recomputation (Korthikanti et al. 2022), global batch 1536 (Narayanan et al. SC21).
  return json{{"model", "gpt3-175b"},
              {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 128}}},
              {"training", {{"micro_batch_size", 1}, {"global_batch_size", 1536},
                            {"precision", "bf16"}}},
              {"parallel", {{"tp", 8}, {"pp", 8}, {"virtual_stages", 2},
                            {"sequence_parallel", true}, {"recompute", "selective"},
                            {"framework", "megatron"}}},
              {"zero", {{"stage", 1}}}};
}

json read_json_file(const std::string& path, const std::string& key_path) {
  return read_json_input_file(path, key_path);  // bounded: never reads past the size limit
}

void apply_setting(json& doc, const std::string& assignment) {
  std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError("--set", "expected KEY=VALUE (e.g. zero.stage=3), got '" + assignment + "'");
  }
  std::string path = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  const KeySpec* spec = find_key(path);
  bool free_form = path.rfind("model.", 0) == 0 || path.rfind("cluster.", 0) == 0;
  if (!spec && !free_form) {
    throw InputError(path, "unknown key" + did_you_mean(path, all_paths()) +
                               "; see `zerosim list keys`");
  }
  json value;
  if (spec && (spec->type == "enum" || (spec->type == "object" && path != "cluster"))) {
    value = text;
  } else {
    try {
      value = json::parse(text);
    } catch (const json::out_of_range&) {
      throw InputError(path, "number out of range: " + text);
    } catch (const json::parse_error&) {
      value = text;  // units ("400Gbps"), names: checked when the scenario is resolved
    }
  }
  if (path.rfind("model.", 0) == 0) {
    // A preset named by string becomes {"preset": name} so single fields can be overridden.
    json& model = lookup_or_create(doc, "model");
    if (model.is_string()) model = json{{"preset", model.get<std::string>()}};
    if (model.is_null()) model = json{{"preset", "llama2-7b"}};
  }
  lookup_or_create(doc, path) = value;
}

Scenario resolve_scenario(const json& doc) {
  check_unknown_keys(doc, "");
  Reader in(doc);
  Scenario s;
  s.model = model_from_json(in.raw("model"), "model");
  s.cluster = cluster_from_json(in.raw("cluster"), "cluster");
  const int gpus = s.cluster.num_gpus();

  ParallelConfig& p = s.parallel;
  p.tp = static_cast<int>(in.integer("parallel.tp", 1, kMaxDegree));
  p.pp = static_cast<int>(in.integer("parallel.pp", 1, kMaxDegree));
  p.cp = static_cast<int>(in.integer("parallel.cp", 1, kMaxDegree));
  p.virtual_stages = static_cast<int>(in.integer("parallel.virtual_stages", 1, kMaxDegree));
  p.sequence_parallel = in.boolean("parallel.sequence_parallel");
  p.recompute = recompute_from(in.choice("parallel.recompute"));
  p.framework = framework_from(in.choice("parallel.framework"));
  p.overlap_grad_reduce = in.boolean("parallel.overlap_grad_reduce");
  p.overlap_param_gather = in.boolean("parallel.overlap_param_gather");
  const std::int64_t model_parallel = std::int64_t{p.tp} * p.pp * p.cp;
  if (gpus % model_parallel != 0) {
    throw InputError("parallel", "tp x pp x cp = " + std::to_string(model_parallel) +
                                     " does not divide the cluster's " + std::to_string(gpus) +
                                     " GPUs");
  }
  p.dp = static_cast<int>(gpus / model_parallel);
  if (in.has("parallel.dp")) {
    std::int64_t dp = in.integer("parallel.dp", 1, kMaxDegree);
    if (dp * model_parallel != gpus) {
      throw InputError("parallel.dp", "dp x tp x pp x cp must equal the cluster's " +
                                          std::to_string(gpus) + " GPUs; with tp x pp x cp = " +
                                          std::to_string(model_parallel) + " the only dp is " +
                                          std::to_string(p.dp) + ", got " + std::to_string(dp));
    }
  }
  if (p.cp != 1) {
    throw InputError("parallel.cp", "context parallelism is not simulated yet; allowed: 1");
  }
  const ModelSpec& m = s.model;
  if (p.pp > m.num_layers) {
    throw InputError("parallel.pp", "must not exceed model.num_layers (" +
                                        std::to_string(m.num_layers) + "), got " +
                                        std::to_string(p.pp));
  }
  if (p.virtual_stages > 1) {
    if (p.pp == 1) {
      throw InputError("parallel.virtual_stages", "interleaving needs parallel.pp > 1; allowed: 1");
    }
    if (m.num_layers % (static_cast<std::int64_t>(p.pp) * p.virtual_stages) != 0) {
      throw InputError("parallel.virtual_stages",
                       "model.num_layers (" + std::to_string(m.num_layers) +
                           ") must be divisible by pp x virtual_stages = " +
                           std::to_string(p.pp * p.virtual_stages) + " (Megatron's rule)");
    }
  }
  if (in.has("parallel.pipeline_schedule")) {
    std::string sched = in.choice("parallel.pipeline_schedule");
    p.pipeline_schedule = sched == "gpipe"         ? PipelineSchedule::GPipe
                          : sched == "interleaved" ? PipelineSchedule::Interleaved
                                                   : PipelineSchedule::OneFOneB;
    if ((p.pipeline_schedule == PipelineSchedule::Interleaved) != (p.virtual_stages > 1)) {
      throw InputError("parallel.pipeline_schedule",
                       "'interleaved' goes with parallel.virtual_stages > 1 and only with it");
    }
  } else {
    p.pipeline_schedule =
        p.virtual_stages > 1 ? PipelineSchedule::Interleaved : PipelineSchedule::OneFOneB;
  }
  if (m.num_attention_heads % p.tp != 0) {
    throw InputError("parallel.tp", "must divide model.num_attention_heads (" +
                                        std::to_string(m.num_attention_heads) + "), got " +
                                        std::to_string(p.tp));
  }
  if (m.num_kv_heads % p.tp != 0 && p.tp % m.num_kv_heads != 0) {
    throw InputError("parallel.tp", "must divide model.num_kv_heads (" +
                                        std::to_string(m.num_kv_heads) +
                                        ") or be a multiple of it, got " + std::to_string(p.tp));
  }
  if (m.ffn_hidden_size % p.tp != 0) {
    throw InputError("parallel.tp", "must divide model.ffn_hidden_size (" +
                                        std::to_string(m.ffn_hidden_size) + "), got " +
                                        std::to_string(p.tp));
  }
  TrainingConfig& t = s.training;
  resolve_batch(in, t, p.dp);
  // Each micro-batch is hundreds of ops per rank: beyond 10^5 per step the plan would not fit
  // in memory, and no real run accumulates that many.
  constexpr std::int64_t kMaxMicroBatches = 100'000;
  if (t.gradient_accumulation_steps > kMaxMicroBatches) {
    throw InputError(in.has("training.gradient_accumulation_steps")
                         ? "training.gradient_accumulation_steps"
                         : "training.global_batch_size",
                     std::to_string(t.gradient_accumulation_steps) +
                         " micro-batches per step exceeds the " +
                         std::to_string(kMaxMicroBatches) +
                         " zerosim simulates; raise training.micro_batch_size");
  }

  if (p.pipeline_schedule == PipelineSchedule::Interleaved &&
      t.gradient_accumulation_steps % p.pp != 0) {
    throw InputError("training.gradient_accumulation_steps",
                     "the interleaved schedule needs the micro-batches per step (" +
                         std::to_string(t.gradient_accumulation_steps) +
                         ") to be a multiple of parallel.pp (" + std::to_string(p.pp) + ")");
  }
  t.precision = in.choice("training.precision") == "fp16" ? Precision::Fp16 : Precision::Bf16;
  try {
    (void)s.cluster.gpu.peak_tflops(t.precision);
  } catch (const std::invalid_argument&) {
    throw InputError("training.precision", s.cluster.gpu.name + " has no " +
                                               to_string(t.precision) +
                                               " tensor cores; use another precision");
  }
  t.flash_attention = in.boolean("training.flash_attention");

  ZeroConfig& z = s.zero;
  z.stage = static_cast<int>(in.integer("zero.stage", 0, 3));
  const double h = static_cast<double>(m.hidden_size);
  // "auto" as the Hugging Face DeepSpeed integration fills it from the model's hidden size.
  z.reduce_bucket_size = in.count("zero.reduce_bucket_size", h * h);
  z.allgather_bucket_size = in.count("zero.allgather_bucket_size", 0);
  z.stage3_prefetch_bucket_size = in.count("zero.stage3_prefetch_bucket_size", 0.9 * h * h);
  z.stage3_max_live_parameters = in.count("zero.stage3_max_live_parameters", 0);
  z.stage3_max_reuse_distance = in.count("zero.stage3_max_reuse_distance", 0);
  z.stage3_param_persistence_threshold =
      in.count("zero.stage3_param_persistence_threshold", 10 * h);
  for (const char* key : {"zero.allgather_bucket_size", "zero.stage3_max_live_parameters",
                          "zero.stage3_max_reuse_distance"}) {
    if (in.has(key) && in.raw(key).is_string() && in.raw(key).get<std::string>() == "auto") {
      throw InputError(key, "\"auto\" is not defined for this key; give a number of elements");
    }
  }
  if (z.reduce_bucket_size < 1) throw InputError("zero.reduce_bucket_size", "must be at least 1");
  if (z.allgather_bucket_size < 1) {
    throw InputError("zero.allgather_bucket_size", "must be at least 1");
  }
  z.overlap_comm = in.has("zero.overlap_comm") ? in.boolean("zero.overlap_comm") : z.stage == 3;
  z.contiguous_gradients = in.boolean("zero.contiguous_gradients");
  z.reduce_scatter = in.boolean("zero.reduce_scatter");
  z.use_multi_rank_bucket_allreduce = in.boolean("zero.use_multi_rank_bucket_allreduce");
  z.offload_optimizer = offload_device(in.choice("zero.offload_optimizer.device"));
  z.offload_param = offload_device(in.choice("zero.offload_param.device"));
  // DeepSpeed's own rules: optimizer offload needs a ZeRO stage (1, 2 or 3); parameter offload
  // exists only in stage 3 (partitioned parameters).
  if (z.offload_optimizer != OffloadDevice::None && z.stage == 0) {
    throw InputError("zero.offload_optimizer.device",
                     "optimizer offload needs zero.stage 1, 2 or 3 (DeepSpeed ZeRO-Offload)");
  }
  if (z.offload_param != OffloadDevice::None && z.stage != 3) {
    throw InputError("zero.offload_param.device",
                     "parameter offload exists only with zero.stage 3 (ZeRO-Infinity)");
  }
  if ((z.offload_optimizer != OffloadDevice::None || z.offload_param != OffloadDevice::None) &&
      p.framework != Framework::DeepSpeed) {
    throw InputError(z.offload_optimizer != OffloadDevice::None ? "zero.offload_optimizer.device"
                                                                : "zero.offload_param.device",
                     "offload is simulated as DeepSpeed runs it; set parallel.framework=deepspeed");
  }
  for (const char* key : {"zero.offload_optimizer.device", "zero.offload_param.device"}) {
    if (in.choice(key) == "nvme" && s.cluster.host.nvme_bandwidth <= 0) {
      throw InputError(key, "the cluster's nodes have no NVMe (cluster.host.nvme_bandwidth is 0)");
    }
  }
  z.per_parameter_stage3 = in.choice("zero.stage3_implementation") == "per-parameter";
  if (z.per_parameter_stage3 && (z.stage != 3 || p.framework != Framework::DeepSpeed)) {
    throw InputError("zero.stage3_implementation",
                     "describes DeepSpeed's stage 3; needs zero.stage 3 and parallel.framework "
                     "deepspeed");
  }
  z.delayed_param_update = in.boolean("zero.offload_optimizer.delayed_param_update");
  if (z.delayed_param_update && z.offload_optimizer == OffloadDevice::None) {
    throw InputError("zero.offload_optimizer.delayed_param_update",
                     "the delayed parameter update overlaps the CPU optimizer step; it needs "
                     "zero.offload_optimizer.device cpu or nvme");
  }
  z.quantized_weights = in.boolean("zero.zero_quantized_weights");
  z.hpz_partition_size = static_cast<int>(in.integer("zero.zero_hpz_partition_size", 1, 1 << 20));
  z.quantized_gradients = in.boolean("zero.zero_quantized_gradients");
  z.mics_shard_size = static_cast<int>(in.integer("zero.mics_shard_size", -1, 1 << 20));
  if (z.mics_shard_size == 0) {
    throw InputError("zero.mics_shard_size", "must be -1 (off) or a positive group size, got 0");
  }
  // Megatron's overlap flags: DDP (stage 0) or the distributed optimizer (stage 1); the
  // parameter gather exists only with the distributed optimizer (Megatron asserts it).
  if (p.overlap_grad_reduce && !(p.framework == Framework::Megatron && z.stage <= 1)) {
    throw InputError("parallel.overlap_grad_reduce",
                     "a Megatron-LM flag: needs parallel.framework megatron and zero.stage 0 "
                     "(DDP) or 1 (distributed optimizer)");
  }
  if (p.overlap_param_gather && !(p.framework == Framework::Megatron && z.stage == 1)) {
    throw InputError("parallel.overlap_param_gather",
                     "a Megatron-LM distributed-optimizer flag: needs parallel.framework "
                     "megatron and zero.stage 1");
  }
  // ZeRO++ and MiCS as DeepSpeed (and PyTorch FSDP for hybrid sharding) implement them.
  const bool deepspeed = p.framework == Framework::DeepSpeed;
  auto need_stage3 = [&](const char* key, const char* what) {
    if (z.stage != 3 || !deepspeed) {
      throw InputError(key, std::string(what) + " works on DeepSpeed's partitioned (stage-3) "
                                                "parameters; needs zero.stage 3 and "
                                                "parallel.framework deepspeed");
    }
  };
  auto need_divisor = [&](const char* key, int k) {
    if (p.dp % k != 0) {
      throw InputError(key, "must divide the data-parallel degree (" + std::to_string(p.dp) +
                                "), got " + std::to_string(k));
    }
  };
  if (z.quantized_weights) need_stage3("zero.zero_quantized_weights", "qwZ");
  if (z.quantized_gradients) need_stage3("zero.zero_quantized_gradients", "qgZ");
  if (z.hpz_partition_size > 1) {
    need_stage3("zero.zero_hpz_partition_size", "hpZ");
    need_divisor("zero.zero_hpz_partition_size", z.hpz_partition_size);
  }
  if (z.mics_shard_size > 0) {
    const bool fsdp = p.framework == Framework::Fsdp;
    if (!(fsdp && z.stage >= 2) && !(deepspeed && z.stage == 3)) {
      throw InputError("zero.mics_shard_size",
                       "hybrid sharding is DeepSpeed MiCS (zero.stage 3) or PyTorch FSDP "
                       "HYBRID_SHARD (parallel.framework fsdp, zero.stage 2 or 3)");
    }
    need_divisor("zero.mics_shard_size", z.mics_shard_size);
    if (z.hpz_partition_size > 1 || z.quantized_gradients) {
      throw InputError("zero.mics_shard_size",
                       "MiCS does not combine with hpZ or qgZ in DeepSpeed; set "
                       "zero.zero_hpz_partition_size 1 and zero.zero_quantized_gradients false");
    }
  }
  if (z.quantized_gradients) {
    const int per_node = std::max(1, s.cluster.gpus_per_node / (p.tp * p.cp));
    const int local = std::min(p.dp, per_node);
    if (p.dp % local != 0) {
      throw InputError("zero.zero_quantized_gradients",
                       "qgZ's all-to-all goes node by node: the data-parallel degree (" +
                           std::to_string(p.dp) + ") must be a multiple of the DP ranks per node (" +
                           std::to_string(local) + ")");
    }
    if (z.hpz_partition_size > 1 && z.hpz_partition_size != local) {
      throw InputError("zero.zero_hpz_partition_size",
                       "with qgZ, zerosim needs the hpZ group to be the node's DP ranks (" +
                           std::to_string(local) + "), got " +
                           std::to_string(z.hpz_partition_size));
    }
  }
  if (p.framework == Framework::Fsdp && z.stage != 3 && z.stage != 2) {
    throw InputError("zero.stage", "FSDP shards as ZeRO-3 (FULL_SHARD) or ZeRO-2 "
                                   "(SHARD_GRAD_OP); allowed: 2, 3");
  }

  const std::string network = in.choice("sim.network");
  s.sim.network = network == "flow"         ? NetworkModel::Flow
                  : network == "alpha-beta" ? NetworkModel::AlphaBeta
                                            : NetworkModel::Analytical;
  in.choice("sim.granularity");
  s.sim.allow_oom = in.boolean("sim.allow_oom");
  s.sim.folded = in.choice("sim.ranks") == "folded";
  if (in.has("sim.adam_params_per_s")) {
    s.sim.adam_params_per_s = in.number("sim.adam_params_per_s", 1e3, 1e15);
  }
  WhatIf& w = s.whatif;
  w.slow_ranks = in.ranks("whatif.slow_ranks", gpus);
  w.slowdown = in.number("whatif.slowdown", 1.0, 1e6);
  w.degraded_nodes = in.ranks("whatif.degraded_nodes", s.cluster.nodes);
  w.nic_bandwidth_factor = in.number("whatif.nic_bandwidth_factor", 1e-6, 1.0);
  w.background_nodes = static_cast<int>(in.integer("whatif.background_nodes", 0, 1 << 20));
  w.background_placement = in.choice("whatif.background_placement") == "after"
                               ? WhatIf::Placement::After
                               : WhatIf::Placement::Interleaved;
  w.background_pattern = in.choice("whatif.background_pattern") == "all-to-all"
                             ? WhatIf::Pattern::AllToAll
                             : WhatIf::Pattern::Ring;
  w.background_load = in.number("whatif.background_load", 1e-6, 1.0);
  if (w.background_nodes > 0 && s.sim.network != NetworkModel::Flow) {
    throw InputError("whatif.background_nodes",
                     "a second job sharing the fabric needs sim.network=flow (the other "
                     "network models have no shared links)");
  }
  // A straggler or a degraded node breaks the symmetry that folding relies on.
  if (!w.slow_ranks.empty() || !w.degraded_nodes.empty()) s.sim.folded = false;

  json r;
  r["model"] = model_to_json(m);
  r["cluster"] = cluster_to_json(s.cluster);
  r["training"] = {{"micro_batch_size", t.micro_batch_size},
                   {"global_batch_size", t.global_batch_size},
                   {"gradient_accumulation_steps", t.gradient_accumulation_steps},
                   {"precision", to_string(t.precision)},
                   {"flash_attention", t.flash_attention}};
  r["parallel"] = {{"tp", p.tp}, {"pp", p.pp}, {"dp", p.dp}, {"cp", p.cp},
                   {"virtual_stages", p.virtual_stages},
                   {"pipeline_schedule", p.pipeline_schedule == PipelineSchedule::GPipe ? "gpipe"
                                         : p.pipeline_schedule == PipelineSchedule::Interleaved
                                             ? "interleaved"
                                             : "1f1b"},
                   {"sequence_parallel", p.sequence_parallel},
                   {"recompute", to_string(p.recompute)},
                   {"framework", to_string(p.framework)},
                   {"overlap_grad_reduce", p.overlap_grad_reduce},
                   {"overlap_param_gather", p.overlap_param_gather}};
  auto device = [](OffloadDevice d) {
    return d == OffloadDevice::Cpu ? "cpu" : d == OffloadDevice::Nvme ? "nvme" : "none";
  };
  r["zero"] = {{"stage", z.stage},
               {"reduce_bucket_size", z.reduce_bucket_size},
               {"allgather_bucket_size", z.allgather_bucket_size},
               {"overlap_comm", z.overlap_comm},
               {"contiguous_gradients", z.contiguous_gradients},
               {"reduce_scatter", z.reduce_scatter},
               {"use_multi_rank_bucket_allreduce", z.use_multi_rank_bucket_allreduce},
               {"stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size},
               {"stage3_max_live_parameters", z.stage3_max_live_parameters},
               {"stage3_max_reuse_distance", z.stage3_max_reuse_distance},
               {"stage3_param_persistence_threshold", z.stage3_param_persistence_threshold},
               {"offload_optimizer", {{"device", device(z.offload_optimizer)},
                                      {"delayed_param_update", z.delayed_param_update}}},
               {"offload_param", {{"device", device(z.offload_param)}}},
               {"zero_quantized_weights", z.quantized_weights},
               {"zero_hpz_partition_size", z.hpz_partition_size},
               {"zero_quantized_gradients", z.quantized_gradients},
               {"mics_shard_size", z.mics_shard_size},
               {"stage3_implementation", z.per_parameter_stage3 ? "per-parameter" : "coalesced"}};
  r["sim"] = {{"network", network}, {"granularity", "layer"}, {"allow_oom", s.sim.allow_oom},
              {"ranks", s.sim.folded ? "folded" : "all"}};
  if (s.sim.adam_params_per_s > 0) r["sim"]["adam_params_per_s"] = s.sim.adam_params_per_s;
  r["whatif"] = {{"slow_ranks", w.slow_ranks}, {"slowdown", w.slowdown},
                 {"degraded_nodes", w.degraded_nodes},
                 {"nic_bandwidth_factor", w.nic_bandwidth_factor},
                 {"background_nodes", w.background_nodes},
                 {"background_placement",
                  w.background_placement == WhatIf::Placement::After ? "after" : "interleaved"},
                 {"background_pattern",
                  w.background_pattern == WhatIf::Pattern::AllToAll ? "all-to-all" : "ring"},
                 {"background_load", w.background_load}};
  s.resolved = std::move(r);
  return s;
}

}  // namespace zerosim
