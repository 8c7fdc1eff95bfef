// Reading a DeepSpeed ds_config.json into a scenario document, as DeepSpeed reads it. The
// reference is DeepSpeed's own config code: runtime/config.py (DeepSpeedConfig._initialize_params
// reads the top-level keys), runtime/constants.py (their names), runtime/zero/config.py
// (DeepSpeedZeroConfig, which forbids unknown zero_optimization keys) and
// runtime/zero/offload_config.py. Every key DeepSpeed reads is accepted; one that zerosim does not
// simulate is listed as a warning with its path in the user's file, never dropped silently.
#include <algorithm>
#include <cctype>
#include <set>

#include "sim/core/error.h"
#include "sim/input/json_input.h"
#include "sim/scenario/keys.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// Why a key changes nothing in the simulated step.
constexpr const char* kLogging = "logging, profiling or monitoring: no effect on the simulated step";
constexpr const char* kCheckpointing = "checkpoint saving and loading: outside the simulated step";
constexpr const char* kNumerics = "numerics only: the simulated step moves and computes the same";

struct NotSimulated {
  const char* key;
  const char* why;
};

// Top-level DeepSpeed keys that zerosim accepts without simulating them.
const std::vector<NotSimulated>& top_level_not_simulated() {
  static const std::vector<NotSimulated> keys = {
      {"optimizer", "zerosim steps mixed-precision Adam (12 bytes of fp32 states per parameter)"},
      {"scheduler", kNumerics},
      {"gradient_clipping", "the gradient norm's reduction and scaling are not simulated"},
      {"steps_per_print", kLogging},
      {"wall_clock_breakdown", kLogging},
      {"memory_breakdown", kLogging},
      {"flops_profiler", kLogging},
      {"comms_logger", kLogging},
      {"tensorboard", kLogging},
      {"wandb", kLogging},
      {"csv_monitor", kLogging},
      {"comet", kLogging},
      {"timers", kLogging},
      {"log_level", kLogging},
      {"dump_state", kLogging},
      {"zero_allow_untested_optimizer", "zerosim steps Adam whatever the optimizer"},
      {"zero_force_ds_cpu_optimizer", "zerosim's CPU step is DeepSpeed's CPU Adam"},
      {"prescale_gradients", "the gradient scaling kernel is not simulated"},
      {"gradient_predivide_factor", kNumerics},
      {"gradient_allreduce_op", kNumerics},
      {"sparse_gradients", "sparse embedding gradients are not simulated; they are reduced dense"},
      {"disable_allgather", "the parameter all-gather after the step is simulated as usual"},
      {"managed_gradient_accumulation", "gradient accumulation follows the scenario's batch keys"},
      {"amp", "Apex AMP is not simulated; the step runs in the scenario's training.precision"},
      {"torch_autocast", "autocast is not simulated; the step runs in training.precision"},
      {"elasticity", "elastic batch sizes are not simulated; the scenario's batch keys hold"},
      {"aio", "NVMe I/O runs at the cluster's NVMe bandwidth whatever its settings"},
      {"checkpoint", kCheckpointing},
      {"nebula", kCheckpointing},
      {"datastates_ckpt", kCheckpointing},
      {"load_universal_checkpoint", kCheckpointing},
      {"use_node_local_storage", kCheckpointing},
      {"data_types", "gradient accumulation in another dtype (grad_accum_dtype) is not simulated"},
      {"autotuning", "zerosim simulates the given configuration; use zerosim search to explore"},
      {"compression_training", "compression (quantization-aware training, pruning) is not simulated"},
      {"weight_quantization", "weight quantization is not simulated"},
      {"quantize_training", "quantization-aware training is not simulated"},
      {"data_efficiency", "curriculum and data sampling change the data, not the step"},
      {"curriculum_learning", "curriculum and data sampling change the data, not the step"},
      {"dataloader_drop_last", "the data loader is outside the simulated step"},
      {"vocabulary_size", "the model's vocab_size is what counts"},
      {"graph_harvesting", "CUDA graph capture of small kernels is not simulated"},
      {"compile", "torch.compile is not simulated"},
      {"eigenvalue", "eigenvalue computation (for MoQ) is not simulated"},
      {"progressive_layer_drop", "progressive layer drop is not simulated"},
      {"sparse_attention", "sparse attention is not simulated; attention is dense"},
      {"hybrid_engine", "the RLHF hybrid engine is not simulated"},
      {"use_data_before_expert_parallelism",
       "zerosim's expert groups are consecutive data-parallel ranks (DeepSpeed's default, false); "
       "the strided groups of true are not simulated"},
      {"expert_parallel", "the expert-parallel degree comes from parallel.ep (DeepSpeed's MoE "
                          "layers take their ep_size in the model code)"},
      {"data_parallel_size", "the data-parallel degree follows the cluster and parallel.tp/pp"},
      {"fp32_allreduce", "a legacy key (before communication_data_type); not simulated"},
      {"seed", "not a DeepSpeed key (DeepSpeed ignores it)"},
      {"disable_python_gc", "the host's Python garbage collection is not simulated"},
  };
  return keys;
}

