#pragma once
// The pinned-trajectory table (as OMNeT++ fingerprints its simulations): tests/fingerprints/fingerprints.json holds a dozen
// small scenarios, each with the engine fingerprint of its simulated step (a 64-bit fold of the
// time, kind, rank, op and bytes of every completed op, sim/core/engine.h), the event count and
// the makespan. The test recomputes them; the table changes only through `update_fingerprints`
// (see docs/RELIABILITY.md), and every change is explained in the commit that makes it.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/common/json_table.h"
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim::fingerprints {

// ordered_json so that a rewrite keeps the table's key order (small diffs in review).
using testing_tables::read_table;
using testing_tables::table_json;

struct Pinned {
  std::string fingerprint;  // 16 lower-case hex digits, as `zerosim simulate --fingerprint`
  std::uint64_t events = 0;
  SimTime makespan_ps = 0;
  bool operator==(const Pinned&) const = default;
};

struct Entry {
  std::string name;
  std::string covers;  // the features this scenario is in the table for
  nlohmann::json scenario;
  Pinned pinned;
};

inline std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

inline std::string default_table_path() {
  return std::string(ZEROSIM_SOURCE_DIR) + "/tests/fingerprints/fingerprints.json";
}


inline std::vector<Entry> entries_of(const table_json& table) {
  std::vector<Entry> out;
  for (const auto& e : table.at("scenarios")) {
    Entry x;
    x.name = e.at("name").get<std::string>();
    x.covers = e.value("covers", std::string());
    x.scenario = nlohmann::json::parse(e.at("scenario").dump());
    if (e.contains("fingerprint")) {
      x.pinned.fingerprint = e.at("fingerprint").get<std::string>();
      x.pinned.events = e.at("events").get<std::uint64_t>();
      x.pinned.makespan_ps = e.at("makespan_ps").get<SimTime>();
    }
    out.push_back(std::move(x));
  }
  return out;
}

inline Pinned pinned_of(const Simulation& sim) {
  return {hex64(sim.report.fingerprint), sim.report.events, sim.result.makespan};
}

// resolve_scenario + simulate_step, as `zerosim simulate` runs it.
inline Pinned compute(const nlohmann::json& scenario) {
  return pinned_of(simulate_step(resolve_scenario(scenario)));
}

}  // namespace zerosim::fingerprints
