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
  Bytes peak = 0;  // allocated bytes (torch.cuda.max_memory_allocated)
  SimTime peak_time = 0;
  // The caching allocator's reserved bytes at their peak (torch.cuda's max_memory_reserved):
  // the rank's allocations played through PyTorch's allocator rules (caching_allocator.h),
  // blocks cached per stream, segments split and merged, fragmentation included.
  Bytes reserved_peak = 0;
  // What the rank holds outside the caching allocator: the CUDA context and NCCL's buffers
  // (filled in by sim/run, which knows the communicators).
  Bytes outside_allocator = 0;
  // The whole device memory of the rank's process, as nvidia-smi shows it.
  Bytes nvidia_smi_peak() const { return reserved_peak + outside_allocator; }
  Bytes end = 0;  // still allocated when the step ends (model states, context, persistent buffers)
  std::vector<std::pair<SimTime, Bytes>> timeline;  // (time, total) after each change
};

// Plays the Alloc/Free ops of each of `ranks` in completion order, in one pass over the
// events. `capacity[i]`: the device memory rank ranks[i]'s allocator may reserve before it
// releases its cache (the GPU less the CUDA context and NCCL); absent or 0 = unlimited.
// Throws std::logic_error if memory of a category would go negative (a plan-builder bug).
std::vector<MemoryUsage> replay_memory(const Plan& plan, const EngineResult& result,
                                       const std::vector<int>& ranks, bool keep_timeline,
                                       const std::vector<Bytes>& capacity = {});

inline MemoryUsage replay_memory(const Plan& plan, const EngineResult& result, int rank,
                                 bool keep_timeline) {
  return replay_memory(plan, result, std::vector<int>{rank}, keep_timeline)[0];
}

}  // namespace zerosim
