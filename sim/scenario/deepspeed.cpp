// Reading a DeepSpeed ds_config.json into a scenario document, as DeepSpeed reads it.
#include <set>

#include "sim/core/error.h"
#include "sim/input/json_input.h"
#include "sim/scenario/keys.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// Top-level DeepSpeed keys that do not change what is simulated; accepted and ignored so that a
// real ds_config.json reads without edits.
const std::vector<std::string>& ignored_top_level() {
  static const std::vector<std::string> keys = {
      "optimizer", "scheduler", "gradient_clipping", "steps_per_print", "wall_clock_breakdown",
      "zero_allow_untested_optimizer", "prescale_gradients", "gradient_predivide_factor",
      "communication_data_type", "activation_checkpointing", "flops_profiler", "tensorboard",
      "wandb", "csv_monitor", "comet", "comms_logger", "monitor_config", "sparse_gradients",
      "dump_state", "zero_force_ds_cpu_optimizer", "elasticity", "aio", "checkpoint",
      "data_types", "amp", "seed", "memory_breakdown", "timers", "autotuning",
      "compression_training", "data_efficiency", "curriculum_learning", "pipeline",
      "disable_allgather", "fp32_allreduce", "load_universal_checkpoint", "use_node_local_storage",
      "graph_harvesting", "eigenvalue", "progressive_layer_drop", "sparse_attention",
      "weight_quantization", "nebula", "hybrid_engine", "torch_autocast", "compile"};
  return keys;
}

// The ds_config keys the binding table maps (KeySpec::deepspeed), split at their first dot:
// top-level keys (the batch keys), zero_optimization keys, and zero_optimization sections whose
// "device" is read (offload_optimizer, offload_param).
struct DeepSpeedKey {
  std::string name;      // "train_batch_size", "stage", "offload_param"
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

// Sets `path` ("zero.offload_param.device") in the document.
// zero_optimization keys DeepSpeed knows that do not change what is simulated.
const std::vector<std::string>& zero_ignored_keys() {
  static const std::vector<std::string> keys = {
      "allgather_partitions", "round_robin_gradients", "sub_group_size",
      "stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
      "elastic_checkpoint", "load_from_fp32_weights", "ignore_unused_parameters",
      "legacy_stage1", "cpu_offload", "cpu_offload_params", "cpu_offload_use_pin_memory",
      "memory_efficient_linear", "gather_16bit_weights_on_model_save", "stage3_model_persistence_threshold",
      "stage3_module_granularity_threshold",
      "zero_quantized_nontrainable_weights", "mics_hierarchical_params_gather",
      "pipeline_loading_checkpoint", "override_module_apply", "log_trace_cache_warnings",
      "stage3_use_all_reduce_for_fetch_params"};
  return keys;
}

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

bool contains(const std::vector<std::string>& list, const std::string& s) {
  for (const auto& x : list) {
    if (x == s) return true;
  }
  return false;
}

// fp16/bf16 "enabled": a bool or "auto" (left to the scenario, as the HF integration leaves it to
// the training arguments).
int precision_flag(const json& section, const std::string& path) {
  if (!section.is_object()) {
    throw InputError(path, std::string("expected an object, got ") + section.type_name());
  }
  auto it = section.find("enabled");
  if (it == section.end() || is_auto(*it)) return -1;
  if (!it->is_boolean()) throw InputError(path + ".enabled", "expected true, false or \"auto\"");
  return it->get<bool>() ? 1 : 0;
}

void read_offload(const json& section, const std::string& path, json& doc, const std::string& target) {
  if (!section.is_object()) {
    throw InputError(path, std::string("expected an object, got ") + section.type_name());
  }
  // DeepSpeed's offload_optimizer / offload_param keys (runtime/zero/offload_config.py); only
  // the device changes what is simulated (pinned buffers are assumed, NVMe I/O unpipelined).
  const std::vector<std::string> known = {
      "device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory",
      "pipeline", "pipeline_read", "pipeline_write", "fast_init", "ratio"};
  for (auto it = section.begin(); it != section.end(); ++it) {
    if (!contains(known, it.key())) {
      throw InputError(key_join(path, it.key()),
                       "unknown offload key" + did_you_mean(it.key(), known));
    }
  }
  auto ratio = section.find("ratio");
  if (ratio != section.end() && !(ratio->is_number() && ratio->get<double>() == 1.0)) {
    throw InputError(key_join(path, "ratio"),
                     "partial optimizer offload (ZeRO-Offload++ ratio < 1) is not simulated; "
                     "allowed: 1.0");
  }
  auto dev = section.find("device");
  if (dev == section.end()) return;
  if (!dev->is_string()) throw InputError(path + ".device", "expected \"none\", \"cpu\" or \"nvme\"");
  json_path_create(doc, target) = dev->get<std::string>();
}

}  // namespace

