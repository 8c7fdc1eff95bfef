// `--calibration calibration.json` (format "zerosim-calibration/1", written by
// `zerosim-validate bench`; see validate/README.md): measured rates become scenario keys, so the
// resolved scenario echoes them and reproduces the run without the file.
#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/scenario/keys.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

double positive(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) throw InputError(key_join(path, key), "missing");
  if (!it->is_number() || !std::isfinite(it->get<double>()) || !(it->get<double>() > 0)) {
    throw InputError(key_join(path, key), "expected a positive number, got " + it->dump());
  }
  return it->get<double>();
}

}  // namespace

void apply_calibration(ScenarioDocument& d, const json& cal, const std::string& origin) {
  json& doc = d.doc;
  const std::string root = "calibration(" + origin + ")";
  if (!cal.is_object()) throw InputError(root, "expected a JSON object");
  if (cal.value("format", std::string()) != "zerosim-calibration/1") {
    throw InputError(key_join(root, "format"), "expected \"zerosim-calibration/1\"");
  }
  // The cluster and precision the rates are turned into fractions of.
  json cluster_doc = doc.contains("cluster") ? doc["cluster"] : json();
  if (cluster_doc.is_null()) cluster_doc = find_key("cluster")->default_value;
  const ClusterSpec cluster = cluster_from_json(cluster_doc, "cluster");
  std::string precision = find_key("training.precision")->default_value.get<std::string>();
  if (doc.contains("training") && doc["training"].is_object() &&
      doc["training"].contains("precision") && doc["training"]["precision"].is_string()) {
    precision = doc["training"]["precision"].get<std::string>();
  }
  const double peak = cluster.gpu.peak_tflops(
      value_of(kTrainingPrecisionNames, precision).value_or(Precision::Bf16));
  // Unknown keys are accepted: later versions of the format add keys, never rename them.
  if (cal.contains("gemm")) {
    const json& gemms = cal["gemm"];
    const std::string path = key_join(root, "gemm");
    if (!gemms.is_array()) throw InputError(path, "expected an array");
    double best = 0;
    for (std::size_t i = 0; i < gemms.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      if (!gemms[i].is_object()) throw InputError(item, "expected an object");
      const std::string dtype = gemms[i].value("dtype", std::string());
      const double tflops = positive(gemms[i], "tflops", item);
      if (dtype == precision) best = std::max(best, tflops);
    }
    // The best measured shape plays the part of MAMF in the compute model.
    if (best > 0) doc["cluster"]["gpu"]["gemm_efficiency"] = std::min(1.0, best / peak);
  }
  if (cal.contains("hbm_copy_GBps")) {
    const double measured = positive(cal, "hbm_copy_GBps", root) * 1e9;
    doc["cluster"]["gpu"]["hbm_efficiency"] = std::min(1.0, measured / cluster.gpu.hbm_bandwidth);
  }
  if (cal.contains("collectives")) {
    d.warn(key_join(root, "collectives"),
           "not used yet: collectives are priced by the NCCL model of the cluster preset");
  }
  if (cal.contains("adam_params_per_s")) {
    doc["sim"]["adam_params_per_s"] = positive(cal, "adam_params_per_s", root);
  }
  if (!doc["cluster"].contains("preset") && cluster_doc.is_object() && cluster_doc.contains("preset")) {
    for (auto it = cluster_doc.begin(); it != cluster_doc.end(); ++it) {
      if (!doc["cluster"].contains(it.key())) doc["cluster"][it.key()] = it.value();
    }
  }
}

}  // namespace zerosim
