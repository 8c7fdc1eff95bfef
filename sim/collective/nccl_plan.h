#pragma once
// A collective as flows: what a flow-level network backend injects for one NCCL call.
//
// build_plan() takes NCCL's choice (nccl_tuning.h) and lays it out the way NCCL runs it:
//   Ring      per channel, one ring over the group: nodes (NVLink domains) in communicator order,
//             and inside a node the members in order starting at the GPU that owns the channel's
//             NIC, so consecutive nodes are joined NIC k to NIC k of the same rail (channel c uses
//             the node's c-th local NIC, round robin). One flow per ring edge per channel: N
//             concurrent flows per channel. Bytes per edge (S/C per channel split into N chunks,
//             chunk i = the one rank i does not send in a pass):
//               all-reduce        2 (S_c - chunk_i)       sum over edges = 2 (N-1) S_c
//               all-gather, r-s   S_c - chunk_i           sum            = (N-1) S_c
//               broadcast, reduce S_c on the N-1 edges of the chain from the root (no wrap edge;
//                                 the ring order rotated to start at the root)
//             so over all channels: all-reduce moves exactly 2(N-1)S bytes, AG/RS (N-1)S.
//   Tree      all-reduce: NCCL's double binary tree over nodes (channels 0..C/2-1 use tree 0,
//             the rest the mirrored/shifted tree 1) and a chain inside each node; every tree and
//             chain edge carries S_c up (reduce) and S_c down (broadcast), concurrently.
//   NVLS      single node: every GPU sends S_c + S_c/N to the NVSwitch and receives the same
//             (multimem reduce of its slice, multicast of it), per channel.
//   NVLSTree  NVLS inside each node plus the inter-node tree between the channel's head GPUs.
//   PAT       laid out as the ring (same bytes per rank; PAT's logarithmic schedule is not
//             modelled as flows).
//   SendRecv  ranks[0] -> ranks[1], one flow per NIC of the sender across nodes, else one.
//   AllToAll  one flow per ordered pair, S/N bytes.
// All flows start together; each first waits the plan's latency (alpha: launch + NCCL latency +
// pipeline term), then shares bandwidth (sim/net's latency phase, as in SimGrid's network model).
//
// route_plan() puts the flows on a Topology and computes
//   T_nccl   = prediction.bandwidth_s (NCCL's bytes / algorithm bandwidth),
//   T_end    = max over endpoint links (NVLink, PCIe, NIC<->leaf) of load / raw capacity,
//   T_all    = max over every link, fabric included,
//   fabric   = max(1, T_all / T_end)       (how much the fabric is the bottleneck),
//   bandwidth time = max(T_nccl, T_end) x fabric
//              (NCCL's tuner may believe more than the wires carry, e.g. 2.18's NVLS-tree
//              bandwidth beyond two nodes: the raw endpoint load is a floor),
//   wire_scale = max(1, T_nccl / T_end),
// and returns each flow's links and its bytes x wire_scale, so that on an otherwise idle flow
// network (raw capacities, max-min sharing) the collective's flows end after that bandwidth
// time: NCCL's protocol efficiency is folded into the bytes.
#include <cstdint>
#include <span>
#include <vector>

#include "sim/cluster/topology.h"
#include "sim/collective/nccl_model.h"

namespace zerosim::nccl {

enum class FlowEnd : std::uint8_t { Gpu, NvSwitch };

struct PlanFlow {
  std::int32_t src = 0;  // global rank (for an NvSwitch end: a GPU of that NVLink domain)
  std::int32_t dst = 0;
  FlowEnd src_end = FlowEnd::Gpu;
  FlowEnd dst_end = FlowEnd::Gpu;
  Bytes bytes = 0;       // payload
  std::int16_t channel = 0;
  std::int16_t rail = -1;  // NIC used across nodes (-1: inside an NVLink domain / default)
  std::uint64_t hash = 0;  // ECMP flow label
};

struct CollectivePlan {
  Prediction prediction;        // closed form (fabric factor 1)
  std::vector<PlanFlow> flows;  // all concurrent
  double latency_s = 0;         // alpha every flow waits first
  bool approximate = false;     // PAT laid out as a ring
  Bytes total_bytes() const;
};

struct RoutedFlow {
  std::vector<LinkId> links;
  Bytes bytes = 0;  // wire bytes (payload x wire_scale)
};

struct RoutedPlan {
  std::vector<RoutedFlow> flows;
  double latency_s = 0;
  double fabric_factor = 1;
  double wire_scale = 1;
  double endpoint_time_s = 0;  // T_end, raw capacities, payload bytes
  double max_link_time_s = 0;  // T_all
  double bandwidth_s = 0;      // max(prediction.bandwidth_s, endpoint_time_s) x fabric_factor
  LinkId bottleneck = 0;       // the link that sets T_all
};

// The flows of one call; `ranks` in communicator order. n <= 1 or zero bytes: no flows.
// `root`: the communicator rank (index into `ranks`) a broadcast or reduce starts or ends at.
CollectivePlan build_plan(const NcclModel& model, CollectiveKind kind, Bytes bytes,
                          std::span<const std::int32_t> ranks, int root = 0);

// Routes the flows on `topo` (built from the model's cluster) and derives the fabric factor.
RoutedPlan route_plan(const CollectivePlan& plan, const Topology& topo);

// predict() with the fabric factor of the routed flows applied to the bandwidth term. The root
// of a broadcast or reduce can matter here (which links its chain crosses), never in predict().
Prediction predict_on_topology(const NcclModel& model, const Topology& topo, CollectiveKind kind,
                               Bytes bytes, std::span<const std::int32_t> ranks, int root = 0);

// NCCL's binary tree over `n` ranks (src/graph/trees.cc ncclGetBtree): parent of `rank` (-1 for
// the root). And the double binary tree's second tree: mirrored (n even) or shifted (n odd).
int btree_parent(int n, int rank);
int dtree_parent(int n, int rank, int tree);

}  // namespace zerosim::nccl
