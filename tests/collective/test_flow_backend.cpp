// FlowComm, the flow-level CommBackend: agreement with the closed form on an idle network, max-min
// sharing when collectives contend, an oversubscribed fabric, the engine driving it, the link
// report. Expectations are derived in the comments from the cluster's numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/collective/flow_backend.h"
#include "sim/collective/nccl_backend.h"
#include "sim/collective/nccl_plan.h"
#include "sim/cost/compute_cost.h"
#include "sim/parallel/training_plan.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using nlohmann::json;

ClusterSpec preset(const std::string& name, int nodes, json extra = json::object()) {
  json doc = {{"preset", name}, {"nodes", nodes}};
  doc.update(extra);
  return cluster_from_json(doc, "cluster");
}

std::vector<std::int32_t> range(int first, int n, int stride = 1) {
  std::vector<std::int32_t> r(n);
  for (int i = 0; i < n; ++i) r[i] = first + i * stride;
  return r;
}

// A plan without ops: FlowComm only reads the collectives and the groups.
struct PlanBuilder {
  Plan plan;
  int group(const std::vector<std::int32_t>& ranks) {
    plan.group_ranks.insert(plan.group_ranks.end(), ranks.begin(), ranks.end());
    plan.group_begin.push_back(static_cast<std::uint32_t>(plan.group_ranks.size()));
    std::string name = "g";
    name += std::to_string(plan.num_groups());
    plan.group_names.push_back(std::move(name));
    for (std::int32_t r : ranks) plan.num_ranks = std::max(plan.num_ranks, r + 1);
    return plan.num_groups() - 1;
  }
  std::uint32_t collective(CollectiveKind kind, int group, Bytes bytes) {
    Collective c;
    c.kind = kind;
    c.group = group;
    c.bytes = bytes;
    plan.collectives.push_back(c);
    return static_cast<std::uint32_t>(plan.collectives.size() - 1);
  }
};

// Drives a backend the way the engine does: start everything in `starts` (time, collective) in
// order, then pop completions until nothing is left. Returns each collective's end time.
std::vector<SimTime> play(CommBackend& comm, const Plan& plan,
                          std::vector<std::pair<SimTime, std::uint32_t>> starts) {
  std::vector<SimTime> end(plan.collectives.size(), -1);
  std::vector<std::uint32_t> done;
  std::size_t next = 0;
  while (true) {
    const SimTime t_start = next < starts.size() ? starts[next].first : kNever;
    const SimTime t_comm = comm.next_completion();
    if (t_start == kNever && t_comm == kNever) break;
    if (t_start <= t_comm) {
      comm.start(plan, starts[next].second, t_start);
      ++next;
    } else {
      done.clear();
      comm.pop_completed(t_comm, done);
      for (std::uint32_t c : done) {
        EXPECT_EQ(end[c], -1) << "collective " << c << " completed twice";
        end[c] = t_comm;
      }
    }
  }
  return end;
}

// (1) Idle network: every kind, several sizes and group shapes. The flow-level time must equal
// NcclAnalyticalComm's (same NCCL model, same topology: route_plan scales the wire bytes so that
// idle flows end exactly at the closed form's bandwidth time) up to rounding:
//   - picoseconds: the alpha is rounded once for the flows and once (with the bandwidth term) for
//     the closed form, and every flow's end is rounded up: 2 ps;
//   - bytes: a flow carries an integer number of bytes while the closed form divides exactly. A
//     ring edge carries passes x (S_c - chunk_i) with S_c = S/C and chunk_i = S_c/N each rounded
//     to a whole byte (share()), so up to 2 x 2 payload bytes off its exact share, times
//     wire_scale, plus 0.5 for llround of the wire bytes. At the flow's fair share of its
//     busiest link (cap / flows on it, a lower bound of its max-min rate on an idle network)
//     that is at most (4 wire_scale + 0.5) / fair_share seconds.
// The larger of the two, or 1e-9 relative, is the tolerance. In practice the differences are 0
// to 205 ps (<= 5e-6 relative at 4 KiB, <= 6e-9 at 1 GiB).
double rounding_tolerance_ps(const FlowComm& flow, CollectiveKind kind, Bytes bytes,
                             std::span<const std::int32_t> ranks, SimTime expect) {
  const nccl::CollectivePlan cp = nccl::build_plan(flow.model(), kind, bytes, ranks);
  const nccl::RoutedPlan rp = nccl::route_plan(cp, flow.topology());
  std::vector<int> on_link(flow.topology().num_links(), 0);
  for (const auto& f : rp.flows) {
    for (LinkId l : f.links) ++on_link[l];
  }
  double worst = 0;  // seconds of the slowest rounding
  for (const auto& f : rp.flows) {
    double fair = 1e300;
    for (LinkId l : f.links) fair = std::min(fair, flow.topology().link(l).bandwidth / on_link[l]);
    if (!f.links.empty()) worst = std::max(worst, (4 * rp.wire_scale + 0.5) / fair);
  }
  return std::max({2.0, 2.0 + worst * 1e12, 1e-9 * static_cast<double>(expect)});
}

