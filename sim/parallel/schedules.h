#pragma once
// Pipeline schedules: the order in which one pipeline stage runs the forward and backward passes
// of (micro-batch, chunk). One function per schedule; pipeline_schedule() picks the scenario's.
// A new schedule is a function here, its name in sim/scenario (PipelineSchedule) and a case in
// pipeline_schedule(); tests/parallel/pipeline_test.cpp checks each against its bubble.
#include <vector>

#include "sim/scenario/scenario.h"

namespace zerosim::plan_detail {

struct PassStep {
  bool forward;
  int mb, chunk;
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

std::vector<PassStep> pipeline_schedule(const Scenario& s, int stage);

}  // namespace zerosim::plan_detail
