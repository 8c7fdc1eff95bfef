#pragma once
// The report of a step: a human summary, a JSON document with stable keys (add, don't rename),
// and a Chrome/Perfetto trace of every rank's streams.
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/run/simulate.h"

namespace zerosim {

nlohmann::json report_json(const Scenario& s, const StepReport& r, bool with_time);
std::string report_text(const Scenario& s, const StepReport& r, bool with_time);
void write_chrome_trace(std::ostream& out, const Simulation& sim);

}  // namespace zerosim
