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

// --nodes and --num-gpus replace each other.
void apply_cluster_size(json& doc, const ScenarioInputs& in) {
  if (const std::string* nodes = flag_value(in, "nodes")) {
    if (doc["cluster"].is_object()) doc["cluster"].erase("num_gpus");
    apply_setting(doc, "cluster.nodes=" + *nodes);
  }
  if (const std::string* gpus = flag_value(in, "num-gpus")) {
    if (doc["cluster"].is_object()) doc["cluster"].erase("nodes");
    apply_setting(doc, "cluster.num_gpus=" + *gpus);
  }
}

// Batch flags win over the document's batch keys: the accumulation steps (then the global batch)
// that the flags did not give are dropped so that DeepSpeed's rule derives them anew.
void drop_derived_batch_keys(json& doc, const ScenarioInputs& in) {
  const bool mbs = flag_value(in, "mbs"), gbs = flag_value(in, "gbs"), gas = flag_value(in, "gas");
  if (!(mbs || gbs || gas)) return;
  json& t = doc["training"];
  if (!t.is_object()) return;
  if (!gas) t.erase("gradient_accumulation_steps");
  if (gas && !gbs) t.erase("global_batch_size");
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
  }
  if (!doc.is_object()) throw InputError("scenario", "a scenario must be a JSON object");
  if (!in.deepspeed_file.empty()) {
    apply_deepspeed_config(d, read_json_file(in.deepspeed_file, "--deepspeed"), in.deepspeed_file);
  }
  if (model) doc["model"] = *model;
  if (cluster) apply_cluster_preset(doc, *cluster);
  apply_cluster_size(doc, in);
  // The calibration reads the cluster and the precision the document has at this point.
  if (!in.calibration_file.empty()) {
    apply_calibration(d, read_json_file(in.calibration_file, "--calibration"), in.calibration_file);
  }
  drop_derived_batch_keys(doc, in);
  for (const BoundFlag& f : scenario_flags()) {
    if (has_merge_rule(f.flag->name)) continue;
    if (f.flag->is_switch) {
      if (flag_value(in, f.flag->name)) apply_setting(doc, f.key + "=true");
    } else if (const std::string* value = flag_value(in, f.flag->name)) {
      apply_setting(doc, f.key + "=" + *value);
    }
  }
  for (const auto& s : in.sets) apply_setting(doc, s);
  return d;
}

}  // namespace zerosim
