#pragma once
// `zerosim search`: the fastest parallel layout of a model on a cluster at a fixed global batch.
//
// What it varies (and so refuses from --set; constraints have their own flags):
//   tp      divisors of the attention heads that divide a node's GPUs (--tp fixes it, --max-tp
//           bounds it; a fixed --tp may span nodes if it divides the heads and the GPUs)
//   pp      divisors of the layers up to --max-pp (default 16); --pp fixes it
//   dp      GPUs / (tp x pp), which must divide the global batch
//   virtual stages {1, 2} (2 when pp > 1 and pp x 2 divides the layers)
//   zero.stage     the --zero-stages asked for (default 0, 1, 2, 3)
//   micro-batch    {1, 2, 4, 8} dividing the batch per DP rank (accumulation steps follow)
//   recompute      {none, selective, full}
// and it owns model, cluster.preset, cluster.nodes, cluster.num_gpus (--model, --cluster,
// --nodes), training.global_batch_size (--gbs) and sim.allow_oom. Every other --set key (the
// framework, sequence parallelism, overlap, precision, sim.network, cluster overrides,
// what-ifs, model fields; model.seq_length also through --seq-length) is kept fixed for every
// candidate.
//
// A layout fits when its peak GPU memory is at most (1 - headroom) x the GPU's memory and its
// offloaded states fit the host's memory and NVMe.
//
// How the ranking is found without simulating every layout in full (SearchOptions::exhaustive
// does that, as the reference):
//  1. Screen, every candidate: resolve it (a rejection counts as invalid) and play its memory
//     alone (memory_report: the allocations in plan order, no timing) with few micro-batches,
//     g2 = 2 x max(2, pp), or its own count when that is smaller; drop it when that peak does
//     not fit. The screen only drops what does not fit: fewer micro-batches never raise the
//     peak (a 1F1B or interleaved stage holds about pp micro-batches of activations at most,
//     which g2 reaches; GPipe holds all, so fewer read lower), and the untimed replay never
//     read higher than the timed step on any candidate measured (docs/PERFORMANCE.md);
//     tests/explore check on small searches that nothing the screen drops fits when simulated
//     in full. Then estimate the step time on the analytical network (NCCL's closed form, no
//     contention) at g1 = max(2, pp) and g2 micro-batches, extrapolated linearly to the real
//     count (a step is the pipeline's fill and drain plus a time per micro-batch).
//  2. Simulate in full, on the scenario's network (default flow), the survivors in order of
//     their estimate, kFinalBatch at a time, until `top` (at least 2) layouts fit and the next
//     estimate exceeds the top-th step time found by more than the margin: the larger of
//     kMargin and twice the largest overestimate seen so far (estimate / simulated - 1). A
//     layout skipped then would have to simulate faster than its estimate by more than the
//     margin to enter the top, so the top equals the exhaustive search's (tests/explore check
//     it on small searches, docs/PERFORMANCE.md on the README's). The estimate mostly
//     underestimates (no contention), which costs more full simulations, not a wrong answer.
// Results depend on the candidates and numbers only: the same with any --jobs or progress.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/explore/bottleneck.h"
#include "sim/explore/pool.h"
#include "sim/run/simulate.h"

namespace zerosim::explore {

// Full simulations per round; fixed, so that which layouts are simulated (and the counts) do
// not depend on the thread count.
inline constexpr std::size_t kFinalBatch = 16;
inline constexpr double kMargin = 0.10;

struct SearchOptions {
  std::string model, cluster;
  int nodes = 1;
  std::int64_t global_batch_size = 1024;
  std::vector<int> zero_stages = {0, 1, 2, 3};
  std::vector<std::string> sets;  // KEY=VALUE applied to every candidate first
  // Constraints; 0 = not given.
  int tp = 0, pp = 0;          // fixed degrees
  int max_tp = 0, max_pp = 0;  // upper bounds (defaults: the GPUs per node, 16)
  std::int64_t seq_length = 0;
  double memory_headroom = 0;  // fraction of GPU memory a layout must leave free, [0, 1)
  int top = 10;                // results that must come out exact (and are printed)
  bool exhaustive = false;     // simulate every candidate in full (no screen, no estimate)
  int jobs = 1;
  ProgressMode progress = ProgressMode::Off;
};

struct Candidate {
  // ep: the expert-parallel degree of an MoE model's layouts (1 for a dense model, or the one a
  // --set of parallel.ep holds fixed).
  int tp = 1, pp = 1, dp = 1, virtual_stages = 1, zero = 0, mbs = 1, ep = 1;
  std::int64_t gas = 1;
  std::string recompute = "none";
};

// What became of each candidate.
enum class Verdict {
  Invalid,     // the scenario checks reject it
  DoesNotFit,  // by the memory screen or by its full simulation
  Pruned,      // fits the screen; its estimate cannot reach the top
  Simulated,   // simulated in full and fits: ranked
};

struct SearchResult {
  Candidate config;
  StepReport report;
  Bottleneck bottleneck;
  std::vector<InputWarning> warnings;  // what its scenario took otherwise than written
};

struct SearchOutcome {
  int gpus = 0;
  int cp = 1;  // the context-parallel degree a --set of parallel.cp holds fixed
  // An MoE model whose expert-parallel degree the search varies (no --set of parallel.ep): each
  // layout's ep divides the experts and dp x cp.
  bool varies_ep = false;
  std::int64_t memory_limit = 0;  // bytes a layout's peak may reach: (1 - headroom) x HBM
  std::size_t candidates = 0, invalid = 0, does_not_fit = 0, pruned = 0, simulated = 0;
  // Layouts that fit the GPU but not the headroom (by the screen, or the full simulation).
  std::size_t fit_without_headroom = 0;
  double margin = 0;  // the estimate's margin in the last round (0 when exhaustive)
  std::vector<Candidate> all;     // every candidate, in enumeration order
  std::vector<Verdict> verdicts;  // of each in `all`
  std::vector<SearchResult> ranked;  // every layout simulated in full that fits, fastest first
};

// One component of the step-time difference between two results.
struct GapComponent {
  // One part of the breakdown: forward, backward, exposed dp / tp / pp / ep / cp, bubble,
  // optimizer, offload, comm overhead, other. Together they are the whole step.
  std::string name;
  double best_s = 0, other_s = 0;
  double diff_s() const { return other_s - best_s; }
};

// "10%" or "0.1" -> 0.1; InputError naming --memory-headroom outside [0, 100%).
double parse_headroom(const std::string& text);

// The enumerated candidates (structurally possible splits within the constraints; the scenario
// checks come later), in the order ties are broken by. InputError naming the constraint when
// the constraints leave none. With context parallelism cp (held fixed), dp = GPUs / (tp x pp x cp).
// With `experts` > 0 (an MoE model whose ep is not fixed), each split is tried at every
// expert-parallel degree that divides both the experts and dp x cp.
std::vector<Candidate> enumerate_candidates(const SearchOptions& o, int heads, std::int64_t layers,
                                            int gpus_per_node, int gpus, int cp = 1,
                                            std::int64_t experts = 0);

SearchOutcome run_search(const SearchOptions& o);

// The components by |difference|, largest first.
std::vector<GapComponent> explain_gap(const StepReport& best, const StepReport& other);

std::string search_text(const SearchOptions& o, const SearchOutcome& out);
nlohmann::json search_json(const SearchOptions& o, const SearchOutcome& out);

}  // namespace zerosim::explore
