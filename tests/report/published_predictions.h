#pragma once
// The pinned predictions of the bundled published runs (tests/report/published_predictions.json):
// every case's predicted step time and peak memory, on two networks, so that any change to a
// prediction shows in review as a diff of this file. The test compares exactly; the file changes
// only through update_published_predictions (tests/report/update_published_predictions.cpp),
// and the commit that changes it says why the predictions moved.
//
// Two pinned runs, chosen for test time (docs/VALIDATION.md#regression-tests):
//  - "analytical" (NCCL's closed form, ~5x faster than flows): every bundled case, vTrain's
//    1,549 included;
//  - "flow" (the default network): the non-approximate cases of the default run, the headline
//    figures, where the flow network's own changes must show.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/common/json_table.h"

#include "sim/run/published.h"

namespace zerosim::pinned {

// ordered_json: the cases stay in the bundled order, so a rewrite gives a small diff.
using testing_tables::read_table;
using testing_tables::table_json;

inline const std::vector<std::string>& run_names() {
  static const std::vector<std::string> names = {"analytical", "flow"};
  return names;
}

inline std::vector<std::string> settings_of(const std::string& run) {
  return {"sim.network=" + run};
}

// The cases a pinned run covers (see the header comment).
inline nlohmann::json cases_of(const std::string& run) {
  const nlohmann::json all = bundled_cases();
  if (run == "analytical") return all;
  CaseSelection sel;
  sel.default_run = true;
  nlohmann::json out = select_cases(all, sel);
  nlohmann::json exact = nlohmann::json::array();
  for (const auto& c : out["cases"]) {
    const nlohmann::json a = c.value("approximate", nlohmann::json());
    if (a.is_null() || (a.is_array() && a.empty())) exact.push_back(c);  // as CaseResult reads it
  }
  out["cases"] = exact;
  return out;
}

// id -> {step_time_s, peak_memory_gib} of every simulated case.
inline table_json predictions_of(const PublishedSummary& s) {
  table_json out = table_json::object();
  for (const CaseResult& r : s.cases) {
    if (r.skipped) continue;
    out[r.id] = {{"step_time_s", r.predicted_s}, {"peak_memory_gib", r.predicted_peak_gib}};
  }
  return out;
}

inline std::string default_path() {
  return std::string(ZEROSIM_SOURCE_DIR) + "/tests/report/published_predictions.json";
}


// One case per line: a changed prediction is one changed line in review.
inline std::string render(const table_json& table) {
  std::string out = "{\n";
  out += " \"format\": " + table.at("format").dump() + ",\n";
  out += " \"about\": " + table.at("about").dump() + ",\n";
  for (std::size_t r = 0; r < run_names().size(); ++r) {
    const table_json& run = table.at(run_names()[r]);
    out += " \"" + run_names()[r] + "\": {\n";
    std::size_t i = 0;
    for (auto it = run.begin(); it != run.end(); ++it, ++i) {
      out += "  " + nlohmann::json(it.key()).dump() + ": " + it.value().dump() +
             (i + 1 < run.size() ? ",\n" : "\n");
    }
    out += r + 1 < run_names().size() ? " },\n" : " }\n";
  }
  return out + "}\n";
}

}  // namespace zerosim::pinned
