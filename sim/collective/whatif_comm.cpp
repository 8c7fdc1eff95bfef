#include "sim/collective/whatif_comm.h"

namespace zerosim {

DegradedNodesComm::DegradedNodesComm(const nccl::NcclModel& healthy,
                                     const nccl::NcclModel& degraded, const ClusterSpec& cluster,
                                     const std::vector<int>& nodes)
    : healthy_(healthy), degraded_(degraded), cluster_(cluster) {
  for (int n : nodes) degraded_node_.insert(n);
}

SimTime DegradedNodesComm::collective_duration(const Plan& plan, std::uint32_t c) {
  const Collective& coll = plan.collectives[c];
  const int n = plan.cost_size(coll.group);
  std::vector<std::int32_t> ranks(plan.cost_members(coll.group), plan.cost_members(coll.group) + n);
  bool touches = false, inter = false;
  for (std::int32_t r : ranks) {
    const int node = r / cluster_.gpus_per_node;
    touches = touches || degraded_node_.count(node) > 0;
    inter = inter || node != ranks[0] / cluster_.gpus_per_node;
  }
  nccl::NcclAnalyticalComm& comm = touches && inter ? degraded_ : healthy_;
  return comm.duration(coll.kind, coll.bytes, ranks);
}

}  // namespace zerosim