struct Shape {
  const char* name;
  const char* preset;
  int nodes;
  std::vector<std::int32_t> ranks;
};

TEST(flowBackend, IdleNetworkMatchesTheClosedForm) {
  const std::vector<Shape> shapes = {
      {"1 node", "dgx-h100", 1, range(0, 8)},
      {"4 nodes", "dgx-h100", 4, range(0, 32)},
      {"tp group in node 1", "dgx-h100", 4, range(8, 4)},
      {"dp group across nodes", "dgx-h100", 4, range(3, 4, 8)},
      {"a100 2 nodes", "dgx-a100-80gb", 2, range(0, 16)},
      {"a100 dp across", "dgx-a100-80gb", 4, range(1, 4, 8)},
  };
  const CollectiveKind kinds[] = {CollectiveKind::AllReduce,     CollectiveKind::ReduceScatter,
                                  CollectiveKind::AllGather,     CollectiveKind::Broadcast,
                                  CollectiveKind::Reduce,        CollectiveKind::AllToAll,
                                  CollectiveKind::SendRecv};
  const Bytes sizes[] = {4096, 1 << 20, 3'000'001, Bytes{64} << 20, Bytes{1} << 30};
  int checked = 0;
  double worst_ratio = 0;
  for (const Shape& sh : shapes) {
    FlowComm flow(preset(sh.preset, sh.nodes));
    nccl::NcclAnalyticalComm closed(flow.model(), &flow.topology());
    PlanBuilder b;
    const int g = b.group(sh.ranks);
    // send/recv: first and last rank of the shape (across nodes when the shape spans nodes)
    const int pair = b.group({sh.ranks.front(), sh.ranks.back()});
    std::vector<std::pair<SimTime, std::uint32_t>> starts;
    SimTime t = 0;
    std::vector<SimTime> expect;
    // Played one after another, 1 s apart, so that nothing overlaps.
    for (CollectiveKind k : kinds) {
      for (Bytes s : sizes) {
        const int grp = k == CollectiveKind::SendRecv ? pair : g;
        starts.push_back({t, b.collective(k, grp, s)});
        const int gs = b.plan.group_size(grp);
        expect.push_back(closed.duration(
            k, s, std::span<const std::int32_t>(b.plan.group_members(grp), gs)));
        t += kPicosPerSecond;
      }
    }
    const std::vector<SimTime> end = play(flow, b.plan, starts);
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const Collective& c = b.plan.collectives[starts[i].second];
      SCOPED_TRACE(std::string(sh.name) + " " + collective_name(c.kind) + " " +
                   std::to_string(c.bytes));
      const SimTime got = end[starts[i].second] - starts[i].first;
      const int gs = b.plan.group_size(c.group);
      const double tol = rounding_tolerance_ps(
          flow, c.kind, c.bytes, std::span<const std::int32_t>(b.plan.group_members(c.group), gs),
          expect[i]);
      worst_ratio = std::max(worst_ratio, std::abs(static_cast<double>(got - expect[i])) / tol);
      EXPECT_NEAR(static_cast<double>(got), static_cast<double>(expect[i]), tol);
      ++checked;
    }
    EXPECT_EQ(flow.in_flight(), 0u);
  }
  EXPECT_EQ(checked, 6 * 7 * 5);
  EXPECT_LT(worst_ratio, 1.0);  // 0.094 when written
}

// The wire bytes and links of one collective as FlowComm lays it out (the same calls it makes).
nccl::RoutedPlan layout_of(const FlowComm& flow, CollectiveKind kind, Bytes bytes,
                           const std::vector<std::int32_t>& ranks) {
  return nccl::route_plan(nccl::build_plan(flow.model(), kind, bytes, ranks), flow.topology());
}