void apply_deepspeed_config(json& doc, const json& ds, const std::string& origin) {
  const std::string root = "deepspeed(" + origin + ")";
  if (!ds.is_object()) throw InputError(root, "a DeepSpeed config must be a JSON object");
  const std::vector<DeepSpeedKey> batch_keys = table_keys(false, false);
  std::vector<std::string> known;
  for (const auto& b : batch_keys) known.push_back(b.name);
  for (const char* k : {"fp16", "bf16", "bfloat16", "zero_optimization"}) known.push_back(k);
  for (const auto& k : ignored_top_level()) known.push_back(k);
  for (auto it = ds.begin(); it != ds.end(); ++it) {
    if (!contains(known, it.key())) {
      throw InputError(key_join(root, it.key()),
                       "unknown DeepSpeed key" + did_you_mean(it.key(), known));
    }
  }
  // Batch keys the config gives replace the document's; the document's others are dropped so
  // that DeepSpeed's rule derives them from the config's.
  bool gives_batch = false;
  for (const auto& b : batch_keys) {
    if (ds.contains(b.name) && !is_auto(ds[b.name])) gives_batch = true;
  }
  if (gives_batch && doc.contains("training") && doc["training"].is_object()) {
    for (const auto& b : batch_keys) doc["training"].erase(b.key->path.substr(b.key->path.find('.') + 1));
  }
  for (const auto& b : batch_keys) {
    auto it = ds.find(b.name);
    if (it == ds.end() || is_auto(*it)) continue;
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
      throw InputError(key_join(root, b.name), "expected a positive integer or \"auto\", got " +
                                                   it->dump());
    }
    json_path_create(doc, b.key->path) = *it;
  }

  int fp16 = ds.contains("fp16") ? precision_flag(ds["fp16"], key_join(root, "fp16")) : -1;
  const char* bf16_key = ds.contains("bf16") ? "bf16" : "bfloat16";
  int bf16 = ds.contains(bf16_key) ? precision_flag(ds[bf16_key], key_join(root, bf16_key)) : -1;
  if (fp16 == 1 && bf16 == 1) {
    throw InputError(key_join(root, "fp16"), "fp16 and bf16 cannot both be enabled");
  }
  if (fp16 == 1) doc["training"]["precision"] = "fp16";
  if (bf16 == 1) doc["training"]["precision"] = "bf16";

  auto zit = ds.find("zero_optimization");
  if (zit == ds.end()) return;
  const std::string zroot = key_join(root, "zero_optimization");
  if (!zit->is_object()) throw InputError(zroot, "expected an object");
  const std::vector<DeepSpeedKey> zero_keys = table_keys(true, false);
  const std::vector<DeepSpeedKey> sections = table_keys(true, true);
  std::vector<std::string> zknown;
  for (const auto& z : zero_keys) zknown.push_back(z.name);
  for (const auto& k : zero_ignored_keys()) zknown.push_back(k);
  for (const auto& z : sections) zknown.push_back(z.name);
  for (auto it = zit->begin(); it != zit->end(); ++it) {
    const std::string& key = it.key();
    if (!contains(zknown, key)) {
      throw InputError(key_join(zroot, key),
                       "unknown zero_optimization key" + did_you_mean(key, zknown));
    }
    for (const auto& z : sections) {
      if (z.name == key && !it->is_null()) read_offload(*it, key_join(zroot, key), doc, z.key->path);
    }
    for (const auto& z : zero_keys) {
      // "auto" kept: resolved from the model when the scenario resolves.
      if (z.name == key) json_path_create(doc, z.key->path) = *it;
    }
  }
}

}  // namespace zerosim