// zero_optimization keys (DeepSpeedZeroConfig) that zerosim accepts without simulating them.
const std::vector<NotSimulated>& zero_not_simulated() {
  static const std::vector<NotSimulated> keys = {
      {"allgather_partitions", "the updated partitions are all-gathered (the default)"},
      {"round_robin_gradients", "the gradient copy order to the host is not simulated"},
      {"sub_group_size", "the optimizer steps its partition at once"},
      {"stage3_gather_16bit_weights_on_model_save", kCheckpointing},
      {"gather_16bit_weights_on_model_save", kCheckpointing},
      {"stage3_gather_fp16_weights_on_model_save", kCheckpointing},
      {"elastic_checkpoint", kCheckpointing},
      {"load_from_fp32_weights", kCheckpointing},
      {"pipeline_loading_checkpoint", kCheckpointing},
      {"ignore_unused_parameters", kNumerics},
      {"legacy_stage1", "DeepSpeed's current stage 1 is simulated"},
      {"cpu_offload_use_pin_memory", "a legacy key: pinned host buffers are assumed"},
      {"memory_efficient_linear", "stage 3's linear layers are simulated as ordinary GEMMs"},
      {"stage3_model_persistence_threshold", "the persistence threshold per parameter holds"},
      {"stage3_module_granularity_threshold", "fetches follow zerosim's attention and MLP units"},
      {"stage3_use_all_reduce_for_fetch_params", "parameters are fetched with all-gathers"},
      {"zero_quantized_nontrainable_weights", "all weights are trainable in zerosim's step"},
      {"zeropp_loco_param", "LoCo-ZeRO++ error feedback is not simulated"},
      {"mics_hierarchical_params_gather", "MiCS gathers are flat"},
      {"override_module_apply", kNumerics},
      {"log_trace_cache_warnings", kLogging},
      {"enable_sanity_checks", kLogging},
      {"stage3_allgather_sequential", "parameters are gathered in buckets"},
      {"leaf_module", "fetches follow zerosim's attention and MLP units"},
      {"save_muon_momentum_buffer_in_memory", "zerosim steps Adam, not Muon"},
      {"zenflow", "ZenFlow's asynchronous CPU updates are not simulated; the offloaded step is "
                  "DeepSpeed's usual one"},
  };
  return keys;
}

// DeepSpeedZeroConfig's stage-3 fields are declared under their own names with the stage3_
// names as aliases, and DeepSpeed's config model populates a field by either name
// (runtime/config_utils.py, allow_population_by_field_name / populate_by_name): the field name
// -> the alias zerosim's tables use.
const std::vector<std::pair<const char*, const char*>>& zero_field_aliases() {
  static const std::vector<std::pair<const char*, const char*>> aliases = {
      {"prefetch_bucket_size", "stage3_prefetch_bucket_size"},
      {"param_persistence_threshold", "stage3_param_persistence_threshold"},
      {"model_persistence_threshold", "stage3_model_persistence_threshold"},
      {"max_live_parameters", "stage3_max_live_parameters"},
      {"max_reuse_distance", "stage3_max_reuse_distance"},
      {"module_granularity_threshold", "stage3_module_granularity_threshold"},
      {"use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params"},
      {"allgather_sequential", "stage3_allgather_sequential"},
  };
  return aliases;
}

