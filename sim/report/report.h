#pragma once
// The report of a step: a human summary, a JSON document with stable keys (add, don't rename),
// and a Chrome/Perfetto trace of the streams of the ranks asked for.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/run/simulate.h"

namespace zerosim {

nlohmann::json report_json(const Scenario& s, const StepReport& r, bool with_time);
std::string report_text(const Scenario& s, const StepReport& r, bool with_time);

// --trace-ranks SPEC: "stages" (the default: the first rank of each pipeline stage, which holds
// every op of the step once, so the trace stays bounded as ranks grow), "all" (every simulated
// rank), or cluster ranks and ranges such as "0,8,16" or "0-7,64".
struct TraceRankSpec {
  enum Kind { Stages, All, List } kind = Stages;
  std::vector<int> ranks;  // List: cluster ranks, ascending
  std::string text;        // as given
};

// The ranks one trace holds.
struct TraceRanks {
  std::vector<int> plan_ranks;     // ascending
  std::vector<int> cluster_ranks;  // the GPUs they are (differ from plan_ranks when folded)
  int num_gpus = 0;
  std::string summary;  // "4 of 256 ranks (0,64,128,192: the first rank of each pipeline stage...)"
};

// Reads SPEC before the step is simulated, so a bad one costs no simulation. InputError naming
// --trace-ranks for anything but the forms above or a rank not below num_gpus.
TraceRankSpec parse_trace_ranks(const std::string& spec, int num_gpus);
// The plan ranks SPEC names. A folded plan (sim.ranks = folded) holds only the first
// data-parallel replica; naming a rank of another replica is an InputError saying which can be
// named.
TraceRanks select_trace_ranks(const Simulation& sim, const TraceRankSpec& spec, int num_gpus);
// Processes are numbered and named by cluster rank; "otherData" lists the traced ranks.
void write_chrome_trace(std::ostream& out, const Simulation& sim, const TraceRanks& ranks);

}  // namespace zerosim
