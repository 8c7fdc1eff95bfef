// A second job sharing the fabric (FlowComm::add_background_job, whatif.background_*): placement,
// the other job's persistent flows and their rate cap, and what max-min sharing with them costs
// this job, each expectation derived in the comments from the fabric's numbers.
//
// The fabric of most tests: DGX H100 nodes (8 NICs of 400 Gb/s = 50 GB/s, PCIe 64 GB/s) on the
// rail fat tree cut into SUs of 2 nodes (nodes_per_leaf = 2: one leaf per rail and SU, 2
// downlinks) at 2:1 oversubscription, so every rail leaf has one uplink of 2 x 50 / 2 = 50 GB/s
// to a single spine: routes are unique and hand-checkable. This job: 2 nodes, collectives on GPU
// 3 of each node (rail 3). The other job: 2 nodes, ring (node a -> b and b -> a, every rail).
//   Interleaved: topology nodes this, other, this, other = 0, 1, 2, 3: SU 0 = {this 0, other 0},
//     SU 1 = {this 1, other 1}. This job's rail-3 flows from node 0 to node 2 cross leaf(SU0,
//     rail 3) -> spine -> leaf(SU1, rail 3), exactly as the other job's node 1 -> node 3 rail-3
//     flow: they share that uplink and that downlink (and symmetrically the other direction).
//   After: this job on nodes 0, 1 (SU 0), the other on 2, 3 (SU 1): no link in common.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/collective/flow_backend.h"
#include "sim/collective/nccl_plan.h"
#include "sim/core/error.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using nlohmann::json;

constexpr double kCap = 50e9;  // one NIC, and one 2:1 uplink, bytes/s

ClusterSpec h100(int nodes, double oversubscription) {
  return cluster_from_json(
      {{"preset", "dgx-h100"}, {"nodes", nodes}, {"oversubscription", oversubscription}},
      "cluster");
}

FlowCommOptions two_node_sus() {
  FlowCommOptions o;
  o.topology.nodes_per_leaf = 2;
  o.nccl.algo = nccl::Algo::Ring;
  o.nccl.proto = nccl::Proto::Simple;
  return o;
}

BackgroundJob other_job(int nodes, BackgroundJob::Placement placement, double load = 1.0,
                        BackgroundJob::Pattern pattern = BackgroundJob::Pattern::Ring) {
  BackgroundJob j;
  j.nodes = nodes;
  j.placement = placement;
  j.pattern = pattern;
  j.load = load;
  return j;
}

// One group, one collective; plays it alone from t = 0 and returns its end.
SimTime play_one(FlowComm& flow, CollectiveKind kind, Bytes bytes,
                 const std::vector<std::int32_t>& ranks) {
  Plan p;
  p.group_ranks = ranks;
  p.group_begin.push_back(static_cast<std::uint32_t>(ranks.size()));
  p.group_names.push_back("g");
  p.num_ranks = *std::max_element(ranks.begin(), ranks.end()) + 1;
  Collective c;
  c.kind = kind;
  c.group = 0;
  c.bytes = bytes;
  p.collectives.push_back(c);
  flow.start(p, 0, 0);
  std::vector<std::uint32_t> done;
  SimTime t = 0;
  while (done.empty()) {
    t = flow.next_completion();
    EXPECT_NE(t, net::kNever);
    if (t == net::kNever) return t;
    flow.pop_completed(t, done);
  }
  return t;
}

// The layout FlowComm injects for `ranks` of this job (mapped to its topology nodes).
nccl::RoutedPlan layout_of(const FlowComm& flow, CollectiveKind kind, Bytes bytes,
                           const std::vector<std::int32_t>& ranks) {
  const int gpn = flow.topology().gpus_per_node();
  std::vector<std::int32_t> mapped;
  for (std::int32_t r : ranks) mapped.push_back(flow.topology_node(r / gpn) * gpn + r % gpn);
  return nccl::route_plan(nccl::build_plan(flow.model(), kind, bytes, mapped), flow.topology());
}

