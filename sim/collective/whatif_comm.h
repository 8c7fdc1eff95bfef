#pragma once
// What-if comm backends: the closed-form NCCL timing of a cluster that is not quite the preset.
// They sit beside the other backends so that `simulate` only picks one.
#include <cstdint>
#include <set>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/collective/fixed_duration_comm.h"
#include "sim/collective/nccl_backend.h"

namespace zerosim {

// Degraded NICs in the closed form (`whatif.degraded_nodes`): a collective that leaves a degraded
// node runs at the pace of that node's NICs (a ring or tree is as fast as its slowest link), so
// it is priced by a model of the cluster whose NICs all run at the degraded rate; others by the
// healthy model. Both models must outlive the backend.
class DegradedNodesComm : public FixedDurationComm {
 public:
  DegradedNodesComm(const nccl::NcclModel& healthy, const nccl::NcclModel& degraded,
                    const ClusterSpec& cluster, const std::vector<int>& nodes);

 protected:
  SimTime collective_duration(const Plan& plan, std::uint32_t c) override;

 private:
  nccl::NcclAnalyticalComm healthy_, degraded_;
  const ClusterSpec& cluster_;
  std::set<int> degraded_node_;
};

}  // namespace zerosim
