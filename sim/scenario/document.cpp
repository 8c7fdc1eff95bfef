// The scenario document before it is resolved: the built-in default, --set assignments, and the
// merge of a command line's inputs (scenario file, DeepSpeed config, calibration, shortcut
// flags, --set) in the resolution order of scenario.h.
#include <algorithm>

#include "sim/core/error.h"
#include "sim/input/json_input.h"
#include "sim/scenario/keys.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

std::vector<std::string> all_paths() {
  std::vector<std::string> out;
  for (const auto& k : scenario_keys()) out.push_back(k.path);
  return out;
}

const json& default_of(const std::string& path) { return find_key(path)->default_value; }

// The value of shortcut flag `name`, if given (the last one wins, as with repeated flags).
const std::string* flag_value(const ScenarioInputs& in, const std::string& name) {
  const std::string* out = nullptr;
  for (const auto& [flag, value] : in.flags) {
    if (flag == name) out = &value;
  }
  return out;
}

// --cluster: a different preset does not inherit the old preset's overrides, only its size.
void apply_cluster_preset(json& doc, const std::string& preset) {
  json& c = doc["cluster"];
  if (!c.is_object()) c = json::object();
  if (c.value("preset", std::string()) == preset) return;
  json fresh = {{"preset", preset}};
  for (const char* k : {"nodes", "num_gpus"}) {
    if (c.contains(k)) fresh[k] = c[k];
  }
  c = fresh;
}

// --nodes or --num-gpus replaces the document's size (either key); giving both is ambiguous.
void apply_cluster_size(json& doc, const ScenarioInputs& in) {
  const std::string* nodes = flag_value(in, "nodes");
  const std::string* gpus = flag_value(in, "num-gpus");
  if (nodes && gpus) {
    throw InputError("--num-gpus", "give --nodes or --num-gpus, not both (--nodes " + *nodes +
                                       ", --num-gpus " + *gpus + ")");
  }
  if (nodes) {
    if (doc["cluster"].is_object()) doc["cluster"].erase("num_gpus");
    apply_setting(doc, "cluster.nodes=" + *nodes);
  }
  if (gpus) {
    if (doc["cluster"].is_object()) doc["cluster"].erase("nodes");
    apply_setting(doc, "cluster.num_gpus=" + *gpus);
  }
}

// Where the user wrote a document key: its ds_config name when the config set it.
std::string user_key(const ScenarioDocument& d, const std::string& key) {
  const auto it = d.origin.find(key);
  return it != d.origin.end() ? it->second : key;
}

// Batch flags change what they name, and the document's batch keys follow DeepSpeed's rule
// (global = micro x accumulation x dp): the accumulation steps are derived anew when a global
// batch is given (by --gbs or the document) and --gas is not, the global batch when --gas is
// given and --gbs is not. A document key so dropped is said, on the user's name for it.
void drop_derived_batch_keys(ScenarioDocument& d, const ScenarioInputs& in) {
  const bool mbs = flag_value(in, "mbs"), gbs = flag_value(in, "gbs"), gas = flag_value(in, "gas");
  if (!(mbs || gbs || gas)) return;
  json& t = d.doc["training"];
  if (!t.is_object()) return;
  auto drop = [&](const std::string& field, const std::string& from) {
    if (!t.contains(field)) return;
    d.warn(user_key(d, "training." + field),
           "not used: " + from + " changes the batch, so it is derived anew (global batch = "
           "micro-batch x accumulation steps x data-parallel ranks)");
    t.erase(field);
  };
  if (!gas && (gbs || t.contains("global_batch_size")))
    drop("gradient_accumulation_steps", gbs ? "--gbs" : "--mbs");
  if (gas && !gbs) drop("global_batch_size", "--gas");
}