TEST(flowBackground, PlacementMapsThisJobsNodes) {
  FlowComm inter(h100(3, 1));
  inter.add_background_job(other_job(2, BackgroundJob::Placement::Interleaved));
  EXPECT_EQ(inter.topology().num_nodes(), 5);
  EXPECT_EQ(inter.topology_node(0), 0);  // this, other, this, other, this
  EXPECT_EQ(inter.topology_node(1), 2);
  EXPECT_EQ(inter.topology_node(2), 4);
  // ring of 2 nodes: a -> b and b -> a on each of the 8 rails
  EXPECT_EQ(inter.background_flows(), 2u * 8u);

  FlowComm after(h100(3, 1));
  after.add_background_job(
      other_job(4, BackgroundJob::Placement::After, 1.0, BackgroundJob::Pattern::AllToAll));
  EXPECT_EQ(after.topology_node(0), 0);
  EXPECT_EQ(after.topology_node(2), 2);
  EXPECT_EQ(after.background_flows(), 4u * 3u * 8u);  // ordered pairs x rails

  FlowComm lone(h100(2, 1));
  lone.add_background_job(other_job(1, BackgroundJob::Placement::After));
  EXPECT_EQ(lone.background_flows(), 0u);  // one node: nobody to talk to

  FlowComm twice(h100(2, 1));
  twice.add_background_job(other_job(2, BackgroundJob::Placement::After));
  EXPECT_THROW(twice.add_background_job(other_job(2, BackgroundJob::Placement::After)),
               std::logic_error);
  FlowComm late(h100(2, 1));
  late.scale_node_nics(0, 0.5);
  EXPECT_THROW(late.add_background_job(other_job(2, BackgroundJob::Placement::After)),
               std::logic_error);
  FlowComm bad(h100(2, 1));
  EXPECT_THROW(bad.add_background_job(other_job(2, BackgroundJob::Placement::After, 0.0)),
               std::invalid_argument);
  EXPECT_THROW(bad.add_background_job(other_job(0, BackgroundJob::Placement::After)),
               std::invalid_argument);
  // GB200 NVL72: an NVLink domain spans 18 nodes of 4 GPUs; placement moves whole domains.
  FlowComm nvl(cluster_from_json({{"preset", "gb200-nvl72"}, {"nodes", 18}}, "cluster"));
  EXPECT_THROW(nvl.add_background_job(other_job(3, BackgroundJob::Placement::After)),
               InputError);
}

// A pipeline send from GPU 3 of node 0 to GPU 3 of node 1: one flow (GPU 3's own NIC is NIC 3),
// W wire bytes over PCIe (64), NIC (50), the rail-3 uplink (50), the spine's downlink (50).
//   alone (or After): 50 GB/s, ends at alpha + W / 50e9;
//   Interleaved, load 1: the uplink carries the send and the other job's node 1 -> 3 flow, both
//     offered 50: max-min gives each 25, so the send's NIC bandwidth is exactly halved and it
//     ends at alpha + 2 W / 50e9;
//   load 0.5: the other flow's cap 25 equals its fair share: the same 25 / 25 split;
//   load 0.25: the cap (12.5) is below the fair share: the send gets the other 37.5 GB/s and ends
//     at alpha + W / 37.5e9.
TEST(flowBackground, InterleavedRingHalvesTheNicBandwidthOfACrossNodeSend) {
  const std::vector<std::int32_t> pair = {3, 11};
  const Bytes S = Bytes{256} << 20;
  auto run = [&](bool with, BackgroundJob::Placement placement, double load,
                 nccl::RoutedPlan* layout) {
    FlowComm flow(h100(2, 2), two_node_sus());
    if (with) flow.add_background_job(other_job(2, placement, load));
    *layout = layout_of(flow, CollectiveKind::SendRecv, S, pair);
    return play_one(flow, CollectiveKind::SendRecv, S, pair);
  };
  nccl::RoutedPlan r;
  const SimTime alone = run(false, BackgroundJob::Placement::Interleaved, 1.0, &r);
  ASSERT_EQ(r.flows.size(), 1u);
  const double alpha = static_cast<double>(seconds_to_ps(r.latency_s));
  const double W = static_cast<double>(r.flows[0].bytes);
  EXPECT_NEAR(static_cast<double>(alone), alpha + W / kCap * 1e12, 3);

  nccl::RoutedPlan ri;
  const SimTime inter = run(true, BackgroundJob::Placement::Interleaved, 1.0, &ri);
  ASSERT_EQ(ri.flows.size(), 1u);
  EXPECT_EQ(ri.flows[0].bytes, r.flows[0].bytes);
  EXPECT_EQ(seconds_to_ps(ri.latency_s), seconds_to_ps(r.latency_s));
  EXPECT_NEAR(static_cast<double>(inter), alpha + 2 * W / kCap * 1e12, 3);
  EXPECT_NEAR(static_cast<double>(run(true, BackgroundJob::Placement::Interleaved, 0.5, &ri)),
              alpha + 2 * W / kCap * 1e12, 3);
  EXPECT_NEAR(static_cast<double>(run(true, BackgroundJob::Placement::Interleaved, 0.25, &ri)),
              alpha + W / (0.75 * kCap) * 1e12, 3);
  EXPECT_NEAR(static_cast<double>(run(true, BackgroundJob::Placement::After, 1.0, &ri)),
              static_cast<double>(alone), 3);
}

