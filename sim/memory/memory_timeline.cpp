#include "sim/memory/memory_timeline.h"

#include <stdexcept>
#include <string>

namespace zerosim {

std::vector<MemoryUsage> replay_memory(const Plan& plan, const EngineResult& result,
                                       const std::vector<int>& ranks, bool keep_timeline) {
  std::vector<int> slot(static_cast<std::size_t>(plan.num_ranks), -1);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= plan.num_ranks) {
      throw std::out_of_range("replay_memory: rank " + std::to_string(ranks[i]) +
                              " is not in the plan's " + std::to_string(plan.num_ranks));
    }
    slot[ranks[i]] = static_cast<int>(i);
  }
  std::vector<MemoryUsage> usage(ranks.size());
  std::vector<std::array<Bytes, kNumMemCategories>> current(ranks.size());
  std::vector<Bytes> total(ranks.size(), 0);
  for (auto& c : current) c.fill(0);
  for (OpId id : result.order) {
    const Op& op = plan.ops[id];
    if (op.kind != OpKind::Alloc && op.kind != OpKind::Free) continue;
    const int k = slot[op.rank];
    if (k < 0) continue;
    MemoryUsage& u = usage[k];
    const int c = static_cast<int>(op.category);
    const Bytes delta = op.kind == OpKind::Alloc ? op.bytes : -op.bytes;
    current[k][c] += delta;
    total[k] += delta;
    if (current[k][c] < 0) {
      throw std::logic_error("memory of category " + std::string(mem_category_name(op.category)) +
                             " went negative on rank " + std::to_string(op.rank) + " at '" +
                             plan.names[op.name] + "'");
    }
    if (current[k][c] > u.category_max[c]) u.category_max[c] = current[k][c];
    if (total[k] > u.peak) {
      u.peak = total[k];
      u.peak_time = result.end[id];
      u.at_peak = current[k];
    }
    if (keep_timeline) u.timeline.emplace_back(result.end[id], total[k]);
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) usage[k].end = total[k];
  return usage;
}

}  // namespace zerosim
