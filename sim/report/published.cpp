#include "sim/report/published.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/parallel_for.h"
#include "sim/report/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim::embedded {
std::size_t published_count();
const char* published_name(std::size_t i);
const char* const* published_chunks(std::size_t i);
}  // namespace zerosim::embedded

namespace zerosim {
namespace {

using json = nlohmann::json;

const json& require(const json& obj, const std::string& key, const std::string& path) {
  if (!obj.is_object()) throw InputError(path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) throw InputError(key_join(path, key), "missing");
  return *it;
}

// Copies the keys of a case section that the scenario knows, reporting unknown ones.
void copy_keys(const json& from, const std::string& path, const std::vector<std::string>& known,
               json& to) {
  if (!from.is_object()) throw InputError(path, "expected an object");
  for (auto it = from.begin(); it != from.end(); ++it) {
    bool ok = false;
    for (const auto& k : known) ok = ok || k == it.key();
    if (!ok) {
      throw InputError(key_join(path, it.key()),
                       "unknown key" + did_you_mean(it.key(), known) + "; allowed: " +
                           join_list(known));
    }
    to[it.key()] = *it;
  }
}

double mape(const std::vector<double>& errs) {
  if (errs.empty()) return 0;
  double sum = 0;
  for (double e : errs) sum += std::fabs(e);
  return sum / static_cast<double>(errs.size());
}

}  // namespace

json bundled_cases() {
  json all = {{"format", "zerosim-published-cases/1"}, {"cases", json::array()}};
  for (std::size_t i = 0; i < embedded::published_count(); ++i) {
    std::string text;
    for (const char* const* p = embedded::published_chunks(i); *p; ++p) text += *p;
    json doc = json::parse(text);
    for (auto& c : doc["cases"]) all["cases"].push_back(std::move(c));
  }
  return all;
}

json case_scenario(const json& c, const std::string& path) {
  json doc;
  doc["model"] = require(c, "model", path);
  const json& cluster = require(c, "cluster", path);
  doc["cluster"] = json::object();
  copy_keys(cluster, key_join(path, "cluster"), {"preset", "num_gpus", "nodes", "nics_per_node"},
            doc["cluster"]);
  json training = json::object();
  copy_keys(require(c, "training", path), key_join(path, "training"),
            {"global_batch_size", "micro_batch_size", "precision", "flash_attention"}, training);
  doc["training"] = training;
  const json& par = require(c, "parallel", path);
  json parallel = json::object();
  copy_keys(par, key_join(path, "parallel"),
            {"tp", "pp", "dp", "cp", "zero_stage", "virtual_stages", "sequence_parallel",
             "recompute", "offload_optimizer", "offload_param", "delayed_param_update",
             "zero_quantized_weights", "zero_hpz_partition_size", "zero_quantized_gradients",
             "mics_shard_size", "framework", "overlap_grad_reduce", "overlap_param_gather",
             "stage3_implementation"},
            parallel);
  // The case format keeps every parallelism and ZeRO knob under "parallel"; the scenario has
  // DeepSpeed's zero_optimization names under "zero".
  json zero = json::object();
  if (parallel.contains("zero_stage")) {
    zero["stage"] = parallel["zero_stage"];
    parallel.erase("zero_stage");
  }
  for (const char* key : {"offload_optimizer", "offload_param"}) {
    if (parallel.contains(key)) {
      zero[key] = {{"device", parallel[key]}};
      parallel.erase(key);
    }
  }
  if (parallel.contains("delayed_param_update")) {
    zero["offload_optimizer"]["delayed_param_update"] = parallel["delayed_param_update"];
    parallel.erase("delayed_param_update");
  }
  for (const char* key : {"zero_quantized_weights", "zero_hpz_partition_size",
                          "zero_quantized_gradients", "mics_shard_size", "stage3_implementation"}) {
    if (parallel.contains(key)) {
      zero[key] = parallel[key];
      parallel.erase(key);
    }
  }
  doc["parallel"] = parallel;
  doc["zero"] = zero;
  // Published runs did fit; simulate even where our memory model disagrees, and report it.
  doc["sim"] = {{"allow_oom", true}};
  return doc;
}

PublishedSummary validate_published(const json& cases_doc, const std::vector<std::string>& settings,
                                    int jobs) {
  if (!cases_doc.is_object()) throw InputError("cases", "expected an object");
  const json& format = require(cases_doc, "format", "");
  if (format != "zerosim-published-cases/1") {
    throw InputError("format", "expected \"zerosim-published-cases/1\", got " + format.dump());
  }
  const json& cases = require(cases_doc, "cases", "");
  if (!cases.is_array()) throw InputError("cases", "expected an array");
  PublishedSummary out;
  std::vector<json> scenarios(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    const std::string path = "cases[" + std::to_string(i) + "]";
    CaseResult r;
    if (!c.is_object() || !c.contains("id") || !c["id"].is_string()) {
      throw InputError(path + ".id", "every case needs a string id");
    }
    r.id = c["id"].get<std::string>();
    r.group = r.id.substr(0, r.id.find('-'));
    if (c.contains("source") && !c["source"].is_string()) {
      throw InputError(path + ".source", "expected a string");
    }
    r.source = c.value("source", std::string());
    r.approximate = c.contains("approximate") && !c["approximate"].is_null() &&
                    !(c["approximate"].is_array() && c["approximate"].empty());
    const json& measured = require(c, "measured", path);
    const json& step = require(measured, "step_time_s", key_join(path, "measured"));
    if (!step.is_number() || !(step.get<double>() > 0)) {
      throw InputError(path + ".measured.step_time_s", "expected a positive number");
    }
    r.measured_s = step.get<double>();
    if (measured.contains("peak_memory_gb") && measured["peak_memory_gb"].is_number()) {
      r.measured_peak_gib = measured["peak_memory_gb"].get<double>();
    }
    try {
      scenarios[i] = case_scenario(c, path);
    } catch (const InputError& e) {
      r.skipped = true;
      r.skip_reason = e.what();
    }
    out.cases.push_back(std::move(r));
  }
  // The cases are independent: simulated on `jobs` threads, each into its own slot.
  parallel_for(cases.size(), jobs > 0 ? jobs : default_jobs(), [&](std::size_t i) {
    CaseResult& r = out.cases[i];
    if (r.skipped) return;
    try {
      json doc = std::move(scenarios[i]);
      for (const auto& setting : settings) apply_setting(doc, setting);
      Scenario s = resolve_scenario(doc);
      Simulation sim = simulate_step(s);
      r.predicted_s = sim.report.step_time_s;
      r.error_pct = 100.0 * (r.predicted_s - r.measured_s) / r.measured_s;
      r.predicted_peak_gib = static_cast<double>(sim.report.memory.peak) / kGiB;
      r.fits = sim.report.fits_in_memory;
    } catch (const InputError& e) {
      r.skipped = true;
      r.skip_reason = e.what();
    }
  });
  std::vector<double> all, exact;
  std::map<std::string, std::vector<double>> by_group;
  for (const CaseResult& r : out.cases) {
    if (r.skipped) {
      ++out.skipped;
      continue;
    }
    all.push_back(r.error_pct);
    if (!r.approximate) exact.push_back(r.error_pct);
    by_group[r.group].push_back(r.error_pct);
    ++out.simulated;
  }
  out.mape_pct = mape(all);
  out.mape_exact_pct = mape(exact);
  for (const auto& [g, errs] : by_group) out.mape_by_group.emplace_back(g, mape(errs));
  return out;
}

json published_json(const PublishedSummary& s) {
  json cases = json::array();
  for (const CaseResult& r : s.cases) {
    json c = {{"id", r.id}, {"source", r.source}, {"approximate", r.approximate},
              {"measured_step_time_s", r.measured_s}};
    if (r.skipped) {
      c["skipped"] = true;
      c["reason"] = r.skip_reason;
    } else {
      c["predicted_step_time_s"] = r.predicted_s;
      c["error_pct"] = r.error_pct;
      c["predicted_peak_memory_gib"] = r.predicted_peak_gib;
      c["fits_in_memory"] = r.fits;
    }
    cases.push_back(std::move(c));
  }
  json groups = json::object();
  for (const auto& [g, m] : s.mape_by_group) groups[g] = m;
  return {{"cases", cases},           {"mape_pct", s.mape_pct},
          {"mape_non_approximate_pct", s.mape_exact_pct},
          {"mape_by_source_pct", groups}, {"simulated", s.simulated},
          {"skipped", s.skipped}};
}

std::string published_text(const PublishedSummary& s) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-44s %12s %12s %9s\n", "case", "predicted_s", "measured_s",
                "error_%");
  o << line;
  for (const CaseResult& r : s.cases) {
    if (r.skipped) {
      std::snprintf(line, sizeof line, "%-44s skipped: %s\n", r.id.c_str(), r.skip_reason.c_str());
    } else {
      std::snprintf(line, sizeof line, "%-44s %12.3f %12.3f %+8.1f%s\n", r.id.c_str(),
                    r.predicted_s, r.measured_s, r.error_pct, r.approximate ? " ~" : "");
    }
    o << line;
  }
  std::snprintf(line, sizeof line,
                "\nMAPE %.1f %% over %d simulated cases; %.1f %% over the non-approximate ones; "
                "%d skipped (~ = approximate)\n",
                s.mape_pct, s.simulated, s.mape_exact_pct, s.skipped);
  o << line;
  for (const auto& [g, m] : s.mape_by_group) {
    std::snprintf(line, sizeof line, "  MAPE %-12s %6.1f %%\n", g.c_str(), m);
    o << line;
  }
  return o.str();
}

