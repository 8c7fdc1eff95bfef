#pragma once
// `zerosim plan`: one rank's (or every rank's) op list as JSON, the contract with validate/,
// which replays exactly these ops on GPUs. Format "zerosim-plan/1":
//   { "format", "scenario" (resolved), "num_ranks",
//     "groups": [{"id", "name", "kind": "dp"|"tp"|"pp", "ranks": [...]}],
//     "ranks": [{"rank", "ops": [{
//        "id" (index within the rank), "kind": compute|collective|copy|alloc|free,
//        "stream", "name", "phase", "deps": [ids within the rank, explicit only; stream order is
//        implied by the order of ops on a stream],
//        compute: "work": attention_forward|..., "gemms": [{"name","m","n","k","count"}] (the
//                 GEMMs the op runs, backward as dgrad + wgrad shapes), "attention_flops",
//                 "elementwise_bytes" (all three as the cost model prices them:
//                 sim/cost/work_kernels.h), "elements" (optimizer: parameters updated),
//        collective: "collective": all_reduce|..., "group", "bytes", "peers" (group ranks),
//        alloc/free: "category", "bytes",
//        "predicted_start_s", "predicted_duration_s" }]}] }
#include <nlohmann/json.hpp>

#include "sim/run/simulate.h"

namespace zerosim {

// rank < 0: every rank.
nlohmann::json export_plan(const Scenario& s, const Simulation& sim, int rank);

}  // namespace zerosim