// DeepSpeed's legacy zero_optimization switches and the sections they stand for
// (DeepSpeedZeroConfig: deprecated fields with new_param_fn).
struct LegacyOffload {
  const char* key;
  const char* section;  // offload_optimizer or offload_param
};
constexpr LegacyOffload kLegacyOffload[] = {{"cpu_offload", "offload_optimizer"},
                                            {"cpu_offload_param", "offload_param"}};

// The ds_config keys the binding table maps (KeySpec::deepspeed), split at their first dot:
// top-level keys, zero_optimization keys, and zero_optimization sections whose "device" is read
// (offload_optimizer, offload_param).
struct DeepSpeedKey {
  std::string name;  // "train_batch_size", "stage", "offload_param"
  const KeySpec* key;
};
std::vector<DeepSpeedKey> table_keys(bool in_zero, bool sections) {
  const std::string zero = "zero_optimization.";
  std::vector<DeepSpeedKey> out;
  for (const KeySpec& k : scenario_keys()) {
    if (k.deepspeed.empty()) continue;
    const bool zero_key = k.deepspeed.rfind(zero, 0) == 0;
    if (zero_key != in_zero) continue;
    std::string name = zero_key ? k.deepspeed.substr(zero.size()) : k.deepspeed;
    const std::size_t dot = name.find('.');
    if ((dot != std::string::npos) != sections) continue;
    out.push_back({name.substr(0, dot), &k});
  }
  return out;
}

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

// A value that leaves a feature off asks for nothing zerosim leaves out: false, null, an
// "enabled": false section, a parallel size of 1.
bool switched_off(const std::string& key, const json& v) {
  if (v.is_null() || (v.is_boolean() && !v.get<bool>())) return true;
  if (v.is_object() && v.contains("enabled") && v["enabled"].is_boolean() && !v["enabled"].get<bool>()) {
    return true;
  }
  return (key == "sequence_parallel_size" || key == "data_parallel_size") && v.is_number() &&
         v.get<double>() == 1;
}
bool is_batch_key(const KeySpec& k) { return k.path.rfind("training.", 0) == 0; }

template <class List>
const char* reason_for(const List& list, const std::string& key) {
  for (const auto& n : list) {
    if (key == n.key) return n.why;
  }
  return nullptr;
}

void expect_object(const json& v, const std::string& path) {
  if (!v.is_object()) throw InputError(path, std::string("expected an object, got ") + v.type_name());
}

// A scenario key set from the user's `user_key`.
void set_from(ScenarioDocument& d, const KeySpec& k, const std::string& user_key, const json& value) {
  json_path_create(d.doc, k.path) = value;
  d.origin[k.path] = user_key;
}

// fp16/bf16 "enabled": a bool or "auto" (left to the scenario, as the HF integration leaves it to
// the training arguments). -1: not decided here.
int precision_flag(const json& section, const std::string& path, ScenarioDocument& d) {
  expect_object(section, path);
  // The other keys DeepSpeed reads there (runtime/constants.py, runtime/config.py): loss
  // scaling, numerics that cost nothing zerosim counts, accepted silently; and two that change
  // what the step keeps. DeepSpeed reads these keys by name and ignores any other.
  static const std::vector<std::string> loss_scaling = {
      "loss_scale", "auto_cast", "initial_scale_power", "loss_scale_window", "hysteresis",
      "consecutive_hysteresis", "min_loss_scale"};
  static const std::vector<NotSimulated> changes = {
      {"fp16_master_weights_and_grads",
       "fp16 master weights and gradients (with CPU offload): fp32 ones are simulated"},
      {"immediate_grad_update",
       "the bf16 optimizer's immediate gradient update: gradients are accumulated as usual"}};
  for (auto e = section.begin(); e != section.end(); ++e) {
    if (e.key() == "enabled" || e->is_null()) continue;
    if (std::find(loss_scaling.begin(), loss_scaling.end(), e.key()) != loss_scaling.end())
      continue;
    if (const char* why = reason_for(changes, e.key())) {
      if (!switched_off(e.key(), *e)) d.warn(key_join(path, e.key()), std::string("not simulated: ") + why);
      continue;
    }
    d.warn(key_join(path, e.key()), "not a key DeepSpeed reads here (it ignores it): ignored");
  }
  auto it = section.find("enabled");
  if (it == section.end()) return -1;
  if (is_auto(*it)) {
    d.filled_from_scenario["training.precision"] = key_join(path, "enabled");
    return -1;
  }
  if (!it->is_boolean()) throw InputError(path + ".enabled", "expected true, false or \"auto\"");
  return it->get<bool>() ? 1 : 0;
}