std::string published_markdown(const PublishedSummary& s) {
  std::ostringstream o;
  char line[600];
  o << "| case | predicted s | measured s | error % | approx. |\n|---|---:|---:|---:|---|\n";
  for (const CaseResult& r : s.cases) {
    if (r.skipped) {
      std::snprintf(line, sizeof line, "| %s | skipped | %.3f | | %s |\n", r.id.c_str(),
                    r.measured_s, r.skip_reason.c_str());
    } else {
      std::snprintf(line, sizeof line, "| %s | %.3f | %.3f | %+.1f | %s |\n", r.id.c_str(),
                    r.predicted_s, r.measured_s, r.error_pct, r.approximate ? "yes" : "");
    }
    o << line;
  }
  std::snprintf(line, sizeof line,
                "\nMAPE %.1f %% over %d simulated cases, %.1f %% over the non-approximate ones, "
                "%d skipped.\n\n| source | MAPE %% |\n|---|---:|\n",
                s.mape_pct, s.simulated, s.mape_exact_pct, s.skipped);
  o << line;
  for (const auto& [g, m] : s.mape_by_group) {
    std::snprintf(line, sizeof line, "| %s | %.1f |\n", g.c_str(), m);
    o << line;
  }
  return o.str();
}

}  // namespace zerosim