// A ring all-reduce over GPU 3 of both nodes: per channel one flow each way, C channels all on
// NIC 3, each flow W wire bytes (N = 2: 2 (S_c - S_c / 2) = S_c). Alone, C flows share each
// direction's NIC and uplink: alpha + C W / 50e9. Interleaved with the ring at load 1, each
// direction's uplink holds the C flows and one of the other job's: 50 / (C + 1) each, so this
// job gets C / (C + 1) of its NIC bandwidth: alpha + (C + 1) W / 50e9, slower by exactly W / 50e9.
// Load 0.5 is above that fair share (C >= 2): no change from load 1. At load L = 0.1 < 1 / (C + 1)
// the other flow is held at 5 GB/s and the C flows share 45: alpha + C W / 45e9. After: alone.
TEST(flowBackground, AllReduceSlowsByTheMaxMinShareOfTheOtherJob) {
  const std::vector<std::int32_t> ranks = {3, 11};
  const Bytes S = Bytes{256} << 20;
  FlowComm probe(h100(2, 2), two_node_sus());
  const nccl::RoutedPlan r = layout_of(probe, CollectiveKind::AllReduce, S, ranks);
  const int C = static_cast<int>(r.flows.size()) / 2;
  ASSERT_GE(C, 2);
  ASSERT_LT(C, 9);  // so that load 0.1 is below the fair share 1 / (C + 1)
  for (const auto& f : r.flows) ASSERT_EQ(f.bytes, r.flows[0].bytes);
  const double alpha = static_cast<double>(seconds_to_ps(r.latency_s));
  const double W = static_cast<double>(r.flows[0].bytes);

  auto run = [&](bool with, BackgroundJob::Placement placement, double load) {
    FlowComm flow(h100(2, 2), two_node_sus());
    if (with) flow.add_background_job(other_job(2, placement, load));
    return static_cast<double>(play_one(flow, CollectiveKind::AllReduce, S, ranks));
  };
  using P = BackgroundJob::Placement;
  const double alone = run(false, P::Interleaved, 1);
  EXPECT_NEAR(alone, alpha + C * W / kCap * 1e12, 3);
  const double inter = run(true, P::Interleaved, 1);
  EXPECT_NEAR(inter, alpha + (C + 1) * W / kCap * 1e12, 3);
  EXPECT_NEAR(inter - alone, W / kCap * 1e12, 6);
  EXPECT_NEAR(run(true, P::Interleaved, 0.5), inter, 3);
  EXPECT_NEAR(run(true, P::Interleaved, 0.1), alpha + C * W / (0.9 * kCap) * 1e12, 3);
  EXPECT_NEAR(run(true, P::After, 1), alone, 3);
  // Two nodes of the other job: all-to-all is the same two flows per rail as the ring.
  FlowComm a2a(h100(2, 2), two_node_sus());
  a2a.add_background_job(other_job(2, P::Interleaved, 1, BackgroundJob::Pattern::AllToAll));
  EXPECT_EQ(static_cast<double>(play_one(a2a, CollectiveKind::AllReduce, S, ranks)), inter);
}

