#pragma once
// `zerosim search`: the fastest parallel layout of a model on a cluster at a fixed global batch.
//
// Enumerates tp (divisors of the attention heads that fit in a node), pp (divisors of the layers,
// at most 16), dp = GPUs / (tp x pp), virtual stages {1, 2} (when pp > 1 and the layers split),
// the ZeRO stages asked for, micro-batches {1, 2, 4, 8} dividing the batch per DP rank, and
// recomputation {none, selective, full}. A candidate the scenario checks reject is counted as
// invalid; one whose memory_report does not fit is counted and skipped; the rest are simulated
// and ranked by tokens/s (ties: enumeration order), all on the same thread pool as the sweep.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/explore/pool.h"
#include "sim/run/simulate.h"

namespace zerosim::explore {

struct SearchOptions {
  std::string model, cluster;
  int nodes = 1;
  std::int64_t global_batch_size = 1024;
  std::vector<int> zero_stages = {0, 1, 2, 3};
  std::vector<std::string> sets;  // KEY=VALUE applied to every candidate first
  int jobs = 1;
  ProgressMode progress = ProgressMode::Off;
};

struct Candidate {
  int tp = 1, pp = 1, dp = 1, virtual_stages = 1, zero = 0, mbs = 1;
  std::int64_t gas = 1;
  std::string recompute = "none";
};

struct SearchResult {
  Candidate config;
  StepReport report;
};

struct SearchOutcome {
  int gpus = 0;
  std::size_t candidates = 0, invalid = 0, does_not_fit = 0, simulated = 0;
  std::vector<SearchResult> ranked;  // every simulated candidate that fits, fastest first
};

// One component of the step-time difference between two results.
struct GapComponent {
  std::string name;  // forward, backward, optimizer, exposed dp, exposed tp, exposed pp, bubble
  double best_s = 0, other_s = 0;
  double diff_s() const { return other_s - best_s; }
};

// The enumerated candidates (structurally possible splits; the scenario checks come later).
std::vector<Candidate> enumerate_candidates(const SearchOptions& o, int heads, std::int64_t layers,
                                            int gpus_per_node, int gpus);

SearchOutcome run_search(const SearchOptions& o);

// The components by |difference|, largest first.
std::vector<GapComponent> explain_gap(const StepReport& best, const StepReport& other);

std::string search_text(const SearchOptions& o, const SearchOutcome& out, int top);
nlohmann::json search_json(const SearchOptions& o, const SearchOutcome& out, int top);

}  // namespace zerosim::explore
