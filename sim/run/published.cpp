#include "sim/run/published.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

#include "sim/core/error.h"
#include "sim/core/parallel_for.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim::embedded {
std::size_t published_count();
const char* published_name(std::size_t i);
std::string published_text(std::size_t i);
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

// The embedded file that holds the split rather than cases (validate/cases/split.json).
constexpr const char* kSplitFile = "split";

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

const std::vector<std::string> kSets = {"calibration", "evaluation"};

PublishedSplit parse_split(const json& doc) {
  if (doc.value("format", std::string()) != "zerosim-published-split/1") {
    throw std::logic_error("validate/cases/split.json: format is not zerosim-published-split/1");
  }
  PublishedSplit split;
  split.about = doc.at("about").get<std::string>();
  for (const json& f : doc.at("families")) {
    PublishedFamily fam{f.at("family").get<std::string>(), f.at("set").get<std::string>(),
                        f.at("about").get<std::string>(), f.value("in_default_run", true)};
    if (std::find(kSets.begin(), kSets.end(), fam.set) == kSets.end() ||
        split.find(fam.name) != nullptr) {
      throw std::logic_error("validate/cases/split.json: bad or repeated family " + fam.name);
    }
    split.families.push_back(std::move(fam));
  }
  return split;
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const PublishedFamily& f : published_split().families) names.push_back(f.name);
  return names;
}

const json& cases_of(const json& cases_doc) {
  if (!cases_doc.is_object()) throw InputError("cases", "expected an object");
  const json& format = require(cases_doc, "format", "");
  if (format != "zerosim-published-cases/1") {
    throw InputError("format", "expected \"zerosim-published-cases/1\", got " + format.dump());
  }
  const json& cases = require(cases_doc, "cases", "");
  if (!cases.is_array()) throw InputError("cases", "expected an array");
  return cases;
}

// Time, exact-time and memory MAPE over `rs`.
ErrorSummary summarize(const std::vector<const CaseResult*>& rs) {
  ErrorSummary e;
  std::vector<double> all, exact, memory;
  for (const CaseResult* r : rs) {
    if (r->skipped) {
      ++e.skipped;
      continue;
    }
    all.push_back(r->error_pct);
    if (!r->approximate) exact.push_back(r->error_pct);
    if (r->measured_peak_gib > 0) memory.push_back(r->memory_error_pct);
  }
  e.cases = static_cast<int>(all.size());
  e.exact_cases = static_cast<int>(exact.size());
  e.memory_cases = static_cast<int>(memory.size());
  e.time_mape_pct = mape(all);
  e.time_mape_exact_pct = mape(exact);
  e.memory_mape_pct = mape(memory);
  return e;
}

}  // namespace

