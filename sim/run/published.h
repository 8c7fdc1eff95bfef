#pragma once
// `zerosim validate-published`: simulate published training runs (format
// "zerosim-published-cases/1", docs/SOURCES.md#case-file-format) and compare the predicted step
// time with the measured one. Cases zerosim cannot simulate are listed as skipped with the
// reason, never dropped.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim {

struct CaseResult {
  std::string id, source, group;  // group: the id's first token (megatron, ds, usp, ...)
  bool approximate = false;
  bool skipped = false;
  std::string skip_reason;
  double predicted_s = 0, measured_s = 0, error_pct = 0;  // error = (pred - meas) / meas
  double predicted_peak_gib = 0, measured_peak_gib = 0;   // measured 0 when not published
  // The prediction of the figure the source measured (measured.peak_memory_metric: "allocated",
  // "reserved" or "nvidia-smi", of the busiest rank or, with measured.peak_memory_rank "0", of
  // rank 0) and its error (pred - meas) / meas; 0 without a measured peak.
  std::string peak_metric;
  double predicted_peak_matching_gib = 0, memory_error_pct = 0;
  bool fits = true;
};

struct PublishedSummary {
  std::vector<CaseResult> cases;
  double mape_pct = 0, mape_exact_pct = 0;  // all simulated cases; non-approximate ones
  std::vector<std::pair<std::string, double>> mape_by_group;
  int simulated = 0, skipped = 0;
};

// The cases bundled with zerosim (validate/cases/*.json, compiled in).
nlohmann::json bundled_cases();

// `settings` ("key=value", as --set) apply to every case, e.g. sim.network=analytical. The cases
// run on `jobs` threads (0 = one per hardware thread); the summary does not depend on it.
PublishedSummary validate_published(const nlohmann::json& cases_doc,
                                    const std::vector<std::string>& settings = {}, int jobs = 0);

}  // namespace zerosim
