#include "sim/memory/memory_timeline.h"

#include <stdexcept>
#include <string>

namespace zerosim {

MemoryUsage replay_memory(const Plan& plan, const EngineResult& result, int rank,
                          bool keep_timeline) {
  MemoryUsage u;
  std::array<Bytes, kNumMemCategories> current{};
  Bytes total = 0;
  for (OpId id : result.order) {
    const Op& op = plan.ops[id];
    if (op.rank != rank || (op.kind != OpKind::Alloc && op.kind != OpKind::Free)) continue;
    const int c = static_cast<int>(op.category);
    const Bytes delta = op.kind == OpKind::Alloc ? op.bytes : -op.bytes;
    current[c] += delta;
    total += delta;
    if (current[c] < 0) {
      throw std::logic_error("memory of category " + std::string(mem_category_name(op.category)) +
                             " went negative on rank " + std::to_string(rank) + " at '" +
                             plan.names[op.name] + "'");
    }
    if (current[c] > u.category_max[c]) u.category_max[c] = current[c];
    if (total > u.peak) {
      u.peak = total;
      u.peak_time = result.end[id];
      u.at_peak = current;
    }
    if (keep_timeline) u.timeline.emplace_back(result.end[id], total);
  }
  u.end = total;
  return u;
}

}  // namespace zerosim