void read_offload(const json& section, const std::string& path, ScenarioDocument& d,
                  const KeySpec& target) {
  expect_object(section, path);
  // DeepSpeed's offload_optimizer / offload_param keys (runtime/zero/offload_config.py); only
  // the device changes what is simulated.
  const std::vector<std::string> known = {
      "device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory",
      "pipeline", "pipeline_read", "pipeline_write", "fast_init", "ratio"};
  for (auto it = section.begin(); it != section.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      throw InputError(key_join(path, it.key()),
                       "unknown offload key" + did_you_mean(it.key(), known));
    }
    if (it.key() != "device" && it.key() != "ratio") {
      d.warn(key_join(path, it.key()), "not simulated: pinned buffers are assumed and NVMe I/O "
                                       "runs at the cluster's NVMe bandwidth");
    }
  }
  // ZeRO-Offload++ (ratio < 1): DeepSpeed steps that share of the partition on the CPU and the
  // rest on the GPU. Not simulated: the whole partition is offloaded, said.
  auto ratio = section.find("ratio");
  if (ratio != section.end() && !ratio->is_null()) {
    if (!ratio->is_number() || !(ratio->get<double>() >= 0.0 && ratio->get<double>() <= 1.0))
      throw InputError(key_join(path, "ratio"), "must be a number from 0 to 1, got " + ratio->dump());
    if (ratio->get<double>() != 1.0)
      d.warn(key_join(path, "ratio"),
             "partial optimizer offload (ZeRO-Offload++) is not simulated: the whole partition "
             "is offloaded, as with ratio 1");
  }
  auto dev = section.find("device");
  if (dev == section.end()) return;
  if (!dev->is_string()) throw InputError(path + ".device", "expected \"none\", \"cpu\" or \"nvme\"");
  set_from(d, target, path + ".device", *dev);
}

// Batch keys the config gives replace the document's; the document's others are dropped so that
// DeepSpeed's rule derives them from the config's. "auto" ones are filled from the scenario.
void read_batch_keys(const json& ds, const std::string& root, ScenarioDocument& d) {
  std::vector<DeepSpeedKey> batch;
  for (const DeepSpeedKey& b : table_keys(false, false)) {
    if (is_batch_key(*b.key)) batch.push_back(b);
  }
  bool gives_batch = false;
  for (const auto& b : batch) {
    if (ds.contains(b.name) && !is_auto(ds[b.name])) gives_batch = true;
  }
  auto training = d.doc.find("training");
  if (gives_batch && training != d.doc.end() && training->is_object()) {
    for (const auto& b : batch) training->erase(b.key->path.substr(b.key->path.find('.') + 1));
  }
  for (const auto& b : batch) {
    auto it = ds.find(b.name);
    if (it == ds.end()) continue;
    const std::string path = key_join(root, b.name);
    if (is_auto(*it)) {
      d.filled_from_scenario[b.key->path] = path;
      continue;
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
      throw InputError(path, "expected a positive integer or \"auto\", got " + it->dump());
    }
    set_from(d, *b.key, path, *it);
  }
}