// (2) Two all-reduces of the same size on the same group, started together. DGX H100 x 4, the
// group is GPU 3 of every node ({3, 11, 19, 27}): one GPU per node, so every ring edge leaves
// through NIC 3 (400 Gb/s = 50 GB/s) and each NIC carries the C channel flows of one edge per
// direction. Alone: alpha + B with B = C x W / 50e9 (W = wire bytes of an edge flow; the closed
// form's bandwidth time). Together every link carries both collectives' identical flows, so
// max-min gives each flow half of what it had: both end at alpha + 2B. Raw floor: a ring
// all-reduce moves 2(N-1)/N S = 1.5 S through each NIC, 1.5 x 2^28 / 50e9 = 8.05 ms for 256 MiB.
TEST(flowBackend, TwoAllReducesOnTheSameNicsTakeTwiceAsLong) {
  FlowComm flow(preset("dgx-h100", 4));
  const std::vector<std::int32_t> ranks = range(3, 4, 8);
  const Bytes S = Bytes{256} << 20;
  PlanBuilder b;
  const int g = b.group(ranks);
  const std::uint32_t c0 = b.collective(CollectiveKind::AllReduce, g, S);
  const std::uint32_t c1 = b.collective(CollectiveKind::AllReduce, g, S);
  const nccl::RoutedPlan rp = layout_of(flow, CollectiveKind::AllReduce, S, ranks);
  const SimTime alpha = seconds_to_ps(rp.latency_s);
  const double B = rp.bandwidth_s;
  EXPECT_GE(B, 1.5 * static_cast<double>(S) / 50e9);
  const auto alone = play(flow, b.plan, {{0, c0}});
  EXPECT_NEAR(static_cast<double>(alone[c0]), static_cast<double>(alpha) + B * 1e12, 200);
  FlowComm flow2(preset("dgx-h100", 4));
  const auto both = play(flow2, b.plan, {{0, c0}, {0, c1}});
  const double expect = static_cast<double>(alpha) + 2 * B * 1e12;
  EXPECT_NEAR(static_cast<double>(both[c0]), expect, 400);
  EXPECT_NEAR(static_cast<double>(both[c1]), expect, 400);
  // ~2x: the alpha (tens of us) is not doubled.
  const double ratio = static_cast<double>(both[c0]) / static_cast<double>(alone[c0]);
  EXPECT_GT(ratio, 1.95);
  EXPECT_LT(ratio, 2.0);
}

