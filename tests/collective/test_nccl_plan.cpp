// Collectives as flows: bytes conservation, NCCL's tree shapes, rail alignment, routing on the
// topology, agreement with sim/net's flow network, and the fabric factor of an oversubscribed
// fabric.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "sim/cluster/cluster.h"
#include "sim/cluster/topology.h"
#include "sim/collective/nccl_plan.h"
#include "sim/net/flow_network.h"

namespace zerosim::nccl {
namespace {

using nlohmann::json;

ClusterSpec preset(const std::string& name, int nodes) {
  return cluster_from_json(json{{"preset", name}, {"nodes", nodes}}, "cluster");
}

std::vector<std::int32_t> first(int n) {
  std::vector<std::int32_t> r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

ModelOptions forced(Algo a, Proto p = Proto::Simple) {
  ModelOptions o;
  o.algo = a;
  o.proto = p;
  return o;
}

// Ring all-reduce of S over N ranks and C channels: channel c carries S_c (S split over C), split
// into N chunks; the edge out of ring position i carries 2 (S_c - chunk_i). Summed: 2 (N-1) S,
// exactly, with N flows per channel. All-gather / reduce-scatter: (N-1) S. Broadcast: the N-1
// chain edges carry S each.
TEST(ncclPlan, RingBytesAreConserved) {
  NcclModel m(preset("dgx-h100", 4), forced(Algo::Ring));
  const Bytes S = 1'000'000'007;  // prime: every split has a remainder
  for (int n : {2, 8, 12, 32}) {
    SCOPED_TRACE(n);
    auto ar = build_plan(m, CollectiveKind::AllReduce, S, first(n));
    const int c = ar.prediction.channels;
    ASSERT_GT(c, 0);
    EXPECT_EQ(static_cast<int>(ar.flows.size()), c * n);
    EXPECT_EQ(ar.total_bytes(), 2 * (n - 1) * S);
    EXPECT_DOUBLE_EQ(ar.latency_s, ar.prediction.alpha_s());
    auto ag = build_plan(m, CollectiveKind::AllGather, S, first(n));
    EXPECT_EQ(ag.total_bytes(), (n - 1) * S);
    auto rs = build_plan(m, CollectiveKind::ReduceScatter, S, first(n));
    EXPECT_EQ(rs.total_bytes(), (n - 1) * S);
    auto bc = build_plan(m, CollectiveKind::Broadcast, S, first(n));
    EXPECT_EQ(bc.total_bytes(), (n - 1) * S);
    EXPECT_EQ(static_cast<int>(bc.flows.size()), bc.prediction.channels * (n - 1));
  }
}

// Per channel the ring visits every rank once: each rank is the source of exactly one flow and the
// destination of exactly one.
TEST(ncclPlan, EachChannelIsOneRing) {
  NcclModel m(preset("dgx-a100-80gb", 4), forced(Algo::Ring));
  auto plan = build_plan(m, CollectiveKind::AllReduce, Bytes{1} << 30, first(32));
  std::map<int, std::multiset<int>> srcs, dsts;
  for (const auto& f : plan.flows) {
    srcs[f.channel].insert(f.src);
    dsts[f.channel].insert(f.dst);
  }
  for (auto& [ch, s] : srcs) {
    EXPECT_EQ(s.size(), 32u);
    EXPECT_EQ(std::set<int>(s.begin(), s.end()).size(), 32u);
    EXPECT_EQ(std::set<int>(dsts[ch].begin(), dsts[ch].end()).size(), 32u);
  }
}

// Rings are laid through the rail-aligned NICs: a cross-node edge lands on the GPU that owns the
// channel's NIC, and on a rail-optimized fabric with all nodes in one SU no route climbs to a
// spine. Channels spread over all 8 rails.
TEST(ncclPlan, CrossNodeRingEdgesAreRailAligned) {
  ClusterSpec c = preset("dgx-h100", 4);
  NcclModel m(c, forced(Algo::Ring));
  Topology topo = build_topology(c);
  auto plan = build_plan(m, CollectiveKind::AllReduce, Bytes{1} << 30, first(32));
  std::set<int> rails;
  int cross = 0;
  for (const auto& f : plan.flows) {
    if (f.src / 8 == f.dst / 8) {
      EXPECT_EQ(f.rail, -1);
      continue;
    }
    ++cross;
    rails.insert(f.rail);
    EXPECT_EQ(local_nics_of(c, f.dst % 8), std::vector<int>{f.rail});
    auto r = topo.route(f.src, f.dst, f.hash, f.rail);
    for (LinkId l : r) EXPECT_NE(topo.graph()[topo.link(l).dst].kind, VertexKind::Spine);
  }
  EXPECT_EQ(cross, plan.prediction.channels * 4);
  EXPECT_EQ(rails.size(), 8u);
}

// NCCL's binary tree (src/graph/trees.cc illustration, 14 ranks): 0 -> 8 -> {4, 12},
// 4 -> {2, 6}, 2 -> {1, 3}, 12 -> {10, 13}, 10 -> {9, 11}. The second tree mirrors the first for
// an even count and shifts it by one for an odd count.
TEST(ncclPlan, DoubleBinaryTreeShapes) {
  const std::map<int, int> parent = {{0, -1}, {8, 0},   {4, 8},   {12, 8}, {2, 4},
                                     {6, 4},  {1, 2},   {3, 2},   {10, 12}, {13, 12},
                                     {9, 10}, {11, 10}, {5, 6},   {7, 6}};
  for (auto [r, p] : parent) EXPECT_EQ(btree_parent(14, r), p) << r;
  for (int r = 0; r < 14; ++r) {
    const int u = btree_parent(14, 13 - r);
    EXPECT_EQ(dtree_parent(14, r, 1), u < 0 ? -1 : 13 - u);
  }
  for (int n : {1, 2, 3, 5, 7, 8, 13, 64}) {
    for (int t : {0, 1}) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        int hops = 0;
        for (int x = r; x >= 0 && hops <= n; x = dtree_parent(n, x, t)) ++hops;
        EXPECT_LE(hops, n) << "cycle";  // every rank reaches the root
        roots += dtree_parent(n, r, t) < 0;
      }
      EXPECT_EQ(roots, 1) << n << " " << t;
    }
  }
}

// Tree all-reduce over 4 nodes of 8: per channel, 7 chain edges per node and 3 tree edges between
// nodes, each carrying S_c up and S_c down: 2 x (4 x 7 + 3) x S_c per channel.
TEST(ncclPlan, TreeFlows) {
  NcclModel m(preset("dgx-h100", 4), forced(Algo::Tree));
  const Bytes S = Bytes{1} << 30;
  auto plan = build_plan(m, CollectiveKind::AllReduce, S, first(32));
  EXPECT_EQ(plan.total_bytes(), 2 * (4 * 7 + 3) * S);
  EXPECT_EQ(static_cast<int>(plan.flows.size()), 2 * (4 * 7 + 3) * plan.prediction.channels);
}

// NVLS on one H200: every GPU sends S_c + S_c/N to the switch and receives as much.
TEST(ncclPlan, NvlsFlowsGoThroughTheSwitch) {
  NcclModel m(preset("dgx-h200", 1));
  const Bytes S = Bytes{8} << 30;
  auto plan = build_plan(m, CollectiveKind::AllReduce, S, first(8));
  ASSERT_EQ(plan.prediction.algo, Algo::Nvls);
  std::map<int, Bytes> up, down;
  for (const auto& f : plan.flows) {
    if (f.dst_end == FlowEnd::NvSwitch) up[f.src] += f.bytes;
    if (f.src_end == FlowEnd::NvSwitch) down[f.dst] += f.bytes;
  }
  for (int r = 0; r < 8; ++r) {
    EXPECT_NEAR(static_cast<double>(up[r]), S * 1.125, 16.0);
    EXPECT_NEAR(static_cast<double>(down[r]), S * 1.125, 16.0);
  }
  Topology topo = build_topology(m.cluster());
  auto routed = route_plan(plan, topo);
  EXPECT_DOUBLE_EQ(routed.fabric_factor, 1.0);
}

// The flows, played by sim/net's flow network on the raw topology, end when the closed form says:
// each flow waits the plan's alpha, then its wire bytes share the links. For a ring on one DGX
// A100 every GPU->NVSwitch link carries the same load, so every flow ends together at
// alpha + bandwidth time (to within the picosecond rounding of each flow).
TEST(ncclPlan, FlowNetworkReproducesTheClosedForm) {
  ClusterSpec c = preset("dgx-a100-80gb", 1);
  NcclModel m(c, forced(Algo::Ring));
  Topology topo = build_topology(c);
  const Bytes S = Bytes{1} << 30;
  auto plan = build_plan(m, CollectiveKind::AllReduce, S, first(8));
  auto routed = route_plan(plan, topo);
  net::FlowNetwork fn;
  for (const auto& l : topo.links()) fn.add_link(l.bandwidth);
  const SimTime alpha = seconds_to_ps(routed.latency_s);
  for (std::size_t i = 0; i < routed.flows.size(); ++i) {
    fn.start_flow(0, routed.flows[i].links, routed.flows[i].bytes, alpha, i);
  }
  SimTime last = 0;
  std::vector<net::Completion> done;
  while (fn.next_event_time() != net::kNever) {
    fn.advance_to(fn.next_event_time());
    fn.drain_completed(done);
  }
  ASSERT_EQ(done.size(), routed.flows.size());
  for (const auto& d : done) last = std::max(last, d.time);
  const Prediction p = m.predict(CollectiveKind::AllReduce, S, first(8));
  const SimTime expect = alpha + seconds_to_ps(p.bandwidth_s);
  EXPECT_NEAR(static_cast<double>(last), static_cast<double>(expect), 1e-6 * expect);
}

// A 2:1 oversubscribed fabric halves the cross-pod all-reduce bus bandwidth. Four DGX H100 in SUs
// of 2 nodes (leaf = rail of an SU, 2 downlinks); with ratio 2 each leaf keeps one uplink of one
// NIC's bandwidth. Ranks ordered node 0, 2, 1, 3 make every ring edge cross SUs: both nodes of an
// SU send across on every rail, 2 NICs' worth into 1 -> fabric factor exactly 2. Non-blocking,
// destination-mod-k sends them up distinct spines -> factor 1. (In node order the ring crosses
// only twice, 1 NIC's worth per uplink, and 2:1 costs nothing: rings are bisection-light.)
TEST(ncclPlan, TwoToOneOversubscriptionHalvesCrossPodBusBandwidth) {
  ClusterSpec c = preset("dgx-h100", 4);
  ModelOptions o = forced(Algo::Ring);
  o.launch_overhead = false;
  NcclModel m(c, o);
  std::vector<std::int32_t> interleaved;
  for (int node : {0, 2, 1, 3}) {
    for (int g = 0; g < 8; ++g) interleaved.push_back(node * 8 + g);
  }
  const Bytes S = Bytes{16} << 30;
  auto busbw = [&](double ratio, const std::vector<std::int32_t>& ranks, double* factor) {
    TopologyOptions to;
    to.nodes_per_leaf = 2;
    to.oversubscription = ratio;
    Topology topo = build_topology(c, to);
    Prediction p = predict_on_topology(m, topo, CollectiveKind::AllReduce, S, ranks);
    *factor = p.fabric_factor;
    return p.busbw;
  };
  double f1 = 0, f2 = 0, g1 = 0, g2 = 0;
  const double full = busbw(1.0, interleaved, &f1);
  const double over = busbw(2.0, interleaved, &f2);
  EXPECT_DOUBLE_EQ(f1, 1.0);
  EXPECT_DOUBLE_EQ(f2, 2.0);
  EXPECT_NEAR(over / full, 0.5, 0.01);  // latency is < 1 % of a 16 GiB all-reduce
  const double contiguous_full = busbw(1.0, first(32), &g1);
  const double contiguous_over = busbw(2.0, first(32), &g2);
  EXPECT_DOUBLE_EQ(g2, 1.0);
  EXPECT_DOUBLE_EQ(contiguous_over, contiguous_full);
}

// NCCL's tuner can believe more than the wires carry: 2.18 rates the NVLS tree beyond two nodes
// at min(bwIntra, bwInter) per channel (2.19 halves bwInter), 8 x 40 x 5/6 = 267 GB/s algorithm
// bandwidth. On the topology the routed flows load each NIC with S/4 per direction (a node is
// inner in one tree and leaf in the other), so the raw NIC time S / (4 x 50 GB/s) is the floor.
TEST(ncclPlan, EndpointLoadFloorsAnOptimisticTuner) {
  ClusterSpec c = preset("dgx-h100", 4);
  NcclModel m(c);
  Topology topo = build_topology(c);
  const Bytes S = Bytes{8} << 30;
  Prediction closed = m.predict(CollectiveKind::AllReduce, S, first(32));
  ASSERT_EQ(closed.algo, Algo::NvlsTree);
  Prediction routed = predict_on_topology(m, topo, CollectiveKind::AllReduce, S, first(32));
  EXPECT_NEAR(routed.bandwidth_s, static_cast<double>(S) / (4 * c.nic_bandwidth),
              1e-3 * routed.bandwidth_s);
  EXPECT_GT(routed.seconds, closed.seconds);
}

// Two GB200 NVL72 racks: NCCL's node is the 72-GPU NVLink domain, whose NICs sit on 18 trays.
// Ring channels must leave a rack through NICs of different trays (not all through tray 0), so
// the routed flows load no NIC more than NCCL's graph says: fabric factor 1, closed form kept.
TEST(ncclPlan, Nvl72RingsSpreadOverTheTraysNics) {
  ClusterSpec c = preset("gb200-nvl72", 36);
  NcclModel m(c, forced(Algo::Ring));
  Topology topo = build_topology(c);
  auto plan = build_plan(m, CollectiveKind::AllReduce, Bytes{4} << 30, first(144));
  std::set<int> sending_trays;
  for (const auto& f : plan.flows) {
    if (f.src / 72 != f.dst / 72) sending_trays.insert(f.src / 4);
  }
  EXPECT_GE(sending_trays.size(), 8u);
  auto routed = route_plan(plan, topo);
  EXPECT_DOUBLE_EQ(routed.fabric_factor, 1.0);
  EXPECT_DOUBLE_EQ(routed.bandwidth_s, plan.prediction.bandwidth_s);
}

// Broadcast and reduce run a chain from (to) the root along the ring: nothing flows into the
// root of a broadcast or out of the root of a reduce, whichever rank it is.
TEST(ncclPlan, ChainStartsAtTheRoot) {
  NcclModel m(preset("dgx-h100", 2), forced(Algo::Ring));
  const auto ranks = first(16);
  for (int root : {0, 5, 15}) {
    SCOPED_TRACE(root);
    for (const PlanFlow& f : build_plan(m, CollectiveKind::Broadcast, 1 << 20, ranks, root).flows) {
      EXPECT_NE(f.dst, ranks[root]);
    }
    for (const PlanFlow& f : build_plan(m, CollectiveKind::Reduce, 1 << 20, ranks, root).flows) {
      EXPECT_NE(f.src, ranks[root]);
    }
  }
  EXPECT_THROW(build_plan(m, CollectiveKind::Broadcast, 1 << 20, ranks, 16), std::invalid_argument);
}

TEST(ncclPlan, SendRecvAndAllToAll) {
  ClusterSpec c = preset("dgx-h100", 2);
  NcclModel m(c);
  std::vector<std::int32_t> pair = {0, 8};
  auto sr = build_plan(m, CollectiveKind::SendRecv, 1000, pair);
  ASSERT_EQ(sr.flows.size(), 1u);  // one NIC per GPU on DGX
  EXPECT_EQ(sr.total_bytes(), 1000);
  std::vector<std::int32_t> three = {0, 1, 2};
  EXPECT_THROW(build_plan(m, CollectiveKind::SendRecv, 1000, three), std::invalid_argument);
  // All-to-all over 2 nodes of 8 (1,000 bytes per pair), through PXN: in each node one NVLink
  // flow per ordered pair (56), and one flow per remote rank from its rail's GPU (8): 128 flows.
  // They carry the 15 x 16,000 payload once, plus what each rank relays to its node's rail owner
  // for the 7 remote ranks on other rails: 16 x 7 x 1,000.
  auto a2a = build_plan(m, CollectiveKind::AllToAll, 16000, first(16));
  EXPECT_EQ(a2a.flows.size(), 2u * (8u * 7u + 8u));
  EXPECT_EQ(a2a.total_bytes(), 15 * 16000 + 16 * 7 * 1000);
  for (const PlanFlow& f : a2a.flows) {
    if (f.src / 8 == f.dst / 8) continue;
    EXPECT_EQ(f.src % 8, f.dst % 8);  // on the rail of both ends
    EXPECT_EQ(f.rail, f.src % 8);
    EXPECT_EQ(f.bytes, 8 * 1000);     // the whole node's data for that rank
  }
  Topology topo = build_topology(c);
  auto routed = route_plan(a2a, topo);
  EXPECT_EQ(routed.flows.size(), a2a.flows.size());
}

}  // namespace
}  // namespace zerosim::nccl