const PublishedFamily* PublishedSplit::find(const std::string& name) const {
  for (const PublishedFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const PublishedSplit& published_split() {
  static const PublishedSplit split = [] {
    for (std::size_t i = 0; i < embedded::published_count(); ++i) {
      if (std::string(embedded::published_name(i)) == kSplitFile) {
        return parse_split(json::parse(embedded::published_text(i)));
      }
    }
    throw std::logic_error("validate/cases/split.json is not compiled in");
  }();
  return split;
}

std::string case_family(const json& c, const std::string& path) {
  if (!c.is_object() || !c.contains("family")) return "user";
  const json& f = c["family"];
  const std::string where = key_join(path, "family");
  if (!f.is_string()) throw InputError(where, "expected a string");
  const std::string name = f.get<std::string>();
  if (!published_split().find(name)) {
    throw InputError(where, "unknown family '" + name + "'" + did_you_mean(name, family_names()) +
                                "; allowed: " + join_list(family_names()));
  }
  return name;
}

json select_cases(const json& cases_doc, const CaseSelection& sel) {
  if (sel.split != "all" && std::find(kSets.begin(), kSets.end(), sel.split) == kSets.end()) {
    throw InputError("--split", "expected calibration, evaluation or all, got '" + sel.split + "'");
  }
  for (const std::string& f : sel.families) {
    if (!published_split().find(f)) {
      throw InputError("--family", "unknown family '" + f + "'" + did_you_mean(f, family_names()) +
                                       "; allowed: " + join_list(family_names()));
    }
  }
  const json& cases = cases_of(cases_doc);
  json out = cases_doc;
  out["cases"] = json::array();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string name = case_family(cases[i], "cases[" + std::to_string(i) + "]");
    const PublishedFamily& fam = *published_split().find(name);
    const bool named =
        std::find(sel.families.begin(), sel.families.end(), name) != sel.families.end();
    if (!sel.families.empty() && !named) continue;
    if (sel.split != "all" && fam.set != sel.split) continue;
    if (sel.default_run && !fam.in_default_run) continue;
    out["cases"].push_back(cases[i]);
  }
  return out;
}

json bundled_cases() {
  json all = {{"format", "zerosim-published-cases/1"}, {"cases", json::array()}};
  for (std::size_t i = 0; i < embedded::published_count(); ++i) {
    if (std::string(embedded::published_name(i)) == kSplitFile) continue;
    json doc = json::parse(embedded::published_text(i));
    for (auto& c : doc["cases"]) all["cases"].push_back(std::move(c));
  }
  return all;
}

json case_scenario_of(const json& cases_doc, const std::string& id,
                      const std::vector<std::string>& settings) {
  const json& cases = cases_of(cases_doc);
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    if (!c.is_object() || !c.contains("id") || !c["id"].is_string()) continue;
    ids.push_back(c["id"].get<std::string>());
    if (ids.back() != id) continue;
    json doc = case_scenario(c, "cases[" + std::to_string(i) + "]");
    for (const auto& setting : settings) apply_setting(doc, setting);
    return doc;
  }
  throw InputError("--scenario-of", "no case '" + id + "'" + did_you_mean(id, ids));
}

PublishedSummary validate_published(const json& cases_doc, const std::vector<std::string>& settings,
                                    int jobs) {
  const json& cases = cases_of(cases_doc);
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
    r.family = case_family(c, path);
    r.set = published_split().find(r.family)->set;
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
    // Read as GiB: the bundled figures are MiB / 1024 (nvidia-smi's and Megatron's MiB); the
    // Ultra-Scale Playbook's "GB" is not defined by its source (docs/SOURCES.md#case-file-format).
    if (measured.contains("peak_memory_gb") && !measured["peak_memory_gb"].is_null()) {
      const json& peak = measured["peak_memory_gb"];
      if (!peak.is_number() || !(peak.get<double>() > 0)) {
        throw InputError(path + ".measured.peak_memory_gb", "expected a positive number (GiB)");
      }
      r.measured_peak_gib = peak.get<double>();
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
      r.gpu_memory_gib = static_cast<double>(s.cluster.gpu.hbm_bytes) / kGiB;
      r.predicted_smi_peak_gib =
          static_cast<double>(matching_peak(sim.report, PeakMetric{"nvidia-smi", false})) / kGiB;
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
  const auto members = [&](const auto& in) {
    std::vector<const CaseResult*> rs;
    for (const CaseResult& r : out.cases) {
      if (in(r)) rs.push_back(&r);
    }
    return rs;
  };
  const ErrorSummary total = summarize(members([](const CaseResult&) { return true; }));
  out.simulated = total.cases;
  out.skipped = total.skipped;
  out.mape_pct = total.time_mape_pct;
  out.mape_exact_pct = total.time_mape_exact_pct;
  std::map<std::string, std::vector<double>> by_group;
  for (const CaseResult& r : out.cases) {
    if (!r.skipped) by_group[r.group].push_back(r.error_pct);
  }
  for (const auto& [g, errs] : by_group) out.mape_by_group.emplace_back(g, mape(errs));
  for (const std::string& set : kSets) {
    out.by_set.emplace_back(set, summarize(members([&](const CaseResult& r) { return r.set == set; })));
  }
  for (const PublishedFamily& f : published_split().families) {
    const auto rs = members([&](const CaseResult& r) { return r.family == f.name; });
    if (!rs.empty()) out.by_family.emplace_back(f.name, summarize(rs));
  }
  return out;
}

}  // namespace zerosim