// (3) A DP all-reduce and a PP send on the same NIC. DGX H100 x 4; DP group {3, 11, 19, 27}
// (all-reduce of 256 MiB, ring, C channels, all through NIC 3 of each node); PP send 32 MiB from
// GPU 3 (node 0) to GPU 11 (node 1): one flow, GPU 3 -> PCIe -> NIC 3 -> rail-3 leaf -> NIC 3 ->
// GPU 11, the very links of the ring's 3 -> 11 edge. The send is started so that both join the
// sharing at the same instant T0 (the later of the two alphas).
// The shared bottleneck is node 0's NIC 3 uplink (cap = 50 GB/s; PCIe is 64 GB/s): C ring flows
// of W_r wire bytes and the send's W_s. Max-min: all C+1 get cap/(C+1); the other ring edges'
// flows get cap/C on their own NICs and end at T0 + C W_r / cap, the all-reduce's time alone.
//   send ends     T0 + (C+1) W_s / cap              (W_s < W_r: it leaves first)
//   then the C ring flows of the 3 -> 11 edge get cap/C and the uplink stays saturated, so
//   all-reduce    T0 + (C W_r + W_s) / cap = T0 + L / cap, L = the uplink's total wire bytes.
// So the all-reduce is slowed by exactly W_s / cap (the send's bytes at NIC rate) and the send by
// (C+1)x. Each re-dating rounds up by < 1 ps: tolerance 3 ps.
TEST(flowBackend, DpAllReduceAndPpSendShareTheNicMaxMinFairly) {
  const std::vector<std::int32_t> dp = range(3, 4, 8);
  const std::vector<std::int32_t> pp = {3, 11};
  const Bytes S_dp = Bytes{256} << 20, S_pp = Bytes{32} << 20;
  FlowComm flow(preset("dgx-h100", 4), {}, {kDpTraffic, kPpTraffic});
  PlanBuilder b;
  const int gdp = b.group(dp), gpp = b.group(pp);
  const std::uint32_t ar = b.collective(CollectiveKind::AllReduce, gdp, S_dp);
  const std::uint32_t send = b.collective(CollectiveKind::SendRecv, gpp, S_pp);

  const nccl::RoutedPlan r_ar = layout_of(flow, CollectiveKind::AllReduce, S_dp, dp);
  const nccl::RoutedPlan r_pp = layout_of(flow, CollectiveKind::SendRecv, S_pp, pp);
  ASSERT_EQ(r_pp.flows.size(), 1u);
  // The uplink: the send's link out of a NIC.
  const Topology& topo = flow.topology();
  LinkId up = 0;
  int found = 0;
  for (LinkId l : r_pp.flows[0].links) {
    if (link_kind(topo, l) == LinkKind::Nic && topo.graph()[topo.link(l).src].kind == VertexKind::Nic) {
      up = l;
      ++found;
    }
  }
  ASSERT_EQ(found, 1);
  EXPECT_EQ(link_name(topo, up), "node0.nic3->leaf3");
  const double cap = topo.link(up).bandwidth;
  EXPECT_DOUBLE_EQ(cap, 50e9);
  int C = 0;
  double L = 0, W_r_min = 1e300;
  for (const auto& f : r_ar.flows) {
    if (std::find(f.links.begin(), f.links.end(), up) == f.links.end()) continue;
    ++C;
    L += static_cast<double>(f.bytes);
    W_r_min = std::min(W_r_min, static_cast<double>(f.bytes));
    // the ring's 3 -> 11 edge takes exactly the send's route
    EXPECT_EQ(f.links, r_pp.flows[0].links);
  }
  const double W_s = static_cast<double>(r_pp.flows[0].bytes);
  ASSERT_GE(C, 2);
  ASSERT_LT(W_s, W_r_min);
  L += W_s;

  const SimTime a_ar = seconds_to_ps(r_ar.latency_s), a_pp = seconds_to_ps(r_pp.latency_s);
  const SimTime T0 = std::max(a_ar, a_pp);
  auto ps = [](double seconds) { return seconds * 1e12; };
  std::vector<std::pair<SimTime, std::uint32_t>> starts = {{T0 - a_ar, ar}, {T0 - a_pp, send}};
  std::sort(starts.begin(), starts.end());
  const auto end = play(flow, b.plan, starts);
  EXPECT_NEAR(static_cast<double>(end[send]), T0 + ps((C + 1) * W_s / cap), 3);
  EXPECT_NEAR(static_cast<double>(end[ar]), T0 + ps(L / cap), 3);

  // Alone, each takes its closed form: the all-reduce is slowed by W_s / cap, the send (C+1)x.
  FlowComm alone(preset("dgx-h100", 4));
  const auto a = play(alone, b.plan, {{T0 - a_ar, ar}});
  FlowComm alone2(preset("dgx-h100", 4));
  const auto p = play(alone2, b.plan, {{T0 - a_pp, send}});
  EXPECT_NEAR(static_cast<double>(end[ar] - a[ar]), ps(W_s / cap), 3);
  EXPECT_NEAR(static_cast<double>(end[send] - T0) / static_cast<double>(p[send] - T0), C + 1,
              1e-6);

  // The link report: the uplink is the busiest NIC link, its bytes split DP / PP exactly.
  const LinkReport rep = flow.link_report(end[ar]);
  const LinkKindUsage* nic = nullptr;
  for (const auto& k : rep.kinds) {
    if (k.kind == LinkKind::Nic) nic = &k;
  }
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->busiest, up);
  EXPECT_EQ(nic->busiest_name, "node0.nic3->leaf3");
  // busy from T0 to the end, at full rate throughout
  const double span_s = ps_to_seconds(end[ar]);
  EXPECT_NEAR(nic->busiest_utilization, L / cap / span_s, 1e-6);
  EXPECT_NEAR(nic->busiest_busy_fraction, static_cast<double>(end[ar] - T0) / end[ar], 1e-9);
  const net::LinkStats st = flow.network().link_stats(up, end[ar]);
  EXPECT_EQ(st.completed_bytes[kDpTraffic], static_cast<Bytes>(L - W_s));
  EXPECT_EQ(st.completed_bytes[kPpTraffic], static_cast<Bytes>(W_s));
  EXPECT_EQ(rep.payload_bytes[kPpTraffic], S_pp);
  EXPECT_EQ(rep.wire_bytes[kPpTraffic], r_pp.flows[0].bytes);
  // ring all-reduce payload: 2 (N-1) S over all edges
  EXPECT_EQ(rep.payload_bytes[kDpTraffic], 2 * 3 * S_dp);
  EXPECT_EQ(rep.collectives, 2u);
  const json j = rep.to_json();
  EXPECT_EQ(j["links"]["nic"]["busiest"], "node0.nic3->leaf3");
  EXPECT_EQ(j["traffic"]["pp"]["payload_bytes"], S_pp);
  EXPECT_TRUE(j["links"].contains("nvlink"));
  EXPECT_TRUE(j.contains("solver"));
}