// The link report counts the other job as traffic class "other". In the send case above
// (Interleaved, load 1) its 16 flows (2 directions x 8 rails) run at 50 GB/s from 0 to the end E,
// except node 1 -> 3 on rail 3, which runs at 25 while the send shares its uplink (2 W / 50e9
// seconds): in all 16 x 50e9 x E - W bytes (each flow's count rounded down: up to 16 less). Each
// crosses two leaf-spine links (up and down) and two NIC links (leaf side of both NICs).
TEST(flowBackground, LinkReportShowsTheOtherJobAsItsOwnTrafficClass) {
  const std::vector<std::int32_t> pair = {3, 11};
  const Bytes S = Bytes{256} << 20;
  FlowComm flow(h100(2, 2), two_node_sus(), {kPpTraffic});
  flow.add_background_job(other_job(2, BackgroundJob::Placement::Interleaved));
  const double W = static_cast<double>(
      layout_of(flow, CollectiveKind::SendRecv, S, pair).flows[0].bytes);
  const SimTime end = play_one(flow, CollectiveKind::SendRecv, S, pair);
  const LinkReport rep = flow.link_report(end);
  const double expect = 16 * kCap * ps_to_seconds(end) - W;
  EXPECT_NEAR(static_cast<double>(rep.background_bytes), expect, 16 + 1e-9 * expect);
  EXPECT_EQ(rep.background_flows, 16u);
  EXPECT_EQ(rep.wire_bytes[kOtherTraffic], rep.background_bytes);
  for (const LinkKindUsage& k : rep.kinds) {
    if (k.kind == LinkKind::LeafSpine || k.kind == LinkKind::Nic) {
      EXPECT_EQ(k.bytes[kOtherTraffic], 2 * rep.background_bytes) << link_kind_name(k.kind);
    } else {
      EXPECT_EQ(k.bytes[kOtherTraffic], 0) << link_kind_name(k.kind);
    }
  }
  const json j = rep.to_json();
  EXPECT_EQ(j["background"]["nodes"], 2);
  EXPECT_EQ(j["background"]["placement"], "interleaved");
  EXPECT_EQ(j["background"]["pattern"], "ring");
  EXPECT_EQ(j["links"]["leaf_spine"]["bytes"]["other"], 2 * rep.background_bytes);
  EXPECT_FALSE(FlowComm(h100(2, 1)).link_report(0).to_json().contains("background"));
}

// Through simulate_step (the `case NetworkModel::Flow` wiring): a tiny data-parallel step on 2
// DGX H100 nodes at 2:1 beside 2 other nodes. Default SUs are min(nodes, 32) = all 4 nodes under
// one leaf per rail, so nothing is shared (the report still shows the other job); the step is
// the one without it, bit for bit.
TEST(flowBackground, SimulateWiresTheWhatIfKeys) {
  json doc = {{"model", testing_plan::tiny_model()},
              {"cluster", {{"preset", "dgx-h100"}, {"nodes", 2}}},
              {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2}}},
              {"zero", {{"stage", 1}, {"overlap_comm", false}}},
              {"sim", {{"network", "flow"}}}};
  const Simulation plain = simulate_step(resolve_scenario(doc));
  doc["whatif"] = {{"background_nodes", 2}, {"background_pattern", "all-to-all"},
                   {"background_load", 0.5}};
  const Simulation with = simulate_step(resolve_scenario(doc));
  ASSERT_TRUE(with.network.contains("background"));
  EXPECT_EQ(with.network["background"]["nodes"], 2);
  EXPECT_EQ(with.network["background"]["pattern"], "all_to_all");
  EXPECT_EQ(with.network["background"]["load"], 0.5);
  EXPECT_EQ(with.network["background"]["flows"], 2 * 8);
  EXPECT_GT(with.network["links"]["nic"]["bytes"]["other"].get<double>(), 0);
  EXPECT_EQ(with.report.step_time_s, plain.report.step_time_s);
  doc["sim"]["network"] = "analytical";
  EXPECT_THROW(resolve_scenario(doc), InputError);
}

}  // namespace
}  // namespace zerosim
