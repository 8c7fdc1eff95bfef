#include "sim/report/published_report.h"

#include <cstdio>
#include <sstream>

namespace zerosim {

using json = nlohmann::json;

namespace {

// Which two figures the memory error compares; printed with every rendering so that nobody
// reads an allocator-cache gap as a model error without knowing.
constexpr const char* kMemoryCompared =
    "measured = the published peak as the source reported it, read as GiB, and the metric it "
    "names (measured.peak_memory_metric: allocated = torch.cuda.max_memory_allocated, reserved = "
    "max_memory_reserved, nvidia-smi = the whole process; of the busiest rank unless "
    "peak_memory_rank is \"0\"); predicted = zerosim's figure of that metric (peak_GiB); "
    "the fits verdict compares the predicted nvidia-smi peak with the GPU";

// Families of each set in the split's order, e.g. "megatron-sc21".
std::string families_of(const std::string& set) {
  std::string out;
  for (const PublishedFamily& f : published_split().families) {
    if (f.set != set) continue;
    out += (out.empty() ? "" : ", ") + f.name;
  }
  return out;
}

// MAPE cell: "-" where no case has the figure.
std::string pct_or_dash(double v, int n) {
  if (n == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

json error_json(const ErrorSummary& e) {
  const auto or_null = [](double v, int n) { return n > 0 ? json(v) : json(nullptr); };
  return {{"cases", e.cases},
          {"skipped", e.skipped},
          {"time_mape_pct", or_null(e.time_mape_pct, e.cases)},
          {"exact_cases", e.exact_cases},
          {"time_mape_exact_pct", or_null(e.time_mape_exact_pct, e.exact_cases)},
          {"memory_cases", e.memory_cases},
          {"memory_mape_pct", or_null(e.memory_mape_pct, e.memory_cases)}};
}

std::vector<const CaseResult*> not_fitting(const PublishedSummary& s) {
  std::vector<const CaseResult*> out;
  for (const CaseResult& r : s.cases) {
    if (!r.skipped && !r.fits) out.push_back(&r);
  }
  return out;
}

// One row per set, its families indented under it: (label, summary).
std::vector<std::pair<std::string, const ErrorSummary*>> set_rows(const PublishedSummary& s) {
  std::vector<std::pair<std::string, const ErrorSummary*>> rows;
  for (const auto& [set, e] : s.by_set) {
    rows.emplace_back(set, &e);
    for (const auto& [fam, fe] : s.by_family) {
      if (published_split().find(fam)->set == set) rows.emplace_back("  " + fam, &fe);
    }
  }
  return rows;
}

}  // namespace

json published_json(const PublishedSummary& s) {
  json cases = json::array();
  for (const CaseResult& r : s.cases) {
    json c = {{"id", r.id},         {"family", r.family}, {"set", r.set},
              {"source", r.source}, {"approximate", r.approximate},
              {"measured_step_time_s", r.measured_s}};
    if (r.measured_peak_gib > 0) c["measured_peak_memory_gib"] = r.measured_peak_gib;
    if (r.skipped) {
      c["skipped"] = true;
      c["reason"] = r.skip_reason;
    } else {
      c["predicted_step_time_s"] = r.predicted_s;
      c["error_pct"] = r.error_pct;
      c["predicted_peak_memory_gib"] = r.predicted_peak_gib;
      c["predicted_nvidia_smi_peak_gib"] = r.predicted_smi_peak_gib;
      c["gpu_memory_gib"] = r.gpu_memory_gib;
      c["fits_in_memory"] = r.fits;
      if (r.measured_peak_gib > 0) {
        c["peak_memory_metric"] = r.peak_metric;
        c["predicted_peak_matching_gib"] = r.predicted_peak_matching_gib;
        c["memory_error_pct"] = r.memory_error_pct;
      }
    }
    cases.push_back(std::move(c));
  }
  json groups = json::object();
  for (const auto& [g, m] : s.mape_by_group) groups[g] = m;
  json sets = json::object();
  for (const auto& [set, e] : s.by_set) {
    sets[set] = error_json(e);
    sets[set]["families"] = families_of(set);
  }
  json families = json::object();
  for (const auto& [fam, e] : s.by_family) {
    families[fam] = error_json(e);
    families[fam]["set"] = published_split().find(fam)->set;
  }
  json unfit = json::array();
  for (const CaseResult* r : not_fitting(s)) {
    unfit.push_back({{"id", r->id},
                     {"family", r->family},
                     {"predicted_nvidia_smi_peak_gib", r->predicted_smi_peak_gib},
                     {"gpu_memory_gib", r->gpu_memory_gib}});
  }
  return {{"cases", cases},
          {"mape_pct", s.mape_pct},
          {"mape_non_approximate_pct", s.mape_exact_pct},
          {"mape_by_source_pct", groups},
          {"simulated", s.simulated},
          {"skipped", s.skipped},
          {"split", published_split().about},
          {"sets", sets},
          {"families", families},
          {"memory_compared", kMemoryCompared},
          {"not_fitting", unfit}};
}

std::string published_text(const PublishedSummary& s) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-44s %12s %12s %9s %9s %9s %9s\n", "case", "predicted_s",
                "measured_s", "error_%", "peak_GiB", "meas_GiB", "mem_err_%");
  o << line;
  for (const CaseResult& r : s.cases) {
    if (r.skipped) {
      std::snprintf(line, sizeof line, "%-44s skipped: %s\n", r.id.c_str(), r.skip_reason.c_str());
    } else if (r.measured_peak_gib > 0) {
      std::snprintf(line, sizeof line, "%-44s %12.3f %12.3f %+8.1f %9.1f %9.1f %+8.1f%s%s\n",
                    r.id.c_str(), r.predicted_s, r.measured_s, r.error_pct,
                    r.predicted_peak_matching_gib, r.measured_peak_gib, r.memory_error_pct,
                    r.approximate ? " ~" : "",
                    r.fits ? "" : " !");
    } else {
      std::snprintf(line, sizeof line, "%-44s %12.3f %12.3f %+8.1f %9.1f %9s %9s%s%s\n",
                    r.id.c_str(), r.predicted_s, r.measured_s, r.error_pct, r.predicted_peak_gib,
                    "", "", r.approximate ? " ~" : "", r.fits ? "" : " !");
    }
    o << line;
  }
  std::snprintf(line, sizeof line,
                "\nMAPE %.1f %% over %d simulated cases; %.1f %% over the non-approximate ones; "
                "%d skipped (~ = approximate, ! = predicted not to fit)\n",
                s.mape_pct, s.simulated, s.mape_exact_pct, s.skipped);
  o << line;
  for (const auto& [g, m] : s.mape_by_group) {
    std::snprintf(line, sizeof line, "  MAPE %-12s %6.1f %%\n", g.c_str(), m);
    o << line;
  }
  o << "\nCalibration (constants may be fitted on it): " << families_of("calibration")
    << "\nEvaluation (informs no constant): " << families_of("evaluation")
    << "\n(validate/cases/split.json)\n";
  std::snprintf(line, sizeof line, "%-18s %6s %12s %6s %12s %6s %12s\n", "set / family", "cases",
                "time_MAPE_%", "exact", "exact_MAPE_%", "memory", "mem_MAPE_%");
  o << line;
  for (const auto& [label, e] : set_rows(s)) {
    std::snprintf(line, sizeof line, "%-18s %6d %12s %6d %12s %6d %12s\n", label.c_str(), e->cases,
                  pct_or_dash(e->time_mape_pct, e->cases).c_str(), e->exact_cases,
                  pct_or_dash(e->time_mape_exact_pct, e->exact_cases).c_str(), e->memory_cases,
                  pct_or_dash(e->memory_mape_pct, e->memory_cases).c_str());
    o << line;
  }
  o << "Memory: " << kMemoryCompared << ".\n";
  const auto unfit = not_fitting(s);
  o << "\nPredicted not to fit on the GPUs they ran on (simulated anyway, sim.allow_oom): "
    << unfit.size() << (unfit.empty() ? "\n" : ":\n");
  for (const CaseResult* r : unfit) {
    std::snprintf(line, sizeof line, "  %-44s %7.1f GiB predicted (nvidia-smi), %5.1f GiB GPU\n",
                  r->id.c_str(), r->predicted_smi_peak_gib, r->gpu_memory_gib);
    o << line;
  }
  return o.str();
}

std::string published_markdown(const PublishedSummary& s) {
  std::ostringstream o;
  char line[600];
  o << "| case | predicted s | measured s | error % | predicted GiB | measured GiB | memory error % "
       "| approx. |\n|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const CaseResult& r : s.cases) {
    if (r.skipped) {
      std::snprintf(line, sizeof line, "| %s | skipped | %.3f | | | | | %s |\n", r.id.c_str(),
                    r.measured_s, r.skip_reason.c_str());
    } else if (r.measured_peak_gib > 0) {
      std::snprintf(line, sizeof line, "| %s | %.3f | %.3f | %+.1f | %.1f | %.1f | %+.1f | %s |\n",
                    r.id.c_str(), r.predicted_s, r.measured_s, r.error_pct,
                    r.predicted_peak_matching_gib, r.measured_peak_gib, r.memory_error_pct,
                    r.approximate ? "yes" : "");
    } else {
      std::snprintf(line, sizeof line, "| %s | %.3f | %.3f | %+.1f | %.1f | | | %s |\n",
                    r.id.c_str(), r.predicted_s, r.measured_s, r.error_pct, r.predicted_peak_gib,
                    r.approximate ? "yes" : "");
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
  o << "\nCalibration (constants may be fitted on it): " << families_of("calibration")
    << ". Evaluation (informs no constant): " << families_of("evaluation")
    << " (`validate/cases/split.json`).\n\n"
    << "| set / family | cases | time MAPE % | non-approx. | time MAPE % (non-approx.) | with "
       "memory | memory MAPE % |\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [label, e] : set_rows(s)) {
    // A family's label is indented; a set's is set in bold.
    const std::string name = label.rfind("  ", 0) == 0 ? label.substr(2) : "**" + label + "**";
    std::snprintf(line, sizeof line, "| %s | %d | %s | %d | %s | %d | %s |\n", name.c_str(), e->cases,
                  pct_or_dash(e->time_mape_pct, e->cases).c_str(), e->exact_cases,
                  pct_or_dash(e->time_mape_exact_pct, e->exact_cases).c_str(), e->memory_cases,
                  pct_or_dash(e->memory_mape_pct, e->memory_cases).c_str());
    o << line;
  }
  o << "\nMemory: " << kMemoryCompared << ".\n";
  const auto unfit = not_fitting(s);
  o << "\nPredicted not to fit on the GPUs they ran on (simulated anyway, `sim.allow_oom`): "
    << unfit.size() << (unfit.empty() ? ".\n" : "\n\n| case | predicted GiB | GPU GiB |\n|---|---:|---:|\n");
  for (const CaseResult* r : unfit) {
    std::snprintf(line, sizeof line, "| %s | %.1f | %.1f |\n", r->id.c_str(),
                  r->predicted_smi_peak_gib, r->gpu_memory_gib);
    o << line;
  }
  return o.str();
}

}  // namespace zerosim