// (4) A 2:1 oversubscribed fabric (cluster override "oversubscription": 2) halves the bus
// bandwidth of an all-reduce whose ring crosses the leaves on every edge. DGX H100 x 4 in SUs of
// 2 nodes (a leaf per rail and SU with 2 downlinks); 2:1 leaves the leaf one uplink of one NIC's
// bandwidth. Ranks in node order 0, 2, 1, 3: every ring edge crosses SUs, and both nodes of an SU
// send up through the same rail leaf: 2 NICs' worth of flows on 1 NIC's worth of uplink, so
// max-min gives each half its NIC rate and the bandwidth time doubles (the alpha, < 1 % of a
// 16 GiB all-reduce, does not). Non-blocking: destination-mod-k spreads them over the spines.
TEST(flowBackend, TwoToOneOversubscriptionHalvesCrossLeafBusBandwidth) {
  std::vector<std::int32_t> interleaved;
  for (int node : {0, 2, 1, 3}) {
    for (int g = 0; g < 8; ++g) interleaved.push_back(node * 8 + g);
  }
  const Bytes S = Bytes{16} << 30;
  FlowCommOptions o;
  o.nccl.algo = nccl::Algo::Ring;
  o.nccl.proto = nccl::Proto::Simple;
  o.nccl.launch_overhead = false;
  o.topology.nodes_per_leaf = 2;
  auto busbw = [&](double ratio, SimTime* closed_ps) {
    FlowComm flow(preset("dgx-h100", 4, {{"oversubscription", ratio}}), o);
    nccl::NcclAnalyticalComm closed(flow.model(), &flow.topology());
    *closed_ps = closed.duration(CollectiveKind::AllReduce, S, interleaved);
    PlanBuilder b;
    const std::uint32_t c = b.collective(CollectiveKind::AllReduce, b.group(interleaved), S);
    const SimTime t = play(flow, b.plan, {{0, c}})[c];
    return static_cast<double>(S) / ps_to_seconds(t) * nccl::bus_factor(CollectiveKind::AllReduce, 32);
  };
  SimTime closed1 = 0, closed2 = 0;
  const double full = busbw(1.0, &closed1);
  const double over = busbw(2.0, &closed2);
  EXPECT_NEAR(over / full, 0.5, 0.005);
  // and the flows agree with the closed form's fabric factor (2 here)
  EXPECT_NEAR(static_cast<double>(S) / ps_to_seconds(closed2) * 2 * 31 / 32, over, 1e-6 * over);
  EXPECT_NEAR(static_cast<double>(S) / ps_to_seconds(closed1) * 2 * 31 / 32, full, 1e-6 * full);
}

// FlowComm injects identical NCCL flows (same links, same bytes) as one weighted flow. The
// collective must end at the very picosecond the unmerged flows give on a bare network, each
// injected on its own: 8 DGX H100 (NVLS tree) and 16 nodes with NCCL's double binary tree forced
// (whose channels c and c + C/2 share rails, hence merge).
TEST(flowBackend, WeightedLayoutEndsWhenTheUnitFlowsEnd) {
  struct Case {
    int nodes;
    std::optional<nccl::Algo> algo;
  };
  for (const Case& k : {Case{8, std::nullopt}, Case{16, nccl::Algo::Tree}}) {
    FlowCommOptions o;
    o.nccl.algo = k.algo;
    FlowComm flow(preset("dgx-h100", k.nodes), o);
    const std::vector<std::int32_t> ranks = range(0, 8 * k.nodes);
    const Bytes S = Bytes{1} << 30;
    PlanBuilder b;
    const std::uint32_t c = b.collective(CollectiveKind::AllReduce, b.group(ranks), S);
    const SimTime end = play(flow, b.plan, {{0, c}})[c];

    const nccl::RoutedPlan rp = layout_of(flow, CollectiveKind::AllReduce, S, ranks);
    net::FlowNetwork bare;
    for (const TopoLink& l : flow.topology().links()) bare.add_link(l.bandwidth);
    for (std::size_t i = 0; i < rp.flows.size(); ++i) {
      bare.start_flow(0, rp.flows[i].links, rp.flows[i].bytes, seconds_to_ps(rp.latency_s), i);
    }
    SimTime last = 0;
    while (bare.next_event_time() != net::kNever) bare.advance_to(bare.next_event_time());
    std::vector<net::Completion> done;
    bare.drain_completed(done);
    ASSERT_EQ(done.size(), rp.flows.size());
    for (const auto& d : done) last = std::max(last, d.time);
    EXPECT_EQ(end, last) << k.nodes << " nodes";
    const LinkReport rep = flow.link_report(end);
    EXPECT_EQ(rep.flows, rp.flows.size());
    EXPECT_LT(rep.network_flows, rep.flows / 2) << "identical flows were merged";
  }
}

