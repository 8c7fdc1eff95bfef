#pragma once
// Alpha-beta collectives (`sim.network=alpha-beta`) without contention: NCCL's ring algorithm over
// the group, with the bus bandwidth of the slowest link class the ring crosses. Fast, and the
// reference the flow-level network must agree with when nothing contends.
//
//   time = f(kind, n) * S / B_bus + steps(kind, n) * alpha
//   f = 2(n-1)/n all-reduce; (n-1)/n reduce-scatter, all-gather, all-to-all; 1 broadcast,
//       reduce, send/recv.  steps = 2(n-1) all-reduce, n-1 others, 1 send/recv.
//
// B_bus inside one node is the NVLink bandwidth per GPU times NCCL's achieved fraction. A group
// spanning nodes runs rings through the rail-aligned NICs: each node has as many inter-node ring
// edges as it has group members (one channel per member's NIC rail), so
// B_bus = min(NVLink, members-per-node x NIC bandwidth per GPU) x efficiency.
#include <cstdint>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/collective/fixed_duration_comm.h"

namespace zerosim {

// NCCL-achieved fractions of link bandwidth and per-step latencies; sources in alpha_beta.cpp.
struct LinkConstants {
  double nvlink_efficiency = 0;
  double network_efficiency = 0;
  double step_latency_intra_s = 0;
  double step_latency_inter_s = 0;
};
LinkConstants default_link_constants(const ClusterSpec& c);

struct CollectiveCost {
  double seconds = 0;
  double bus_bandwidth = 0;  // bytes/s
};

// Cost of a collective over n ranks of which at most members_per_node share a node.
CollectiveCost alpha_beta_collective(const ClusterSpec& c, const LinkConstants& k,
                                     CollectiveKind kind, Bytes bytes, int n,
                                     int members_per_node, bool inter_node);

// Members per node and whether the ranks (cluster rank ids, node = rank / gpus_per_node) span
// more than one node.
void group_placement(const ClusterSpec& c, const std::int32_t* ranks, int n,
                     int& members_per_node, bool& inter_node);

class AlphaBetaComm : public FixedDurationComm {
 public:
  explicit AlphaBetaComm(const ClusterSpec& cluster)
      : cluster_(cluster), k_(default_link_constants(cluster)) {}

 protected:
  SimTime collective_duration(const Plan& plan, std::uint32_t c) override;

 private:
  // Per group: members per node and whether it spans nodes, computed once.
  struct GroupShape {
    int n = 0, members_per_node = 0;
    bool inter = false;
  };
  const GroupShape& shape(const Plan& plan, int g);

  const ClusterSpec& cluster_;
  LinkConstants k_;
  std::vector<GroupShape> shapes_;
};

}  // namespace zerosim