// activation_checkpointing (DeepSpeedActivationCheckpointingConfig) configures
// deepspeed.checkpointing, which the model calls to recompute each layer in backward: zerosim
// simulates that as full recomputation unless the scenario says otherwise.
void read_activation_checkpointing(const json& section, const std::string& path,
                                   ScenarioDocument& d) {
  expect_object(section, path);
  d.implied["parallel.recompute"] = {"full", path,
                                     "the model checkpoints its layers with deepspeed.checkpointing: "
                                     "simulated as parallel.recompute=full (every layer recomputed "
                                     "in backward)"};
  // The options zerosim simulates, each the scenario key it sets.
  const std::vector<std::pair<std::string, const char*>> read = {
      {"cpu_checkpointing", "parallel.cpu_checkpointing"},
      {"partition_activations", "parallel.partition_activations"}};
  const std::vector<NotSimulated> options = {
      {"contiguous_memory_optimization", "allocator effects are not simulated"},
      {"number_checkpoints", "every layer is a checkpoint"},
      // checkpointing.py: a device synchronize after each checkpointed layer's forward and
      // backward (SYNCHRONIZE), where the host waits for the GPU.
      {"synchronize_checkpoint_boundary",
       "the device synchronize after each checkpointed layer (the host waits for the GPU there)"},
      {"profile", kLogging}};
  for (auto it = section.begin(); it != section.end(); ++it) {
    const auto r = std::find_if(read.begin(), read.end(),
                                [&](const auto& k) { return k.first == it.key(); });
    if (r != read.end()) {
      if (!it->is_null()) set_from(d, *find_key(r->second), key_join(path, it.key()), *it);
      continue;
    }
    const char* why = reason_for(options, it.key());
    if (!why) {
      std::vector<std::string> names;
      for (const auto& k : read) names.push_back(k.first);
      for (const auto& o : options) names.push_back(o.key);
      throw InputError(key_join(path, it.key()),
                       "unknown activation_checkpointing key" + did_you_mean(it.key(), names));
    }
    const bool off = it->is_boolean() && !it->get<bool>();
    if (!off && !it->is_null()) d.warn(key_join(path, it.key()), std::string("not simulated: ") + why);
  }
}

void read_zero_section(const json& z, const std::string& zroot, ScenarioDocument& d) {
  if (!z.is_object()) throw InputError(zroot, "expected an object");
  const std::vector<DeepSpeedKey> zero_keys = table_keys(true, false);
  const std::vector<DeepSpeedKey> sections = table_keys(true, true);
  std::vector<std::string> known;
  for (const auto& k : zero_keys) known.push_back(k.name);
  for (const auto& k : sections) known.push_back(k.name);
  for (const auto& k : zero_not_simulated()) known.emplace_back(k.key);
  for (const auto& k : kLegacyOffload) known.emplace_back(k.key);
  for (const auto& [field, alias] : zero_field_aliases()) known.emplace_back(field);
  for (auto it = z.begin(); it != z.end(); ++it) {
    const std::string path = key_join(zroot, it.key());
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      throw InputError(path, "unknown zero_optimization key" + did_you_mean(it.key(), known));
    }
    std::string key = it.key();
    for (const auto& [field, alias] : zero_field_aliases()) {
      if (key != field) continue;
      if (z.contains(alias)) {
        throw InputError(path, std::string("given twice: ") + field + " is " + alias +
                                   "'s field name; keep one");
      }
      key = alias;
    }
    for (const auto& s : sections) {
      if (s.name == key && !it->is_null()) read_offload(*it, path, d, *s.key);
    }
    for (const auto& k : zero_keys) {
      // "auto" kept: resolved from the model when the scenario resolves.
      if (k.name == key) set_from(d, *k.key, path, *it);
    }
    const char* why = reason_for(zero_not_simulated(), key);
    if (why && !switched_off(key, *it)) d.warn(path, std::string("accepted, not simulated: ") + why);
  }
  // Legacy switches, as DeepSpeed maps them: true stands for the section with device cpu,
  // unless the section itself is given.
  for (const LegacyOffload& legacy : kLegacyOffload) {
    auto it = z.find(legacy.key);
    if (it == z.end() || it->is_null()) continue;
    const std::string path = key_join(zroot, legacy.key);
    if (!it->is_boolean()) throw InputError(path, "expected true or false, got " + it->dump());
    if (!it->get<bool>()) continue;
    if (z.contains(legacy.section) && !z[legacy.section].is_null()) {
      d.warn(path, std::string("legacy key ignored: ") + legacy.section + " is given");
      continue;
    }
    const std::string target = std::string("zero.") + legacy.section + ".device";
    set_from(d, *find_key(target), path, "cpu");
    d.warn(path, std::string("legacy key, read as DeepSpeed reads it: ") + legacy.section +
                     ".device = cpu");
  }
}