// Same input, same output, bit for bit; and the Full solver (the oracle) gives the same times.
TEST(flowBackend, DeterministicAndSolverModeIndependent) {
  auto run = [](net::SolverMode mode) {
    FlowCommOptions o;
    o.solver = mode;
    FlowComm flow(preset("dgx-h100", 4), o, {kDpTraffic, kTpTraffic, kPpTraffic});
    PlanBuilder b;
    const int dp = b.group(range(3, 4, 8)), tp = b.group(range(8, 8)), pp = b.group({3, 11});
    std::vector<std::pair<SimTime, std::uint32_t>> starts;
    for (int i = 0; i < 6; ++i) {
      starts.push_back({i * 1'000'000, b.collective(CollectiveKind::AllReduce, dp, (i + 1) << 22)});
      starts.push_back({i * 1'300'000, b.collective(CollectiveKind::AllGather, tp, (i + 3) << 20)});
      starts.push_back({i * 700'000, b.collective(CollectiveKind::SendRecv, pp, (i + 1) << 21)});
    }
    std::stable_sort(starts.begin(), starts.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    auto end = play(flow, b.plan, starts);
    const SimTime makespan = *std::max_element(end.begin(), end.end());
    return std::make_pair(end, flow.link_report(makespan).to_json().dump());
  };
  const auto a = run(net::SolverMode::Incremental);
  const auto b = run(net::SolverMode::Incremental);
  const auto full = run(net::SolverMode::Full);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
  EXPECT_EQ(a.first, full.first);
}

// A collective of one rank or of zero bytes has no flows: it ends after the closed form's time
// (0 here), through the network's clock, like any other.
TEST(flowBackend, CollectivesWithoutFlows) {
  FlowComm flow(preset("dgx-h100", 1));
  nccl::NcclAnalyticalComm closed(flow.model(), &flow.topology());
  PlanBuilder b;
  const std::uint32_t one = b.collective(CollectiveKind::AllReduce, b.group({5}), 1 << 20);
  const std::uint32_t zero = b.collective(CollectiveKind::AllGather, b.group(range(0, 8)), 0);
  const auto end = play(flow, b.plan, {{100, one}, {200, zero}});
  EXPECT_EQ(end[one], 100 + closed.duration(CollectiveKind::AllReduce, 1 << 20, range(5, 1)));
  EXPECT_EQ(end[zero], 200 + closed.duration(CollectiveKind::AllGather, 0, range(0, 8)));
}

// The engine drives FlowComm: a tiny GPT (h = 64, L = 2) trained data-parallel over 16 GPUs (2
// DGX H100), ZeRO-1 without overlap: one gradient all-reduce per step and one parameter
// all-gather, one after the other on one stream: nothing contends, so the step takes what it
// takes with NcclAnalyticalComm, op for op, to the rounding of each collective (a few ps).
// The folded plan (one replica standing for all 16) gives the same step on FlowComm too.
json tiny_scenario(int gpus) {
  return {{"model", testing_plan::tiny_model()},
          {"cluster", {{"preset", "dgx-h100"}, {"num_gpus", gpus}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2}}},
          {"zero", {{"stage", 1}, {"overlap_comm", false}}}};
}

TEST(flowBackend, EngineStepMatchesTheAnalyticalBackendWithoutContention) {
  const Scenario s = resolve_scenario(tiny_scenario(16));
  const TrainingPlan tp = build_training_plan(s, false);
  ASSERT_EQ(tp.plan.num_ranks, 16);
  ASSERT_FALSE(tp.plan.collectives.empty());
  std::vector<std::uint8_t> classes;
  for (GroupKind k : tp.group_kind) classes.push_back(static_cast<std::uint8_t>(k));
  FlowComm flow(s.cluster, {}, classes);
  nccl::NcclAnalyticalComm closed(flow.model(), &flow.topology());
  ComputeCost compute_a(s, tp), compute_b(s, tp);
  const EngineResult rf = run_engine(tp.plan, compute_a, flow);
  const EngineResult rc = run_engine(tp.plan, compute_b, closed);
  // Tolerance: the rounding bound of test (1), summed over the collectives of one rank (they run
  // one after another on the critical path).
  double tol = 0;
  for (const Collective& c : tp.plan.collectives) {
    if (tp.plan.ops[tp.plan.members[c.member_begin]].rank != 0) continue;
    tol += rounding_tolerance_ps(
        flow, c.kind, c.bytes,
        std::span<const std::int32_t>(tp.plan.group_members(c.group), tp.plan.group_size(c.group)),
        0);
  }
  EXPECT_GT(rc.makespan, 0);
  EXPECT_NEAR(static_cast<double>(rf.makespan), static_cast<double>(rc.makespan), tol);
  for (OpId op = 0; op < tp.plan.ops.size(); ++op) {
    ASSERT_NEAR(static_cast<double>(rf.end[op]), static_cast<double>(rc.end[op]), tol) << op;
  }
  const LinkReport rep = flow.link_report(rf.makespan);
  EXPECT_EQ(rep.collectives, tp.plan.collectives.size());
  EXPECT_GT(rep.payload_bytes[kDpTraffic], 0);
  EXPECT_EQ(rep.payload_bytes[kTpTraffic] + rep.payload_bytes[kPpTraffic], 0);
  EXPECT_EQ(flow.in_flight(), 0u);

  const TrainingPlan folded = build_training_plan(s, true);
  ASSERT_TRUE(folded.plan.folded());
  FlowComm flow_f(s.cluster);
  ComputeCost compute_f(s, folded);
  const EngineResult rff = run_engine(folded.plan, compute_f, flow_f);
  EXPECT_EQ(rff.makespan, rf.makespan);
}

}  // namespace
}  // namespace zerosim

