#pragma once
// `zerosim sweep`: the cross product of scenario keys, one simulated step per point.
//
// Points are numbered in the cross product of the --vary flags in their order, the last key
// varying fastest. Every point is simulated with sim.allow_oom=true (fits_in_memory says whether
// it fits); a point the scenario checks reject keeps its row with the InputError message in
// `error`. Rows depend only on the point, never on how many threads or ranks evaluated them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/explore/pool.h"

namespace zerosim::explore {

struct VariedKey {
  std::string key;                  // "zero.stage", "cluster.nic_bandwidth", "model", ...
  std::vector<std::string> values;  // as given on the command line
};

struct SweepRow {
  std::vector<std::string> values;  // this point's value of each varied key
  bool ok = false;                  // simulated (false: `error` says why not)
  double step_time_s = 0, tokens_per_s = 0, tflops_per_gpu = 0, mfu = 0;
  std::int64_t peak_memory_bytes = 0;
  bool fits_in_memory = false;
  // Where the step's time went beyond compute (StepBreakdown): communication exposed by group,
  // the pipeline bubble, waits for offloaded host work, the framework's work for its collectives.
  double exposed_dp_s = 0, exposed_tp_s = 0, exposed_pp_s = 0, exposed_ep_s = 0, exposed_cp_s = 0;
  double bubble_s = 0, offload_s = 0, comm_overhead_s = 0;
  std::int64_t host_memory_per_node_bytes = 0;  // offloaded states per node
  bool fits_in_host_memory = true;
  std::string error;
};

// The CSV/JSON columns after the varied keys.
const std::vector<std::string>& sweep_metric_columns();

// "KEY=V1,V2,..." flags; InputError naming --vary for a malformed flag, an unknown key, a key
// given twice, an empty value or more than 10 million points.
std::vector<VariedKey> parse_vary(const std::vector<std::string>& flags);

// The base document: the scenario file (or the built-in default when empty) with the --set
// assignments applied (InputError naming --set for a bad one).
nlohmann::json sweep_base_document(const std::string& scenario_file,
                                   const std::vector<std::string>& sets);

std::size_t point_count(const std::vector<VariedKey>& vary);
std::vector<std::string> point_values(const std::vector<VariedKey>& vary, std::size_t index);

// The document of one point: the base with the point's values applied. Setting cluster.nodes
// drops cluster.num_gpus (and the reverse), and when the point sets some of the three batch keys
// and the document then has all three, one the point did not set is dropped (accumulation steps
// first, then global batch) so that DeepSpeed's rule derives it anew, as the CLI flags do.
nlohmann::json point_document(const nlohmann::json& base, const std::vector<VariedKey>& vary,
                              std::size_t index);

// Resolves and simulates one point; InputError becomes the row's error, anything else throws.
SweepRow evaluate_point(const nlohmann::json& base, const std::vector<VariedKey>& vary,
                        std::size_t index);

// Evaluates the points `indices` on `jobs` threads; rows in the order of `indices`, the same
// whatever `progress` says (it only writes to stderr).
std::vector<SweepRow> run_points(const nlohmann::json& base, const std::vector<VariedKey>& vary,
                                 const std::vector<std::size_t>& indices, int jobs,
                                 ProgressMode progress);

// Rows as a JSON array and back (exact: doubles round-trip), for gathering across ranks.
nlohmann::json rows_to_json(const std::vector<SweepRow>& rows);
std::vector<SweepRow> rows_from_json(const nlohmann::json& j);

// What the inputs say that zerosim takes otherwise than written, as the first point that
// resolves reads them (of the first 16; none if none does): a Hugging Face config's defaulted
// fields, a ds_config's unsimulated keys and the like hold at every point.
std::vector<InputWarning> sweep_warnings(const nlohmann::json& base,
                                         const std::vector<VariedKey>& vary);

// The output file: CSV (RFC 4180 quoting, header row) or JSON ({"format": "zerosim-sweep/1",
// "vary": [...], "rows": [...], "warnings": [{"key", "message"}]}); numbers in the shortest form
// that round-trips.
std::string sweep_csv(const std::vector<VariedKey>& vary, const std::vector<SweepRow>& rows);
nlohmann::json sweep_json(const std::vector<VariedKey>& vary, const std::vector<SweepRow>& rows,
                          const std::vector<InputWarning>& warnings = {});

}  // namespace zerosim::explore
