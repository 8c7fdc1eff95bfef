#include "sim/run/published.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/parallel_for.h"
#include "sim/run/simulate.h"
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

double mape(const std::vector<double>& errs) {
  if (errs.empty()) return 0;
  double sum = 0;
  for (double e : errs) sum += std::fabs(e);
  return sum / static_cast<double>(errs.size());
}

// Which figure a case's measured peak is (docs/SOURCES.md#case-file-format).
struct PeakMetric {
  std::string metric = "allocated";  // "allocated", "reserved" or "nvidia-smi"
  bool rank0 = false;                // rank 0's figure rather than the busiest rank's
};

PeakMetric memory_metric(const json& measured, const std::string& path) {
  PeakMetric m;
  if (measured.contains("peak_memory_metric")) {
    const json& v = measured["peak_memory_metric"];
    if (!v.is_string() || (v != "allocated" && v != "reserved" && v != "nvidia-smi")) {
      throw InputError(path + ".measured.peak_memory_metric",
                       "expected \"allocated\", \"reserved\" or \"nvidia-smi\", got " + v.dump());
    }
    m.metric = v.get<std::string>();
  }
  if (measured.contains("peak_memory_rank")) {
    const json& v = measured["peak_memory_rank"];
    if (!v.is_string() || (v != "0" && v != "max")) {
      throw InputError(path + ".measured.peak_memory_rank",
                       "expected \"0\" (rank 0's figure) or \"max\" (the busiest rank's), got " +
                           v.dump());
    }
    m.rank0 = v == "0";
  }
  return m;
}

// The predicted figure of that metric: rank 0 is pipeline stage 0 (TP ranks hold the same).
Bytes matching_peak(const StepReport& rep, const PeakMetric& m) {
  auto figure = [&](const MemoryUsage& u) {
    if (m.metric == "reserved") return u.reserved_peak;
    if (m.metric == "nvidia-smi") return u.nvidia_smi_peak();
    return u.peak;
  };
  if (m.rank0) return figure(rep.memory_per_stage.at(0));
  Bytes most = 0;
  for (const MemoryUsage& u : rep.memory_per_stage) most = std::max(most, figure(u));
  return most;
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
  std::vector<PeakMetric> peak_of(cases.size());
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
    peak_of[i] = memory_metric(measured, path);
    r.peak_metric = peak_of[i].metric;
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
      r.predicted_peak_matching_gib = static_cast<double>(matching_peak(sim.report, peak_of[i])) / kGiB;
      if (r.measured_peak_gib > 0) {
        r.memory_error_pct =
            100.0 * (r.predicted_peak_matching_gib - r.measured_peak_gib) / r.measured_peak_gib;
      }
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

}  // namespace zerosim
