#pragma once
// `zerosim validate-published`: simulate published training runs (format
// "zerosim-published-cases/1", docs/SOURCES.md#case-file-format) and compare the predicted step
// time and peak memory with the measured ones, per calibration / evaluation set and per source
// family (validate/cases/split.json). Cases zerosim cannot simulate are listed as skipped with
// the reason, never dropped.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim {

// One source family of the split and the set it belongs to.
struct PublishedFamily {
  std::string name, set, about;  // set: "calibration" or "evaluation"
  bool in_default_run = true;    // false: runs only when named or when its set is asked for
};

// The fixed split of the bundled measurements (validate/cases/split.json, compiled in): constants
// may be fitted on the calibration families only, so the evaluation families' error is out of
// sample.
struct PublishedSplit {
  std::string about;
  std::vector<PublishedFamily> families;  // in the file's order
  const PublishedFamily* find(const std::string& name) const;
};
const PublishedSplit& published_split();

// The family case `c` names, or "user" where it names none (a --cases file of one's own);
// InputError naming `path`.family when it is not a string or not a family of the split.
std::string case_family(const nlohmann::json& c, const std::string& path);

// Which cases of a file to simulate.
struct CaseSelection {
  std::string split = "all";          // "calibration", "evaluation" or "all"
  std::vector<std::string> families;  // empty: every family
  // Leave out the families the split keeps out of the default run (vtrain): the bare command.
  bool default_run = false;
};

// The cases of `cases_doc` that `sel` selects, in their order, as a cases document. InputError
// naming "--split" / "--family" for an unknown set or family, or the case key of a bad family.
nlohmann::json select_cases(const nlohmann::json& cases_doc, const CaseSelection& sel);

struct CaseResult {
  std::string id, source, group;  // group: the id's first token (megatron, ds, usp, ...)
  std::string family, set;        // the case's family and its set (published_split)
  bool approximate = false;
  bool skipped = false;
  std::string skip_reason;
  double predicted_s = 0, measured_s = 0, error_pct = 0;  // error = (pred - meas) / meas
  // Peak memory: measured 0 when not published. predicted_peak_gib is the busiest rank's
  // allocations (StepReport::memory.peak); predicted_peak_matching_gib the prediction of the
  // figure the source measured (measured.peak_memory_metric: "allocated", "reserved" or
  // "nvidia-smi", of the busiest rank or, with measured.peak_memory_rank "0", of rank 0), and
  // memory_error_pct its error (pred - meas) / meas.
  double predicted_peak_gib = 0, measured_peak_gib = 0;
  std::string peak_metric;
  double predicted_peak_matching_gib = 0, memory_error_pct = 0;
  double predicted_smi_peak_gib = 0;  // the busiest rank's nvidia-smi figure, what fits compares
  double gpu_memory_gib = 0;  // the GPU's memory in the case's cluster
  bool fits = true;           // predicted nvidia-smi peak <= GPU memory (simulated anyway: sim.allow_oom)
};

// Error over the simulated cases of one set or family.
struct ErrorSummary {
  int cases = 0, exact_cases = 0, memory_cases = 0, skipped = 0;
  double time_mape_pct = 0;        // all simulated cases
  double time_mape_exact_pct = 0;  // the non-approximate ones (0 when there are none)
  double memory_mape_pct = 0;      // the cases with a measured peak (0 when there are none)
};

struct PublishedSummary {
  std::vector<CaseResult> cases;
  double mape_pct = 0, mape_exact_pct = 0;  // all simulated cases; non-approximate ones
  std::vector<std::pair<std::string, double>> mape_by_group;
  int simulated = 0, skipped = 0;
  // "calibration" then "evaluation", always both; families in the split's order, those present.
  std::vector<std::pair<std::string, ErrorSummary>> by_set, by_family;
};

// The cases bundled with zerosim (validate/cases/*.json but split.json, compiled in), every family.
nlohmann::json bundled_cases();

// The scenario document of the case `id` of `cases_doc`, with `settings` (KEY=VALUE) applied, as
// validate_published simulates it; InputError "--scenario-of" for an id that is not there.
nlohmann::json case_scenario_of(const nlohmann::json& cases_doc, const std::string& id,
                                const std::vector<std::string>& settings);

// `settings` ("key=value", as --set) apply to every case, e.g. sim.network=analytical. The cases
// run on `jobs` threads (0 = one per hardware thread); the summary does not depend on it.
PublishedSummary validate_published(const nlohmann::json& cases_doc,
                                    const std::vector<std::string>& settings = {}, int jobs = 0);

}  // namespace zerosim
