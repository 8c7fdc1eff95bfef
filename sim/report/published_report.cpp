#include "sim/report/published_report.h"

#include <cstdio>
#include <sstream>

namespace zerosim {

using json = nlohmann::json;

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
      if (r.measured_peak_gib > 0) {
        c["measured_peak_memory_gib"] = r.measured_peak_gib;
        c["peak_memory_metric"] = r.peak_metric;
        c["predicted_peak_matching_gib"] = r.predicted_peak_matching_gib;
        c["memory_error_pct"] = r.memory_error_pct;
      }
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
