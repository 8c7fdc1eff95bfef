#include "sim/collective/nccl_backend.h"

#include "sim/collective/nccl_plan.h"

namespace zerosim::nccl {

SimTime NcclAnalyticalComm::duration(CollectiveKind kind, Bytes bytes,
                                     std::span<const std::int32_t> ranks) {
  auto key = std::make_tuple(static_cast<int>(kind), bytes,
                             std::vector<std::int32_t>(ranks.begin(), ranks.end()));
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const Prediction p = topo_ ? predict_on_topology(model_, *topo_, kind, bytes, ranks)
                             : model_.predict(kind, bytes, ranks);
  const SimTime t = seconds_to_ps(p.seconds);
  cache_.emplace(std::move(key), t);
  return t;
}

void NcclAnalyticalComm::start(const Plan& plan, std::uint32_t c, SimTime now) {
  const Collective& coll = plan.collectives[c];
  // cost_members: the cluster ranks the collective really spans (differs from the plan's ranks
  // when the plan is folded by symmetry).
  std::span<const std::int32_t> ranks(plan.cost_members(coll.group),
                                      static_cast<std::size_t>(plan.cost_size(coll.group)));
  heap_.push({now + duration(coll.kind, coll.bytes, ranks), c});
}

SimTime NcclAnalyticalComm::next_completion() const {
  return heap_.empty() ? kNever : heap_.top().end;
}

void NcclAnalyticalComm::pop_completed(SimTime now, std::vector<std::uint32_t>& done) {
  while (!heap_.empty() && heap_.top().end == now) {
    done.push_back(heap_.top().c);
    heap_.pop();
  }
}

}  // namespace zerosim::nccl