// A flag or --set that replaces a value the ds_config gave: said on the config's key.
void apply_over_config(ScenarioDocument& d, const std::string& assignment, const std::string& by) {
  const std::string key = assignment.substr(0, assignment.find('='));
  const auto origin = d.origin.find(key);
  const json* before = origin != d.origin.end() ? json_path_find(d.doc, key) : nullptr;
  const json old = before ? *before : json();
  apply_setting(d.doc, assignment);
  if (!before) return;
  const json* after = json_path_find(d.doc, key);
  if (after && *after != old)
    d.warn(origin->second, "not used: " + by + " sets " + key + " to " + after->dump());
}

// Flags whose merge is one of the rules above rather than a plain assignment.
bool has_merge_rule(const std::string& flag) {
  return flag == "model" || flag == "cluster" || flag == "nodes" || flag == "num-gpus";
}

}  // namespace

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
    // A model named by string becomes the base of an object so single fields can be
    // overridden: {"hf_config": path} for a Hugging Face config, else {"preset": name}.
    json& model = json_path_create(doc, "model");
    if (model.is_string()) {
      const std::string name = model.get<std::string>();
      model = json{{model_string_is_file(name) ? "hf_config" : "preset", name}};
    }
    if (model.is_null()) model = json{{"preset", default_of("model")}};
  }
  json_path_create(doc, path) = value;
}

ScenarioDocument scenario_document(const ScenarioInputs& in) {
  const std::string* model = flag_value(in, "model");
  const std::string* cluster = flag_value(in, "cluster");
  // Without a scenario file: the built-in default scenario when nothing names the workload;
  // once --model, --cluster or --deepspeed does, the table's defaults (data parallel only)
  // under those flags, so that the flags describe the run instead of editing GPT-3's.
  ScenarioDocument d;
  json& doc = d.doc;
  if (!in.scenario_file.empty()) {
    doc = read_json_file(in.scenario_file, "scenario");
  } else if (!model && !cluster && in.deepspeed_file.empty()) {
    doc = default_scenario_document();
  } else {
    doc = json{{"cluster", default_of("cluster")}};  // flags edit its fields
    bool named = cluster != nullptr;
    for (const auto& s : in.sets)
      named = named || s.rfind("cluster=", 0) == 0 || s.rfind("cluster.preset=", 0) == 0;
    if (!named)
      d.warn("cluster.preset", "not given: the default " +
                                   doc["cluster"]["preset"].get<std::string>() +
                                   " is simulated (--cluster names the cluster)");
  }
  if (!doc.is_object()) throw InputError("scenario", "a scenario must be a JSON object");
  if (!in.deepspeed_file.empty()) {
    // DeepSpeed reads its config with Python's json: a key given twice keeps its last value.
    std::vector<std::string> repeated;
    const json ds = read_json_input_file(in.deepspeed_file, "--deepspeed", "", &repeated);
    for (const std::string& key : repeated)
      d.warn(key_join("deepspeed(" + in.deepspeed_file + ")", key),
             "given twice: the last value is read, as DeepSpeed's json reader reads it");
    apply_deepspeed_config(d, ds, in.deepspeed_file);
  }
  if (model) doc["model"] = *model;
  if (cluster) apply_cluster_preset(doc, *cluster);
  apply_cluster_size(doc, in);
  // The calibration reads the cluster and the precision the document has at this point.
  if (!in.calibration_file.empty()) {
    apply_calibration(d, read_json_file(in.calibration_file, "--calibration"), in.calibration_file);
  }
  drop_derived_batch_keys(d, in);
  for (const BoundFlag& f : scenario_flags()) {
    if (has_merge_rule(f.flag->name)) continue;
    const std::string by = "--" + f.flag->name;
    if (f.flag->is_switch) {
      if (flag_value(in, f.flag->name)) apply_over_config(d, f.key + "=true", by);
    } else if (const std::string* value = flag_value(in, f.flag->name)) {
      apply_over_config(d, f.key + "=" + *value, by);
    }
  }
  for (const auto& s : in.sets) apply_over_config(d, s, "--set");
  return d;
}

}  // namespace zerosim
