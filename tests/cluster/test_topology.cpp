// The cluster graph: what build_topology creates for the presets, that link ids are dense and
// match the Boost graph, routes (NVLink, rail-aligned NICs, PXN, spines, cores), oversubscription
// and deterministic ECMP.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/cluster/cluster.h"
#include "sim/cluster/topology.h"
#include "sim/core/error.h"

namespace zerosim {
namespace {

using nlohmann::json;

ClusterSpec preset(const std::string& name, int nodes) {
  return cluster_from_json(json{{"preset", name}, {"nodes", nodes}}, "cluster");
}

std::map<VertexKind, int> count_kinds(const Topology& t) {
  std::map<VertexKind, int> n;
  for (auto v : boost::make_iterator_range(boost::vertices(t.graph()))) ++n[t.graph()[v].kind];
  return n;
}

// Consecutive links of a route must join: dst of one is src of the next.
void expect_connected(const Topology& t, const std::vector<LinkId>& r, VertexId from, VertexId to) {
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(t.link(r.front()).src, from);
  EXPECT_EQ(t.link(r.back()).dst, to);
  for (std::size_t i = 0; i + 1 < r.size(); ++i) EXPECT_EQ(t.link(r[i]).dst, t.link(r[i + 1]).src);
  std::set<LinkId> unique(r.begin(), r.end());
  EXPECT_EQ(unique.size(), r.size()) << "a link twice in a route";
}

bool crosses(const Topology& t, const std::vector<LinkId>& r, VertexKind k) {
  for (LinkId l : r) {
    if (t.graph()[t.link(l).dst].kind == k) return true;
  }
  return false;
}

// One DGX H100: 8 GPUs, 1 NVSwitch domain, 8 PCIe switches (one GPU + one NIC each), 1 host,
// 8 NICs, 8 rail leaves (one SU of one node) and 1 spine (round(1 downlink / 1) uplinks).
// Links, both directions: NVLink 8x2, GPU-PCIe 8x2, PCIe-host 8x2, NIC-PCIe 8x2, NIC-leaf 8x2,
// leaf-spine 8x2 = 96.
TEST(topology, DgxH100NodeHasTheExpectedParts) {
  Topology t = build_topology(preset("dgx-h100", 1));
  auto n = count_kinds(t);
  EXPECT_EQ(n[VertexKind::Gpu], 8);
  EXPECT_EQ(n[VertexKind::NvSwitch], 1);
  EXPECT_EQ(n[VertexKind::PcieSwitch], 8);
  EXPECT_EQ(n[VertexKind::Host], 1);
  EXPECT_EQ(n[VertexKind::Nic], 8);
  EXPECT_EQ(n[VertexKind::Leaf], 8);
  EXPECT_EQ(n[VertexKind::Spine], 1);
  EXPECT_EQ(t.num_links(), 96u);
  EXPECT_EQ(boost::num_edges(t.graph()), 96u);
  EXPECT_EQ(t.routing(), Routing::DestinationModK);  // InfiniBand
}

TEST(topology, LinkIdsAreDenseAndMatchTheGraph) {
  Topology t = build_topology(preset("dgx-a100-80gb", 4));
  std::vector<int> seen(t.num_links(), 0);
  for (auto e : boost::make_iterator_range(boost::edges(t.graph()))) {
    const LinkId id = t.graph()[e].link;
    ASSERT_LT(id, t.num_links());
    ++seen[id];
    EXPECT_EQ(t.link(id).src, boost::source(e, t.graph()));
    EXPECT_EQ(t.link(id).dst, boost::target(e, t.graph()));
    EXPECT_GT(t.link(id).bandwidth, 0);
    EXPECT_GE(t.link(id).latency, 0);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

// Inside a node: GPU -> NVSwitch -> GPU, at NVLink bandwidth, nvlink_latency end to end.
TEST(topology, IntraNodeRouteGoesThroughTheNvSwitch) {
  ClusterSpec c = preset("dgx-h100", 1);
  Topology t = build_topology(c);
  auto r = t.route(2, 5);
  ASSERT_EQ(r.size(), 2u);
  expect_connected(t, r, t.gpu_vertex(2), t.gpu_vertex(5));
  EXPECT_EQ(t.graph()[t.link(r[0]).dst].kind, VertexKind::NvSwitch);
  EXPECT_DOUBLE_EQ(t.route_bandwidth(r), c.nvlink_bandwidth);
  EXPECT_DOUBLE_EQ(t.route_latency(r), c.nvlink_latency);
  EXPECT_TRUE(t.route(3, 3).empty());
}

// Across nodes on a rail-optimized fabric, GPU 3 uses NIC 3 at both ends and stays on the rail-3
// leaf: gpu3 -> pcie -> nic3 -> leaf(rail 3) -> nic3' -> pcie' -> gpu11, 6 links. Latency:
// PCIe 0.5 us x 4 + nic_latency / 2 x 2 = 2 + 2.7 = 4.7 us; bottleneck the NIC (400 Gb/s).
TEST(topology, RailAlignedRouteStaysOnItsLeaf) {
  ClusterSpec c = preset("dgx-h100", 2);
  Topology t = build_topology(c);
  auto r = t.route(3, 11);
  ASSERT_EQ(r.size(), 6u);
  expect_connected(t, r, t.gpu_vertex(3), t.gpu_vertex(11));
  EXPECT_FALSE(crosses(t, r, VertexKind::Spine));
  EXPECT_EQ(t.link(r[2]).src, t.nic_vertex(0, 3));
  EXPECT_EQ(t.link(r[3]).dst, t.nic_vertex(1, 3));
  EXPECT_NEAR(t.route_latency(r), 2e-6 + c.nic_latency, 1e-15);
  EXPECT_DOUBLE_EQ(t.route_bandwidth(r), c.nic_bandwidth);
}

// Through another GPU's NIC (NCCL's PXN): GPU 3 -> NVSwitch -> GPU 4 -> PCIe -> NIC 4.
TEST(topology, PxnReachesAnotherRailOverNvLink) {
  Topology t = build_topology(preset("dgx-h100", 2));
  auto r = t.route(3, 12, 0, 4);
  expect_connected(t, r, t.gpu_vertex(3), t.gpu_vertex(12));
  EXPECT_EQ(t.link(r[1]).dst, t.gpu_vertex(4));
  EXPECT_TRUE(crosses(t, r, VertexKind::Nic));
  EXPECT_FALSE(crosses(t, r, VertexKind::Spine));
  EXPECT_THROW(t.route(3, 12, 0, 8), std::invalid_argument);
}

TEST(topology, CrossRailTrafficClimbsToASpine) {
  Topology t = build_topology(preset("dgx-h100", 2));
  auto r = t.route_nic_to_nic(0, 0, 1, 1);
  ASSERT_EQ(r.size(), 4u);  // nic -> leaf0 -> spine -> leaf1 -> nic
  expect_connected(t, r, t.nic_vertex(0, 0), t.nic_vertex(1, 1));
  EXPECT_EQ(t.graph()[t.link(r[1]).dst].kind, VertexKind::Spine);
}

// Leaf with D downlinks of B and ratio R: uplinks carry D*B/R in total, in max(1, round(D/R))
// links. D = 4 nodes per SU: R=1 -> 4 x B, R=2 -> 2 x B, R=3 -> 1 x 4B/3, R=4 -> 1 x B.
TEST(topology, OversubscriptionDividesLeafUplinkCapacity) {
  ClusterSpec c = preset("dgx-h100", 8);
  for (double ratio : {1.0, 2.0, 3.0, 4.0}) {
    SCOPED_TRACE(ratio);
    TopologyOptions o;
    o.nodes_per_leaf = 4;
    o.oversubscription = ratio;
    Topology t = build_topology(c, o);
    EXPECT_EQ(t.num_leaves(), 16);  // 2 SUs x 8 rails
    for (auto v : boost::make_iterator_range(boost::vertices(t.graph()))) {
      if (t.graph()[v].kind != VertexKind::Leaf) continue;
      double down = 0, up = 0;
      int ups = 0;
      for (auto e : boost::make_iterator_range(boost::out_edges(v, t.graph()))) {
        const TopoLink& l = t.link(t.graph()[e].link);
        if (t.graph()[l.dst].kind == VertexKind::Nic) down += l.bandwidth;
        if (t.graph()[l.dst].kind == VertexKind::Spine) {
          up += l.bandwidth;
          ++ups;
        }
      }
      EXPECT_DOUBLE_EQ(down, 4 * c.nic_bandwidth);
      EXPECT_NEAR(up, down / ratio, 1e-6 * down);
      EXPECT_EQ(ups, std::max(1, static_cast<int>(std::lround(4 / ratio))));
    }
  }
}

// OpenSM-style destination-mod-k: four nodes of SU 0 sending to four distinct nodes of SU 1 on
// one rail use four distinct spines (a permutation does not collide).
TEST(topology, DestinationModKSpreadsAPermutation) {
  TopologyOptions o;
  o.nodes_per_leaf = 4;
  Topology t = build_topology(preset("dgx-h100", 8), o);
  std::set<LinkId> uplinks;
  for (int i = 0; i < 4; ++i) {
    auto r = t.route_nic_to_nic(i, 0, 4 + (i + 1) % 4, 0, 12345);
    ASSERT_EQ(r.size(), 4u);
    uplinks.insert(r[1]);
  }
  EXPECT_EQ(uplinks.size(), 4u);
}

TEST(topology, EcmpHashIsDeterministicAndValid) {
  ClusterSpec c = preset("meta-h100-roce", 16);
  Topology t = build_topology(c);
  EXPECT_EQ(t.routing(), Routing::EcmpHash);
  std::set<std::vector<LinkId>> distinct;
  for (std::uint64_t h = 0; h < 32; ++h) {
    auto a = t.route(0, 15 * 8 + 3, h);
    auto b = t.route(0, 15 * 8 + 3, h);
    EXPECT_EQ(a, b);
    expect_connected(t, a, t.gpu_vertex(0), t.gpu_vertex(15 * 8 + 3));
    distinct.insert(a);
  }
  EXPECT_GT(distinct.size(), 1u) << "ECMP should use more than one path across flows";
}

// Three tiers: 16 DGX A100 in SUs of 2 nodes, pods of 8 leaves (one SU's 8 rails): 8 pods. A
// route between pods climbs leaf -> spine -> core -> spine -> leaf.
TEST(topology, ThreeTierRoutesBetweenPodsCrossACore) {
  ClusterSpec c = preset("dgx-a100-80gb", 16);
  ASSERT_EQ(c.fabric_tiers, 3);
  TopologyOptions o;
  o.nodes_per_leaf = 2;
  o.leaves_per_pod = 8;
  Topology t = build_topology(c, o);
  EXPECT_GT(t.num_cores(), 0);
  auto r = t.route_nic_to_nic(0, 0, 15, 0);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(t.graph()[t.link(r[2]).dst].kind, VertexKind::Core);
  auto same_pod = t.route_nic_to_nic(0, 0, 1, 0);
  EXPECT_EQ(same_pod.size(), 2u);  // both nodes on the same rail leaf
}

// Top-of-rack Clos: every NIC of a node on its rack's leaf; AWS P5's 32 NICs fill one leaf.
TEST(topology, ClosPutsANodesNicsOnOneLeaf) {
  ClusterSpec c = preset("aws-p5-h100", 2);
  Topology t = build_topology(c);
  EXPECT_EQ(t.nodes_per_leaf(), 1);
  EXPECT_EQ(t.num_leaves(), 2);
  EXPECT_EQ(t.local_nics(0), (std::vector<int>{0, 1, 2, 3}));
  auto r = t.route(0, 8);
  expect_connected(t, r, t.gpu_vertex(0), t.gpu_vertex(8));
  EXPECT_TRUE(crosses(t, r, VertexKind::Spine));
}

// GB200 NVL72: 18 trays of 4 GPUs share one NVLink domain; GPU 0 reaches GPU 71 over NVLink.
TEST(topology, Nvl72DomainSpansTrays) {
  Topology t = build_topology(preset("gb200-nvl72", 18));
  EXPECT_EQ(t.num_gpus(), 72);
  EXPECT_TRUE(t.same_nvlink_domain(0, 71));
  auto r = t.route(0, 71);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(t.link(r[0]).cls, LinkClass::NvLink);
}

// H100 PCIe with NVLink bridges: pairs of GPUs share a direct 300 GB/s link (no NVSwitch); GPUs
// of different pairs in one server go through PCIe and the host; 4 PCIe switches, one NIC each.
TEST(topology, H100PcieBridgesPairsAndCrossesPairsThroughTheHost) {
  Topology t = build_topology(preset("h100-pcie-80gb", 1));
  auto n = count_kinds(t);
  EXPECT_EQ(n[VertexKind::Gpu], 8);
  EXPECT_EQ(n[VertexKind::NvSwitch], 0);
  EXPECT_EQ(n[VertexKind::PcieSwitch], 4);
  EXPECT_EQ(n[VertexKind::Nic], 4);
  EXPECT_TRUE(t.same_nvlink_domain(0, 1));
  EXPECT_FALSE(t.same_nvlink_domain(1, 2));
  auto pair = t.route(0, 1);
  ASSERT_EQ(pair.size(), 1u);
  EXPECT_EQ(t.link(pair[0]).cls, LinkClass::NvLink);
  EXPECT_DOUBLE_EQ(t.link(pair[0]).bandwidth, 300e9);
  auto across = t.route(1, 2);
  expect_connected(t, across, t.gpu_vertex(1), t.gpu_vertex(2));
  EXPECT_TRUE(crosses(t, across, VertexKind::Host));
  for (LinkId l : across) EXPECT_EQ(t.link(l).cls, LinkClass::Pcie);
}

TEST(topology, NicLocalityFollowsPcieSwitches) {
  EXPECT_EQ(local_nics_of(preset("dgx-h100", 1), 5), (std::vector<int>{5}));
  ClusterSpec four = preset("vtrain-a100-800g", 1);  // 8 GPUs, 4 NICs
  EXPECT_EQ(local_nics_of(four, 0), (std::vector<int>{0}));
  EXPECT_EQ(local_nics_of(four, 1), (std::vector<int>{0}));
  EXPECT_EQ(local_nics_of(four, 7), (std::vector<int>{3}));
  Topology t = build_topology(preset("vtrain-a100-800g", 2));
  EXPECT_EQ(t.rail_gpu(1, 2), 8 + 4);
}

TEST(topology, HostRoutesUsePcie) {
  ClusterSpec c = preset("dgx-h100", 1);
  Topology t = build_topology(c);
  auto d2h = t.route_gpu_to_host(3);
  expect_connected(t, d2h, t.gpu_vertex(3), t.host_vertex(0));
  EXPECT_DOUBLE_EQ(t.route_bandwidth(d2h), c.pcie_bandwidth);
  auto h2d = t.route_host_to_gpu(3);
  expect_connected(t, h2d, t.host_vertex(0), t.gpu_vertex(3));
}

TEST(topology, BadClustersAreInputErrors) {
  ClusterSpec c = preset("dgx-h100", 2);
  c.nics_per_node = 0;
  try {
    build_topology(c);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "cluster.nics_per_node");
  }
  ClusterSpec d = preset("dgx-h100", 1);
  d.topology = "torus";
  try {
    build_topology(d);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "cluster.topology");
  }
  Topology t = build_topology(preset("dgx-h100", 1));
  EXPECT_THROW(t.route(0, 8), std::invalid_argument);
}

// Flows per fabric link (NIC-leaf links excluded) when every (node, rail) NIC sends to the same
// rail of node (n + shift) % nodes.
std::map<LinkId, int> fabric_load_of_shift(const Topology& t, int shift) {
  std::map<LinkId, int> load;
  const int nodes = t.num_nodes();
  for (int n = 0; n < nodes; ++n) {
    for (int k = 0; k < t.nics_per_node(); ++k) {
      auto r = t.route_nic_to_nic(n, k, (n + shift) % nodes, k, 7);
      for (std::size_t i = 1; i + 1 < r.size(); ++i) ++load[r[i]];
    }
  }
  return load;
}

// DGX SuperPOD scale (160 DGX A100 = 5 SUs of 32, pods of 4 SUs: two pods, three tiers). A shift
// permutation on all 8 rails at once crosses the core; destination-mod-k on the destination NIC's
// address gives every flow its own leaf-spine and spine-core links. (Addressing by node number
// sent the 8 rails of one destination node through the same core link: 8 flows on one link.)
TEST(topology, DestinationModKSpreadsEveryRailOverTheCores) {
  Topology t = build_topology(preset("dgx-a100-80gb", 160));
  ASSERT_GT(t.num_cores(), 0);
  for (int shift : {1, 40, 80, 130}) {
    auto load = fabric_load_of_shift(t, shift);
    bool core_used = false;
    for (auto [link, flows] : load) {
      EXPECT_EQ(flows, 1) << "shift " << shift << ": link " << link << " carries " << flows;
      core_used = core_used || t.graph()[t.link(link).dst].kind == VertexKind::Core;
    }
    EXPECT_TRUE(core_used) << "shift " << shift;  // some node pairs straddle the pods
  }
}

// EFA sprays: each tier is one bundle of the parallel links' capacity (one spine per pod, one
// core), so a permutation of NIC pairs at full NIC rate never exceeds a fabric link, while
// hashing the same flows onto single ECMP paths does somewhere (collisions).
TEST(topology, SprayedFabricIsBundledAndNonBlocking) {
  ClusterSpec c = preset("aws-p5-h100", 64);  // 32 NICs per node: a leaf per node, 4 pods
  Topology sprayed = build_topology(c);
  EXPECT_EQ(sprayed.routing(), Routing::Spray);
  EXPECT_EQ(sprayed.num_spines(), 4);
  EXPECT_EQ(sprayed.num_cores(), 1);
  TopologyOptions ecmp_opt;
  ecmp_opt.routing = Routing::EcmpHash;
  Topology ecmp = build_topology(c, ecmp_opt);
  for (int shift : {1, 16, 33}) {
    for (auto [link, flows] : fabric_load_of_shift(sprayed, shift)) {
      EXPECT_LE(flows * c.nic_bandwidth, sprayed.link(link).bandwidth * (1 + 1e-12));
    }
    bool oversubscribed = false;
    for (auto [link, flows] : fabric_load_of_shift(ecmp, shift)) {
      oversubscribed = oversubscribed || flows * c.nic_bandwidth > ecmp.link(link).bandwidth;
    }
    EXPECT_TRUE(oversubscribed) << "shift " << shift;
  }
  // The leaf's uplink bundle holds the 32 NICs' bandwidth (non-blocking), one link to the spine.
  auto r = sprayed.route_nic_to_nic(0, 0, 1, 0);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_DOUBLE_EQ(sprayed.link(r[1]).bandwidth, 32 * c.nic_bandwidth);
}

}  // namespace
}  // namespace zerosim