namespace zerosim {
namespace {

// Folded plans inject the other replicas' copies of collectives that reach the fabric. 8 DGX H100
// on a clos fabric (top-of-rack leaves of 4 nodes, all 32 NICs each), 16:1 oversubscribed: a
// leaf keeps 2 uplinks of 50 GB/s. TP 8 inside each node, PP 2 (stage 0 on nodes 0-3 = leaf 0,
// stage 1 on nodes 4-7 = leaf 1), DP 4. Replica d's pipeline sends go from node d to node 4 + d,
// 8 flows (one per NIC), up the uplink (4 + d) mod 2: replicas 0 and 2 share one, 1 and 3 the
// other. Folded without copies, replica 0's 8 sends have their uplink alone; in the real step
// (unfolded, every rank played) they share it with replica 2's 8. With the copies the folded
// step is the unfolded one; without them it is faster.
TEST(flowBackend, FoldedStepInjectsTheOtherReplicasFabricTraffic) {
  json doc = {{"model",
               {{"num_layers", 4},
                {"hidden_size", 1024},
                {"num_attention_heads", 8},
                {"vocab_size", 1000},
                {"seq_length", 1024}}},
              {"cluster",
               {{"preset", "dgx-h100"}, {"nodes", 8}, {"topology", "clos"},
                {"oversubscription", 16}}},
              {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 4}}},
              // Whole tensors between the stages (not split over TP), so that the sends load
              // the fabric.
              {"parallel", {{"tp", 8}, {"pp", 2}, {"scatter_gather_tensors_in_pipeline", false}}},
              {"zero", {{"stage", 1}}},
              {"sim", {{"network", "flow"}, {"ranks", "folded"}}},
              // No host floor on the layers: the fabric's share of the step stays large.
              {"fitted", {{"layer_host_op_time", "0us"}}}};
  const Scenario folded_s = resolve_scenario(doc);
  ASSERT_EQ(folded_s.parallel.dp, 4);
  const Simulation folded = simulate_step(folded_s);
  ASSERT_TRUE(folded.plan.plan.folded());
  doc["sim"]["ranks"] = "all";
  const Simulation all = simulate_step(resolve_scenario(doc));
  ASSERT_FALSE(all.plan.plan.folded());
  EXPECT_NEAR(folded.report.step_time_s, all.report.step_time_s, 1e-9 * all.report.step_time_s);
  EXPECT_NEAR(folded.report.breakdown.exposed_by_group[2], all.report.breakdown.exposed_by_group[2],
              1e-9);
  // 3 other replicas' copies of each pipeline send (the DP collectives already span all).
  EXPECT_GT(folded.network["replica_copies"].get<std::uint64_t>(), 0u);