// DeepSpeed AutoTP (tensor_parallel.autotp_size) splits the model's linears over TP ranks like
// Megatron's TP; zerosim simulates it as parallel.tp.
void read_tensor_parallel(const json& section, const std::string& path, ScenarioDocument& d) {
  expect_object(section, path);
  for (auto it = section.begin(); it != section.end(); ++it) {
    if (it.key() == "autotp_size" && it->is_number_integer() && it->get<std::int64_t>() > 1) {
      d.implied["parallel.tp"] = {*it, key_join(path, it.key()),
                                  "DeepSpeed AutoTP simulated as Megatron-style tensor "
                                  "parallelism: parallel.tp = " + it->dump()};
    } else if (it.key() != "autotp_size") {
      d.warn(key_join(path, it.key()), "accepted, not simulated");
    }
  }
}

// pipeline (runtime/config.py get_pipeline_config, which takes any key): pipe_partitioned and
// grad_partitioned (default true) split what the PipelineEngine sends over the TP group;
// zerosim splits both directions or neither (parallel.scatter_gather_tensors_in_pipeline).
void read_pipeline(const json& section, const std::string& path, ScenarioDocument& d) {
  expect_object(section, path);
  const std::vector<NotSimulated> options = {
      {"stages", "the pipeline's depth is parallel.pp"},
      {"partition", "layers are split over the stages as Megatron splits them (parallel.pp)"},
      {"seed_layers", kNumerics},
      {"activation_checkpoint_interval",
       "recomputation follows parallel.recompute (every layer when on)"}};
  bool pipe = true, grad = true;  // DeepSpeed's defaults
  std::string read_from;          // the user's key the scenario's value comes from
  for (auto it = section.begin(); it != section.end(); ++it) {
    const std::string key = key_join(path, it.key());
    if (it.key() == "pipe_partitioned" || it.key() == "grad_partitioned") {
      if (!it->is_boolean()) throw InputError(key, "expected true or false, got " + it->dump());
      (it.key() == "pipe_partitioned" ? pipe : grad) = it->get<bool>();
      read_from = key;
      continue;
    }
    const char* why = reason_for(options, it.key());
    if (!it->is_null()) {
      d.warn(key, std::string("accepted, not simulated: ") +
                      (why ? why : "not a key DeepSpeed's pipeline engine reads"));
    }
  }
  if (read_from.empty()) return;
  if (pipe != grad) {
    read_from = key_join(path, pipe ? "grad_partitioned" : "pipe_partitioned");
    d.warn(read_from, "zerosim splits the pipeline's activations and gradients over TP together: "
                      "simulated with neither split");
  }
  set_from(d, *find_key("parallel.scatter_gather_tensors_in_pipeline"), read_from, pipe && grad);
}

// sequence_parallel_size: the degree of DeepSpeed's Ulysses sequence parallelism (the sequence
// data-parallel group ZeRO shards over; DistributedAttention's all-to-alls in the model),
// simulated as context parallelism with cp_comm_type a2a.
void read_sequence_parallel(const json& v, const std::string& path, ScenarioDocument& d) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1) {
    throw InputError(path, "expected a positive integer, got " + v.dump());
  }
  if (v.get<std::int64_t>() == 1) return;
  d.implied["parallel.cp"] = {v, path, "DeepSpeed Ulysses' degree simulated as parallel.cp = " +
                                            v.dump()};
  d.implied["parallel.cp_comm_type"] = {"a2a", path, "DeepSpeed Ulysses' all-to-alls simulated "
                                                     "as parallel.cp_comm_type = a2a"};
}

}  // namespace

