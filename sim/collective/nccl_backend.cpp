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

SimTime NcclAnalyticalComm::collective_duration(const Plan& plan, std::uint32_t c) {
  const Collective& coll = plan.collectives[c];
  // cost_members: the cluster ranks the collective really spans (differs from the plan's ranks
  // when the plan is folded by symmetry).
  std::span<const std::int32_t> ranks(plan.cost_members(coll.group),
                                      static_cast<std::size_t>(plan.cost_size(coll.group)));
  return duration(coll.kind, coll.bytes, ranks);
}

}  // namespace zerosim::nccl
