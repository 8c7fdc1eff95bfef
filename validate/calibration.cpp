#include "validate/calibration.h"

#include <algorithm>
#include <iterator>

namespace zerosim::validate {
namespace {

using json = nlohmann::json;

const json& need(const json& o, const char* key, const std::string& path) {
  auto it = o.find(key);
  if (it == o.end()) throw CalibrationError(path + ": missing key '" + key + "'");
  return *it;
}

double rate(const json& o, const char* key, const std::string& path) {
  const json& v = need(o, key, path);
  if (!v.is_number() || !(v.get<double>() > 0)) {
    throw CalibrationError(path + "." + key + ": expected a number > 0, got " + v.dump());
  }
  return v.get<double>();
}

std::int64_t count(const json& o, const char* key, const std::string& path, std::int64_t min) {
  const json& v = need(o, key, path);
  if (!v.is_number_integer() || v.get<std::int64_t>() < min) {
    throw CalibrationError(path + "." + key + ": expected an integer >= " + std::to_string(min) +
                           ", got " + v.dump());
  }
  return v.get<std::int64_t>();
}

std::string text(const json& o, const char* key, const std::string& path) {
  const json& v = need(o, key, path);
  if (!v.is_string()) throw CalibrationError(path + "." + key + ": expected a string");
  return v.get<std::string>();
}

std::string optional_text(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

json calibration_json(const Calibration& c) {
  json gemm = json::array(), coll = json::array();
  for (const auto& g : c.gemm) {
    gemm.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"dtype", g.dtype}, {"tflops", g.tflops}});
  }
  for (const auto& x : c.collectives) {
    coll.push_back({{"op", x.op},
                    {"ranks", x.ranks},
                    {"bytes", x.bytes},
                    {"time_us", x.time_us},
                    {"algbw_GBps", x.algbw_GBps},
                    {"busbw_GBps", x.busbw_GBps}});
  }
  return {{"format", "zerosim-calibration/1"},
          {"gpu", c.gpu},
          {"num_gpus", c.num_gpus},
          {"date", c.date},
          {"cuda_runtime", c.cuda_runtime},
          {"nccl_version", c.nccl_version},
          {"gemm", gemm},
          {"hbm_copy_GBps", c.hbm_copy_GBps},
          {"h2d_GBps", c.h2d_GBps},
          {"d2h_GBps", c.d2h_GBps},
          {"adam_params_per_s", c.adam_params_per_s},
          {"adam", c.adam},
          {"collectives", coll}};
}

Calibration parse_calibration(const json& doc) {
  const std::string p = "calibration";
  if (!doc.is_object()) throw CalibrationError(p + ": expected a JSON object");
  const std::string format = text(doc, "format", p);
  if (format != "zerosim-calibration/1") {
    throw CalibrationError(p + ".format: expected \"zerosim-calibration/1\", got \"" + format + "\"");
  }
  Calibration c;
  c.gpu = text(doc, "gpu", p);
  if (doc.contains("num_gpus")) c.num_gpus = static_cast<int>(count(doc, "num_gpus", p, 1));
  c.date = optional_text(doc, "date");
  c.cuda_runtime = optional_text(doc, "cuda_runtime");
  c.nccl_version = optional_text(doc, "nccl_version");
  const json& gemm = need(doc, "gemm", p);
  if (!gemm.is_array()) throw CalibrationError(p + ".gemm: expected an array");
  for (std::size_t i = 0; i < gemm.size(); ++i) {
    const std::string gp = p + ".gemm[" + std::to_string(i) + "]";
    GemmPoint g;
    g.m = count(gemm[i], "m", gp, 1);
    g.n = count(gemm[i], "n", gp, 1);
    g.k = count(gemm[i], "k", gp, 1);
    g.dtype = text(gemm[i], "dtype", gp);
    if (g.dtype != "bf16" && g.dtype != "fp16" && g.dtype != "fp32" && g.dtype != "tf32" && g.dtype != "fp8") {
      throw CalibrationError(gp + ".dtype: unknown '" + g.dtype + "'; allowed: bf16, fp16, fp32, tf32, fp8");
    }
    g.tflops = rate(gemm[i], "tflops", gp);
    c.gemm.push_back(std::move(g));
  }
  c.hbm_copy_GBps = rate(doc, "hbm_copy_GBps", p);
  c.h2d_GBps = rate(doc, "h2d_GBps", p);
  c.d2h_GBps = rate(doc, "d2h_GBps", p);
  c.adam_params_per_s = rate(doc, "adam_params_per_s", p);
  if (auto it = doc.find("adam"); it != doc.end()) {
    if (!it->is_object()) throw CalibrationError(p + ".adam: expected an object");
    c.adam = *it;
  }
  const json& coll = need(doc, "collectives", p);
  if (!coll.is_array()) throw CalibrationError(p + ".collectives: expected an array");
  for (std::size_t i = 0; i < coll.size(); ++i) {
    const std::string cp = p + ".collectives[" + std::to_string(i) + "]";
    CollectivePoint x;
    x.op = text(coll[i], "op", cp);
    static const char* ops[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "send_recv"};
    if (std::find(std::begin(ops), std::end(ops), x.op) == std::end(ops)) {
      throw CalibrationError(cp + ".op: unknown collective '" + x.op + "'");
    }
    x.ranks = static_cast<int>(count(coll[i], "ranks", cp, 1));
    x.bytes = count(coll[i], "bytes", cp, 0);
    x.time_us = rate(coll[i], "time_us", cp);
    x.busbw_GBps = need(coll[i], "busbw_GBps", cp).is_number() ? coll[i]["busbw_GBps"].get<double>() : -1;
    if (x.busbw_GBps < 0) throw CalibrationError(cp + ".busbw_GBps: expected a number >= 0");
    if (auto it = coll[i].find("algbw_GBps"); it != coll[i].end() && it->is_number()) x.algbw_GBps = it->get<double>();
    c.collectives.push_back(std::move(x));
  }
  return c;
}

}  // namespace zerosim::validate
