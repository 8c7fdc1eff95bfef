#pragma once
// What limits a simulated step, in words, read from its breakdown (StepReport::breakdown).
//
// The rule: the largest of the overheads the breakdown charges to the compute stream's idle
// time (exposed DP, TP and PP communication, the pipeline bubble, waits for offloaded host
// work, the framework's own work for its collectives) is the bottleneck, with a suggestion tied
// to that component; when every one of them is under kComputeBoundShare of the step the step
// is compute-bound (removing any one would save less than that). Suggestions name only changes
// that shrink that component in the model: e.g. TP all-reduces block the compute stream, so
// fewer TP ranks; sequence parallelism is not suggested for TP time because it moves the same
// bytes (a reduce-scatter and an all-gather).
#include <string>

#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {

inline constexpr double kComputeBoundShare = 0.05;

struct Bottleneck {
  // "dp_communication", "tp_communication", "pp_communication", "ep_communication",
  // "cp_communication", "pipeline_bubble", "offload", "comm_overhead" or "compute".
  std::string component;
  double seconds = 0;  // the component's time in the step (compute: forward+backward+optimizer)
  double share = 0;    // seconds / step time
  std::string summary;  // "TP communication 3.10 s exposed, 16 % of the step"
  std::string advice;   // "try TP <= 4 (...)"
  std::string text() const { return summary + ": " + advice; }
};

Bottleneck find_bottleneck(const Scenario& s, const StepReport& r);

}  // namespace zerosim::explore
