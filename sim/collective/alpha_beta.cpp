#include "sim/collective/alpha_beta.h"

#include <algorithm>
#include <map>

#include "sim/cluster/gpu_generation.h"

namespace zerosim {

LinkConstants default_link_constants(const ClusterSpec& c) {
  LinkConstants k;
  // NVLink: measured ring busbw / NVLink bandwidth, per GPU generation (sources there).
  k.nvlink_efficiency = generation_constants(c.gpu.generation).nvlink_ring_efficiency;
  // Network: DGX A100 with 8x HDR reaches ~192 GB/s all-reduce busbw of 200 GB/s per node (NCCL
  // maintainers, nccl-tests issues) = 0.96; NDR400 gives 46-48 of 50 GB/s per NIC = 0.94.
  k.network_efficiency = 0.94;
  // Per ring step: 8x A100 all-reduce of 32 KiB takes 43.8 us over 2(n-1) = 14 steps, ~3 us per
  // step (collectives.json, same curve); across nodes add the fabric's latency.
  k.step_latency_intra_s = 3.0e-6;
  k.step_latency_inter_s = 3.0e-6 + c.nic_latency;
  return k;
}

void group_placement(const ClusterSpec& c, const std::int32_t* ranks, int n,
                     int& members_per_node, bool& inter_node) {
  std::map<int, int> per_node;
  for (int i = 0; i < n; ++i) ++per_node[ranks[i] / c.gpus_per_node];
  members_per_node = 0;
  for (const auto& [node, count] : per_node) members_per_node = std::max(members_per_node, count);
  inter_node = per_node.size() > 1;
}

CollectiveCost alpha_beta_collective(const ClusterSpec& c, const LinkConstants& k,
                                     CollectiveKind kind, Bytes bytes, int n,
                                     int members_per_node, bool inter) {
  CollectiveCost out;
  if (n <= 1 || bytes <= 0) return out;
  const double nvlink = c.nvlink_bandwidth * k.nvlink_efficiency;
  double bus = nvlink;
  if (inter) {
    double net = members_per_node * c.internode_bandwidth_per_gpu() * k.network_efficiency;
    if (kind == CollectiveKind::SendRecv) net = c.internode_bandwidth_per_gpu() * k.network_efficiency;
    bus = members_per_node > 1 ? std::min(nvlink, net) : net;
  }
  const double alpha = inter ? k.step_latency_inter_s : k.step_latency_intra_s;
  const double share = static_cast<double>(n - 1) / n;
  const double b = static_cast<double>(bytes);
  double factor = 1, steps = 1;
  switch (kind) {
    case CollectiveKind::AllReduce: factor = 2 * share; steps = 2.0 * (n - 1); break;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll: factor = share; steps = n - 1; break;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce: factor = 1; steps = n - 1; break;
    case CollectiveKind::SendRecv: factor = 1; steps = 1; break;
  }
  out.bus_bandwidth = bus;
  out.seconds = factor * b / bus + steps * alpha;
  return out;
}

const AlphaBetaComm::GroupShape& AlphaBetaComm::shape(const Plan& plan, int g) {
  if (shapes_.empty()) shapes_.resize(plan.num_groups());
  GroupShape& s = shapes_[g];
  if (s.n == 0) {
    s.n = plan.cost_size(g);
    group_placement(cluster_, plan.cost_members(g), s.n, s.members_per_node, s.inter);
  }
  return s;
}

SimTime AlphaBetaComm::collective_duration(const Plan& plan, std::uint32_t c) {
  const Collective& coll = plan.collectives[c];
  const GroupShape& g = shape(plan, coll.group);
  CollectiveCost cost =
      alpha_beta_collective(cluster_, k_, coll.kind, coll.bytes, g.n, g.members_per_node, g.inter);
  return seconds_to_ps(cost.seconds);
}

}  // namespace zerosim