  // The same folded plan without the copies misses the contention.
  std::vector<std::uint8_t> classes;
  for (GroupKind k : folded.plan.group_kind) classes.push_back(static_cast<std::uint8_t>(k));
  FlowComm alone(folded_s.cluster, {}, classes);
  ComputeCost compute(folded_s, folded.plan);
  const EngineResult r = run_engine(folded.plan.plan, compute, alone);
  EXPECT_LT(ps_to_seconds(r.makespan), 0.9 * all.report.step_time_s);
}

}  // namespace
}  // namespace zerosim

namespace zerosim {
namespace {

// Own vs Slowest completion of a folded collective with copies. 4 DGX H100, SUs of 3 nodes
// (SU 0 = nodes 0-2, SU 1 = node 3), 2:1. Two replicas of 2 nodes (rank stride 16). The folded
// send {3, 11} goes node 0 -> node 1 inside SU 0's rail-3 leaf at the NIC's 50 GB/s; replica
// 1's copy {19, 27} goes node 2 -> node 3 across the SUs, at the slowest link of its route
// (an oversubscribed leaf-spine link). Own: the collective ends with its own copy, at alpha +
// W / 50e9; Slowest: with the copy, at alpha + W / (that link's bandwidth).
TEST(flowBackend, FoldedCopiesEndWithTheOwnCopyOrTheSlowest) {
  const Bytes S = Bytes{64} << 20;
  Plan p;
  p.num_ranks = 2;
  p.group_ranks = {0, 1};
  p.group_begin = {0, 2};
  p.group_names = {"pp"};
  p.real_rank = {3, 11};
  p.cost_begin = {0, 2};
  p.cost_ranks = {3, 11};
  Collective c;
  c.kind = CollectiveKind::SendRecv;
  c.group = 0;
  c.bytes = S;
  p.collectives.push_back(c);
  ASSERT_TRUE(p.folded());
  auto run = [&](ReplicaCompletion mode, nccl::RoutedPlan* own, nccl::RoutedPlan* copy) {
    FlowCommOptions o;
    o.topology.nodes_per_leaf = 3;
    o.replicas = 2;
    o.replica_rank_stride = 16;
    o.replica_completion = mode;
    FlowComm flow(preset("dgx-h100", 4, {{"oversubscription", 2}}), o);
    *own = layout_of(flow, CollectiveKind::SendRecv, S, {3, 11});
    *copy = layout_of(flow, CollectiveKind::SendRecv, S, {19, 27});
    const SimTime end = play(flow, p, {{0, 0}})[0];
    EXPECT_EQ(flow.link_report(end).replica_copies, 1u);
    return static_cast<double>(end);
  };
  nccl::RoutedPlan own, copy;
  const double t_own = run(ReplicaCompletion::Own, &own, &copy);
  const double t_slow = run(ReplicaCompletion::Slowest, &own, &copy);
  ASSERT_EQ(own.flows.size(), 1u);
  ASSERT_EQ(copy.flows.size(), 1u);
  FlowCommOptions o;
  o.topology.nodes_per_leaf = 3;
  const FlowComm probe(preset("dgx-h100", 4, {{"oversubscription", 2}}), o);
  const Topology& topo = probe.topology();
  double slowest_link = 1e300;
  for (LinkId l : copy.flows[0].links) slowest_link = std::min(slowest_link, topo.link(l).bandwidth);
  ASSERT_LT(slowest_link, 50e9);
  const double alpha = static_cast<double>(seconds_to_ps(own.latency_s));
  EXPECT_NEAR(t_own, alpha + static_cast<double>(own.flows[0].bytes) / 50e9 * 1e12, 3);
  EXPECT_NEAR(t_slow, alpha + static_cast<double>(copy.flows[0].bytes) / slowest_link * 1e12, 3);
}

}  // namespace
}  // namespace zerosim