void apply_deepspeed_config(ScenarioDocument& d, const json& ds, const std::string& origin) {
  const std::string root = "deepspeed(" + origin + ")";
  if (!ds.is_object()) throw InputError(root, "a DeepSpeed config must be a JSON object");
  const std::vector<DeepSpeedKey> top = table_keys(false, false);
  std::vector<std::string> known;
  for (const auto& k : top) known.push_back(k.name);
  for (const char* k : {"fp16", "bf16", "bfloat16", "zero_optimization", "activation_checkpointing",
                        "tensor_parallel", "sequence_parallel_size", "pipeline"}) {
    known.emplace_back(k);
  }
  for (const auto& k : top_level_not_simulated()) known.emplace_back(k.key);
  for (auto it = ds.begin(); it != ds.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      throw InputError(key_join(root, it.key()),
                       "unknown DeepSpeed key" + did_you_mean(it.key(), known));
    }
    const char* why = reason_for(top_level_not_simulated(), it.key());
    if (why && !switched_off(it.key(), *it)) {
      d.warn(key_join(root, it.key()), std::string("accepted, not simulated: ") + why);
    }
  }
  read_batch_keys(ds, root, d);
  for (const auto& k : top) {
    auto it = ds.find(k.name);
    if (it == ds.end() || it->is_null() || is_batch_key(*k.key)) continue;
    // DeepSpeed lowercases communication_data_type before reading it.
    json value = *it;
    if (value.is_string()) {
      std::string text = value.get<std::string>();
      for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      value = text;
    }
    set_from(d, *k.key, key_join(root, k.name), value);
  }

  int fp16 = ds.contains("fp16") ? precision_flag(ds["fp16"], key_join(root, "fp16"), d) : -1;
  const char* bf16_key = ds.contains("bf16") ? "bf16" : "bfloat16";
  int bf16 = ds.contains(bf16_key) ? precision_flag(ds[bf16_key], key_join(root, bf16_key), d) : -1;
  if (fp16 == 1 && bf16 == 1) {
    throw InputError(key_join(root, "fp16"), "fp16 and bf16 cannot both be enabled");
  }
  if (fp16 == 1) set_from(d, *find_key("training.precision"), key_join(root, "fp16"), "fp16");
  if (bf16 == 1) set_from(d, *find_key("training.precision"), key_join(root, bf16_key), "bf16");
  if (fp16 == 1 || bf16 == 1) d.filled_from_scenario.erase("training.precision");
  // Neither enabled nor left to the trainer ("auto"): DeepSpeed's engine keeps the model in fp32
  // (runtime/engine.py: no fp16 / bf16 wrapper of the optimizer), which zerosim does not
  // simulate. Apex AMP and autocast have their own warnings.
  const bool left_to_trainer = d.filled_from_scenario.count("training.precision") > 0;
  if (fp16 != 1 && bf16 != 1 && !left_to_trainer && !ds.contains("amp") &&
      !ds.contains("torch_autocast")) {
    d.warn(ds.contains("fp16") ? key_join(root, "fp16")
           : ds.contains(bf16_key) ? key_join(root, bf16_key)
                                   : root,
           "neither fp16 nor bf16 is enabled, so DeepSpeed trains in fp32, which zerosim does not "
           "simulate: the step is simulated in training.precision (default bf16)");
  }

  if (auto it = ds.find("activation_checkpointing"); it != ds.end() && !it->is_null()) {
    read_activation_checkpointing(*it, key_join(root, "activation_checkpointing"), d);
  }
  if (auto it = ds.find("tensor_parallel"); it != ds.end() && !it->is_null()) {
    read_tensor_parallel(*it, key_join(root, "tensor_parallel"), d);
  }
  if (auto it = ds.find("zero_optimization"); it != ds.end()) {
    read_zero_section(*it, key_join(root, "zero_optimization"), d);
  }
  if (auto it = ds.find("pipeline"); it != ds.end() && !it->is_null()) {
    read_pipeline(*it, key_join(root, "pipeline"), d);
  }
  if (auto it = ds.find("sequence_parallel_size"); it != ds.end() && !it->is_null()) {
    read_sequence_parallel(*it, key_join(root, "sequence_parallel_size"), d);
  }
}

}  // namespace zerosim
