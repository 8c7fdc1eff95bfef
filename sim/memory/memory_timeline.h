#pragma once
// Per-rank memory from the allocations and frees the engine played: the timeline, its peak, and
// each category's own maximum. Peaks come from the schedule, not from a sum of formulas.
#include <array>
#include <vector>

#include "sim/core/engine.h"

namespace zerosim {

struct MemoryUsage {
  std::array<Bytes, kNumMemCategories> category_max{};  // each category's maximum over the step
  std::array<Bytes, kNumMemCategories> at_peak{};       // the categories at the moment of peak
  Bytes peak = 0;
  SimTime peak_time = 0;
  Bytes end = 0;  // still allocated when the step ends (model states, context, persistent buffers)
  std::vector<std::pair<SimTime, Bytes>> timeline;  // (time, total) after each change
};

// Plays the Alloc/Free ops of `rank` in completion order. Throws std::logic_error if memory of a
// category would go negative (a plan-builder bug).
MemoryUsage replay_memory(const Plan& plan, const EngineResult& result, int rank,
                          bool keep_timeline);

}  // namespace zerosim
