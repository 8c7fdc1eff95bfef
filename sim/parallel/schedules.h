#pragma once
// Pipeline schedules: the order in which one pipeline stage runs the forward and backward passes
// of (micro-batch, chunk). One function per schedule; pipeline_schedule() picks the scenario's.
// A new schedule is a function here, its name in sim/scenario (PipelineSchedule) and a case in
// pipeline_schedule(); tests/parallel/pipeline_test.cpp checks each against its bubble.
#include <cstdint>
#include <vector>

#include "sim/parallel/training_plan.h"
#include "sim/scenario/scenario.h"

namespace zerosim::plan_detail {

// A forward, a backward, or one part of a split backward (its B or its W pass).
struct PassStep {
  bool forward;
  int mb, chunk;
  BackwardPart part = BackwardPart::Whole;
  // A forward that runs combined with the backward after it (Megatron-core's combined 1F1B).
  bool combined_with_next = false;
  // Where the pass's receive is posted: after the pass before it (kAfterPreviousPass, the
  // frameworks' blocking p2p), before the stage's first pass (kAtStart), or after pass i of the
  // stage's order (ZB-V: the fork posts each receive when its schedule expects the data).
  static constexpr int kAfterPreviousPass = -2, kAtStart = -1;
  int receive_after = kAfterPreviousPass;
};

// No pipeline (pp = 1): each micro-batch's forward over the chunks, then its backward.
std::vector<PassStep> no_pipeline_schedule(int micro_batches, int chunks);

// GPipe (Huang et al. 2019): every forward, then every backward.
std::vector<PassStep> gpipe_schedule(int micro_batches, int pp, int chunks);

// 1F1B (Narayanan et al. SC21 §2.2.1): pp - stage - 1 warm-up forwards, then one forward one
// backward, then the cool-down backwards.
std::vector<PassStep> one_f_one_b_schedule(int micro_batches, int pp, int stage);

// Interleaved 1F1B (SC21 §2.2.2, Megatron's forward_backward_pipelining_with_interleaving
// order): chunks of pp micro-batches visit the virtual stages in turn.
std::vector<PassStep> interleaved_schedule(int micro_batches, int pp, int chunks, int stage);

// ZB-H1 (Qi et al., ICLR 2024, section 2.1): each backward split into B (input gradient) and W
// (weight gradient). Stage s runs 1F1B's warm-up forwards and its F/B alternation, and the W of
// micro-batch j after the B of micro-batch j + s: every stage then holds up to pp micro-batches
// whose W has not run (1F1B's first stage holds as many), and the deferred Ws fill the cool-down,
// leaving (pp - 1)(T_F + T_B - T_W) of bubble instead of 1F1B's (pp - 1)(T_F + T_B + T_W).
std::vector<PassStep> zero_bubble_h1_schedule(int micro_batches, int pp, int stage);

// ZB-V (Qi et al., arXiv:2401.10241 v2 and later; the zero-bubble authors' Megatron-LM fork,
// --zero-bubble-v-schedule): stage s holds chunk 0 (virtual stage s) and chunk 1 (virtual stage
// 2 pp - 1 - s), V-shaped as DualPipeV, every backward split into B and W. The fork orders the
// passes of all stages with a greedy list scheduler (scheduler/zbv.py PipelineGraph) from the
// passes' times, the point-to-point time and each pass's activation memory, under a limit of
// 2 pp chunk forwards' activations (1F1B's peak): it places the warm-up forwards, then each
// round one B per stage (fed by its neighbour where it can) and one F, putting pending Ws first
// where the stage would otherwise wait for its input; it tries filling the waits before Fs and
// Bs or not, and keeps the order whose worst stage waits least. With equal pass times and no
// communication each stage then idles only the pipeline's fill, pp - 1 chunk forwards (the
// fork's README: no bubble at 1F1B's activation memory). The times and memory a stage's passes
// are ordered by: ZeroBubbleVCosts. The fork posts each receive at the time its schedule expects
// the data (the sender's end; communication.py add_communication_nodes), moved before the pass
// that is running then (reorder_communication): each pass's receive_after says after which pass.
struct ZeroBubbleVCosts {
  std::int64_t forward = 1, input_backward = 1, weight_backward = 1, p2p = 0;
  std::int64_t forward_memory = 1, input_backward_memory = 0, weight_backward_memory = -1;
  bool operator==(const ZeroBubbleVCosts&) const = default;
};
std::vector<PassStep> zero_bubble_v_schedule(int micro_batches, int pp, int stage,
                                             const ZeroBubbleVCosts& costs);
// What zerosim orders ZB-V by: the fork profiles each pass in its first iterations and
// schedules with the measured times (zerobubble/runtime.py); zerosim takes the paper's FLOP
// counts of a transformer layer instead (section 3, Table 1: F 24bsh^2 + 4bs^2h, B 24bsh^2 +
// 8bs^2h, W 24bsh^2), the fork's own activation estimates (runtime.py: F 34h + 5as per token,
// W -32h, B the rest) and no point-to-point time (ASSUMPTION: only the order is taken from
// them; the engine times every pass and transfer).
ZeroBubbleVCosts zero_bubble_v_costs(const Scenario& s);

// Megatron-core's combined 1F1B (--overlap-moe-expert-parallel-comm, schedules.py and
// combined_1f1b.py): the interleaved schedule with one more warm-up forward, so that each
// steady-state forward and the backward after it are independent and run as one step; without
// pipelining the first forward alone, then (forward j + 1, backward j) pairs, then the last
// backward.
std::vector<PassStep> combined_1f1b_schedule(int micro_batches, int pp, int chunks, int stage);

// DualPipeV (DeepSeek's DualPipe library, dualpipev.py, after Sea AI Lab's "cut-in-half"
// DualPipe): stage s holds chunk 0 (virtual stage s) and chunk 1 (virtual stage 2 pp - 1 - s)
// and every micro-batch enters at stage 0, goes down chunk 0 and back up chunk 1. Its eight
// phases: forwards of chunk 0, then of both chunks; (B, W, F) triples of chunk 1; the steady
// state, each chunk's forward run overlapped with the other chunk's backward; backwards of both
// chunks, the later ones split into B and W (zero-bubble), and the deferred Ws in the order
// their Bs ran. Needs micro_batches >= 2 pp.
std::vector<PassStep> dualpipev_schedule(int micro_batches, int pp, int stage);

// DualPipe (DeepSeek-V3 technical report section 3.2.1; dualpipe.py): stage s holds stage s of
// one copy of the model (chunk 0, fed micro-batches at stage 0) and stage pp - 1 - s of another
// (chunk 1, fed at stage pp - 1), half the micro-batches each. Its phases are DualPipeV's with
// pp / 2 stages, micro_batches / 2 micro-batches and stage min(s, pp - 1 - s), the two chunks
// swapped on the second half of the stages (DualPipeV is DualPipe cut in half). Needs pp even,
// micro_batches even and >= 2 pp.
std::vector<PassStep> dualpipe_schedule(int micro_batches, int pp, int stage);

std::vector<PassStep> pipeline_schedule(const Scenario& s, int stage);

}  // namespace zerosim::plan_detail
