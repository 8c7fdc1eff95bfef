// A case of the "zerosim-published-cases/1" format as a scenario document. The format keeps every
// parallelism and ZeRO knob under "parallel" and the batch under "training"; the binding table
// (KeySpec::case_key) says which scenario key each case key is.
#include "sim/core/error.h"
#include "sim/input/json_input.h"
#include "sim/scenario/keys.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// The cluster fields a case may give (the preset and its size; the NIC count of a variant; the
// GPUs of the job that share one NVLink domain, where its launcher places fewer in a rack than
// the rack holds: NeMo's --segment on GB200 NVL72).
const std::vector<std::string> kCaseClusterFields = {"preset", "num_gpus", "nodes",
                                                     "nics_per_node", "nvlink_domain_gpus"};

const json& require(const json& obj, const std::string& key, const std::string& path) {
  if (!obj.is_object()) throw InputError(path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) throw InputError(key_join(path, key), "missing");
  return *it;
}

void unknown_key(const std::string& path, const std::string& key,
                 const std::vector<std::string>& known) {
  throw InputError(key_join(path, key), "unknown key" + did_you_mean(key, known) +
                                            "; allowed: " + join_list(known));
}

// Copies the case section `section` ("training", "parallel") into the document under the
// scenario keys the table binds its keys to.
void copy_section(const json& c, const std::string& section, const std::string& path, json& doc) {
  const json& from = require(c, section, path);
  const std::string where = key_join(path, section);
  if (!from.is_object()) throw InputError(where, "expected an object");
  std::vector<std::string> known;
  for (const KeySpec& k : scenario_keys()) {
    if (k.case_key.rfind(section + ".", 0) == 0) known.push_back(k.case_key.substr(section.size() + 1));
  }
  for (auto it = from.begin(); it != from.end(); ++it) {
    const KeySpec* target = nullptr;
    for (const KeySpec& k : scenario_keys()) {
      if (k.case_key == section + "." + it.key()) target = &k;
    }
    if (!target) unknown_key(where, it.key(), known);
    json_path_create(doc, target->path) = *it;
  }
}

}  // namespace

json case_scenario(const json& c, const std::string& path) {
  json doc;
  doc["model"] = require(c, "model", path);
  const json& cluster = require(c, "cluster", path);
  const std::string cluster_path = key_join(path, "cluster");
  if (!cluster.is_object()) throw InputError(cluster_path, "expected an object");
  doc["cluster"] = json::object();
  for (auto it = cluster.begin(); it != cluster.end(); ++it) {
    bool ok = false;
    for (const auto& k : kCaseClusterFields) ok = ok || k == it.key();
    if (!ok) unknown_key(cluster_path, it.key(), kCaseClusterFields);
    doc["cluster"][it.key()] = *it;
  }
  copy_section(c, "training", path, doc);
  copy_section(c, "parallel", path, doc);
  // Published runs did fit; simulate even where our memory model disagrees, and report it.
  doc["sim"] = {{"allow_oom", true}};
  return doc;
}

}  // namespace zerosim
