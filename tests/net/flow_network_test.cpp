// Max-min sharing identities and timelines on tiny networks, each derived by hand in a comment.
// Every test runs under both solver modes. Units: capacities in bytes/s, times in ps
// (1 s = 1e12 ps).
#include "sim/net/flow_network.h"

#include <gtest/gtest.h>

#include <ostream>
#include <stdexcept>
#include <vector>

namespace zerosim::net {
namespace {

}  // namespace

void PrintTo(SolverMode m, std::ostream* os) {
  *os << (m == SolverMode::Full ? "Full" : "Incremental");
}

namespace {

class FlowNetworkTest : public ::testing::TestWithParam<SolverMode> {
 protected:
  FlowNetwork net{GetParam()};

  // Runs until nothing is pending and returns every completion.
  std::vector<Completion> run_to_idle() {
    while (net.next_event_time() != kNever) net.advance_to(net.next_event_time());
    std::vector<Completion> done;
    net.drain_completed(done);
    return done;
  }
  FlowId start(SimTime now, std::vector<LinkId> route, Bytes bytes, SimTime latency,
               std::uint64_t tag, std::uint8_t cls = 0) {
    return net.start_flow(now, route, bytes, latency, tag, cls);
  }
};

// One 10 GB/s link, two 1 GB flows from t = 0: each gets 10e9 / 2 = 5e9 B/s and needs
// 1e9 / 5e9 = 0.2 s = 2e11 ps. They end at the same picosecond, reported together in start order.
TEST_P(FlowNetworkTest, TwoFlowsOnOneLinkGetHalfEach) {
  const LinkId l = net.add_link(10e9);
  const FlowId a = start(0, {l}, 1'000'000'000, 0, 1);
  const FlowId b = start(0, {l}, 1'000'000'000, 0, 2);
  EXPECT_EQ(net.next_event_time(), 0);  // zero latency: they join at the next advance to t = 0
  net.advance_to(0);
  EXPECT_EQ(net.flow_rate(a), 5e9);
  EXPECT_EQ(net.flow_rate(b), 5e9);
  EXPECT_EQ(net.link_load(l), 10e9);
  EXPECT_EQ(net.next_event_time(), 200'000'000'000);
  const auto done = run_to_idle();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(done[1].tag, 2u);
  EXPECT_EQ(done[0].time, 200'000'000'000);
  EXPECT_EQ(done[1].time, 200'000'000'000);
  EXPECT_EQ(net.active_flows(), 0u);
  EXPECT_EQ(net.flow_phase(a), FlowPhase::Finished);
}

// L1 = 12 GB/s carries f1, f2, f3; L2 = 2 GB/s carries f3 too.
// Progressive filling: shares L1 = 12/3 = 4, L2 = 2/1 = 2 -> L2 is the bottleneck, f3 = 2 GB/s.
// L1 then has 12 - 2 = 10 GB/s for f1 and f2: 5 GB/s each (not 4: f3 leaves its share to them).
// Timeline with 1 GB each: f1, f2 end at 1e9 / 5e9 = 0.2 s = 2e11 ps. f3 stays limited by L2
// (L1 alone would now give it 12 GB/s), so it ends at 1e9 / 2e9 = 0.5 s = 5e11 ps.
TEST_P(FlowNetworkTest, FlowLimitedElsewhereLeavesItsShareToTheOthers) {
  const LinkId l1 = net.add_link(12e9);
  const LinkId l2 = net.add_link(2e9);
  const FlowId f1 = start(0, {l1}, 1'000'000'000, 0, 1);
  const FlowId f2 = start(0, {l1}, 1'000'000'000, 0, 2);
  const FlowId f3 = start(0, {l1, l2}, 1'000'000'000, 0, 3);
  net.advance_to(0);
  EXPECT_EQ(net.flow_rate(f3), 2e9);
  EXPECT_EQ(net.flow_rate(f1), 5e9);
  EXPECT_EQ(net.flow_rate(f2), 5e9);
  const auto done = run_to_idle();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].time, 200'000'000'000);
  EXPECT_EQ(done[1].time, 200'000'000'000);
  EXPECT_EQ(done[2].tag, 3u);
  EXPECT_EQ(done[2].time, 500'000'000'000);
}

// The parking lot: L1 and L2 both 10 GB/s; "long" crosses both, f1 only L1, f2 and f3 only L2.
// Shares: L1 = 10/2 = 5, L2 = 10/3 = 3.33 -> L2 first: long = f2 = f3 = 10/3 GB/s.
// L1 left with 10 - 10/3 = 20/3 GB/s for f1 alone: f1 = 6.67 GB/s, more than a naive half.
// f1 carries 100 MB: 1e8 / (20e9/3) = 0.015 s = 1.5e10 ps. In doubles 1e20 / (1e10 - 1e10/3)
// is 15000000000.000002, an ulp above the paper value; the completion must still be exactly
// 1.5e10 ps (the 1e-12 relative slack of the ceiling), not 1.5e10 + 1.
TEST_P(FlowNetworkTest, ParkingLotMaxMin) {
  const LinkId l1 = net.add_link(10e9);
  const LinkId l2 = net.add_link(10e9);
  const FlowId lng = start(0, {l1, l2}, 1'000'000'000, 0, 0);
  const FlowId f1 = start(0, {l1}, 100'000'000, 0, 1);
  const FlowId f2 = start(0, {l2}, 1'000'000'000, 0, 2);
  const FlowId f3 = start(0, {l2}, 1'000'000'000, 0, 3);
  net.advance_to(0);
  EXPECT_DOUBLE_EQ(net.flow_rate(lng), 10e9 / 3);
  EXPECT_DOUBLE_EQ(net.flow_rate(f2), 10e9 / 3);
  EXPECT_DOUBLE_EQ(net.flow_rate(f3), 10e9 / 3);
  EXPECT_DOUBLE_EQ(net.flow_rate(f1), 20e9 / 3);
  EXPECT_DOUBLE_EQ(net.link_load(l1), 10e9);
  EXPECT_DOUBLE_EQ(net.link_load(l2), 10e9);
  EXPECT_EQ(net.next_event_time(), 15'000'000'000);
  net.advance_to(15'000'000'000);
  std::vector<Completion> done;
  net.drain_completed(done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(done[0].time, 15'000'000'000);
}

// 100 GB/s link, 1 GB flow, latency 2 us = 2e6 ps: it holds no bandwidth for 2e6 ps, then moves
// 1e9 B at 1e11 B/s = 0.01 s = 1e10 ps: completion = 2e6 + 1e10 = 10'002'000'000 ps.
// A second flow on the same link with latency 2e10 ps joins after the first is gone, so neither
// slows the other: it ends at 2e10 + 1e10 = 3e10 ps.
TEST_P(FlowNetworkTest, LatencyIsAPhaseThenBandwidth) {
  const LinkId l = net.add_link(100e9);
  const FlowId a = start(0, {l}, 1'000'000'000, 2'000'000, 1);
  start(0, {l}, 1'000'000'000, 20'000'000'000, 2);
  net.advance_to(1'000'000);
  EXPECT_EQ(net.flow_phase(a), FlowPhase::Latency);
  EXPECT_EQ(net.flow_rate(a), 0.0);
  EXPECT_EQ(net.link_load(l), 0.0);
  EXPECT_EQ(net.flow_remaining(a, 1'000'000), 1e9);
  EXPECT_EQ(net.next_event_time(), 2'000'000);
  net.advance_to(2'000'000);
  EXPECT_EQ(net.flow_phase(a), FlowPhase::Sharing);
  EXPECT_EQ(net.flow_rate(a), 100e9);
  const auto done = run_to_idle();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].time, 10'002'000'000);
  EXPECT_EQ(done[1].time, 30'000'000'000);
  // busy while sharing only: 1e10 + 1e10 ps, the latencies excluded
  EXPECT_EQ(net.link_stats(l, net.now()).busy_ps, 20'000'000'000);
}

// Zero bytes on a link, and 1 GB with an empty route (inside one GPU): both end when their
// latency does (5e5 ps and 7 ps) and never make the link busy.
TEST_P(FlowNetworkTest, ZeroBytesAndEmptyRouteCompleteAfterLatency) {
  const LinkId l = net.add_link(1e9);
  start(0, {l}, 0, 500'000, 1);
  start(0, {}, 1'000'000'000, 7, 2);
  const auto done = run_to_idle();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].tag, 2u);
  EXPECT_EQ(done[0].time, 7);
  EXPECT_EQ(done[1].tag, 1u);
  EXPECT_EQ(done[1].time, 500'000);
  EXPECT_EQ(net.link_stats(l, net.now()).busy_ps, 0);
  EXPECT_EQ(net.counters().solves, 0u);
}

// 100 GB/s link. A: 1 GB from t = 0, alone at 1e11 B/s. B: 1 GB from t = 5e9 ps (0.005 s).
// At 5e9 A has moved 1e11 * 0.005 = 5e8 B, 5e8 left; both now get 5e10 B/s.
// A needs 5e8 / 5e10 = 0.01 s = 1e10 ps more: A ends at 5e9 + 1e10 = 1.5e10 ps.
// By then B has moved 5e10 * 0.01 = 5e8 B; its last 5e8 B go at 1e11 B/s in 5e9 ps:
// B ends at 1.5e10 + 5e9 = 2e10 ps.
TEST_P(FlowNetworkTest, FlowJoiningHalfwayDelaysTheFirst) {
  const LinkId l = net.add_link(100e9);
  const FlowId a = start(0, {l}, 1'000'000'000, 0, 1);
  net.advance_to(0);
  EXPECT_EQ(net.flow_completion(a), 10'000'000'000);  // alone: 1e9 / 1e11 s
  start(5'000'000'000, {l}, 1'000'000'000, 0, 2);
  net.advance_to(5'000'000'000);
  EXPECT_EQ(net.flow_remaining(a, 5'000'000'000), 5e8);
  EXPECT_EQ(net.flow_completion(a), 15'000'000'000);
  const auto done = run_to_idle();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(done[0].time, 15'000'000'000);
  EXPECT_EQ(done[1].tag, 2u);
  EXPECT_EQ(done[1].time, 20'000'000'000);
}

// 10 GB/s shared by three 1 GB flows: 1e10/3 B/s each, 1e9 / (1e10/3) = 0.3 s = 3e11 ps, all
// three at the same picosecond although the rate is not exact in doubles.
TEST_P(FlowNetworkTest, ThirdsLandOnThePaperPicosecond) {
  const LinkId l = net.add_link(10e9);
  for (std::uint64_t tag = 0; tag < 3; ++tag) start(0, {l}, 1'000'000'000, 0, tag);
  const auto done = run_to_idle();
  ASSERT_EQ(done.size(), 3u);
  for (const Completion& c : done) EXPECT_EQ(c.time, 300'000'000'000);
}

// 10 GB/s link, 1 GB flow. At 5e10 ps (0.05 s) it has moved 5e8 B; the link drops to 5 GB/s, so
// the last 5e8 B take 0.1 s = 1e11 ps: completion 1.5e11 ps. A zero capacity stalls a flow
// (no completion date) until the capacity comes back.
TEST_P(FlowNetworkTest, DegradedLinkSlowsItsFlows) {
  const LinkId l = net.add_link(10e9);
  start(0, {l}, 1'000'000'000, 0, 1);
  net.advance_to(0);
  net.set_link_capacity(50'000'000'000, l, 5e9);
  auto done = run_to_idle();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].time, 150'000'000'000);

  // Stall: 1 GB at 10 GB/s from 2e11; failed at 2.5e11 (5e8 B moved, 5e8 left); restored at
  // 4e11 -> 5e8 B at 1e10 B/s = 5e10 ps: completion 4.5e11 ps.
  net.set_link_capacity(200'000'000'000, l, 10e9);
  start(200'000'000'000, {l}, 1'000'000'000, 0, 2);
  net.advance_to(200'000'000'000);
  net.set_link_capacity(250'000'000'000, l, 0);
  EXPECT_EQ(net.next_event_time(), kNever);
  EXPECT_EQ(net.active_flows(), 1u);
  net.set_link_capacity(400'000'000'000, l, 10e9);
  done = run_to_idle();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].time, 450'000'000'000);
}

// Link A is 10 GB/s. DP flow (class 0) 1 GB and TP flow (class 2) 3 GB from t = 0 share it at
// 5 GB/s: DP ends at 0.2 s = 2e11 ps; TP has 3e9 - 1e9 = 2e9 B left at 10 GB/s: 0.2 s more,
// ends at 4e11. Idle until 5e11, then a PP flow (class 1) of 1 GB: 0.1 s, ends at 6e11.
// Busy: 4e11 + 1e11 = 5e11 ps. Completed bytes by class: {1e9, 1e9, 3e9, 0}; carried 5e9 B.
// Link B is never used.
TEST_P(FlowNetworkTest, LinkStatsSplitByTrafficClass) {
  const LinkId a = net.add_link(10e9);
  const LinkId b = net.add_link(10e9);
  start(0, {a}, 1'000'000'000, 0, 1, 0);
  start(0, {a}, 3'000'000'000, 0, 2, 2);
  // Mid-run at 1e11: 1e11 ps busy, 1e10 B/s * 0.1 s = 1e9 B carried, nothing completed yet.
  net.advance_to(100'000'000'000);
  LinkStats mid = net.link_stats(a, 100'000'000'000);
  EXPECT_EQ(mid.busy_ps, 100'000'000'000);
  EXPECT_DOUBLE_EQ(mid.carried_bytes, 1e9);
  EXPECT_EQ(mid.completed_bytes[0], 0);

  start(500'000'000'000, {a}, 1'000'000'000, 0, 3, 1);
  run_to_idle();
  const LinkStats s = net.link_stats(a, net.now());
  EXPECT_EQ(net.now(), 600'000'000'000);
  EXPECT_EQ(s.busy_ps, 500'000'000'000);
  EXPECT_EQ(s.completed_bytes[0], 1'000'000'000);
  EXPECT_EQ(s.completed_bytes[1], 1'000'000'000);
  EXPECT_EQ(s.completed_bytes[2], 3'000'000'000);
  EXPECT_EQ(s.completed_bytes[3], 0);
  EXPECT_DOUBLE_EQ(s.carried_bytes, 5e9);
  const LinkStats idle = net.link_stats(b, net.now());
  EXPECT_EQ(idle.busy_ps, 0);
  EXPECT_EQ(idle.carried_bytes, 0.0);
}

// Advancing past several events processes them in order at their own picoseconds:
// 1 GB flows alone on 10 GB/s links end at 1e11 ps; the one with latency 3e11 ends at 4e11.
TEST_P(FlowNetworkTest, AdvancePastSeveralEvents) {
  const LinkId a = net.add_link(10e9);
  const LinkId b = net.add_link(10e9);
  start(0, {a}, 1'000'000'000, 300'000'000'000, 2);
  start(0, {b}, 1'000'000'000, 0, 1);
  net.advance_to(1'000'000'000'000);
  std::vector<Completion> done;
  net.drain_completed(done);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(done[0].time, 100'000'000'000);
  EXPECT_EQ(done[1].tag, 2u);
  EXPECT_EQ(done[1].time, 400'000'000'000);
  EXPECT_EQ(net.now(), 1'000'000'000'000);
}

// Links L0..L3, flows x = {L0, L1}, y = {L1, L2}, z = {L3}. A new flow on L0 reaches x, hence
// L1, hence y and L2: its component is 3 flows on 3 links; z and L3 are left alone in
// incremental mode, while the full solver visits all 4 flows and 4 links.
TEST_P(FlowNetworkTest, SelectiveUpdateSolvesOnlyTheTouchedComponent) {
  const LinkId l0 = net.add_link(1e9);
  const LinkId l1 = net.add_link(1e9);
  const LinkId l2 = net.add_link(1e9);
  const LinkId l3 = net.add_link(1e9);
  start(0, {l0, l1}, 1'000'000'000, 0, 1);
  start(0, {l1, l2}, 1'000'000'000, 0, 2);
  const FlowId z = start(0, {l3}, 1'000'000'000, 0, 3);
  net.advance_to(0);
  const SimTime z_done = net.flow_completion(z);
  start(1000, {l0}, 1'000'000'000, 0, 4);
  net.advance_to(1000);
  if (GetParam() == SolverMode::Incremental) {
    EXPECT_EQ(net.counters().last_solve_flows, 3u);
    EXPECT_EQ(net.counters().last_solve_links, 3u);
  } else {
    EXPECT_EQ(net.counters().last_solve_flows, 4u);
    EXPECT_EQ(net.counters().last_solve_links, 4u);
  }
  EXPECT_EQ(net.flow_completion(z), z_done);
}

TEST_P(FlowNetworkTest, MisuseThrows) {
  EXPECT_THROW(net.add_link(0), std::invalid_argument);
  EXPECT_THROW(net.add_link(-1), std::invalid_argument);
  EXPECT_THROW(net.add_link(1.0 / 0.0), std::invalid_argument);
  const LinkId l = net.add_link(1e9);
  EXPECT_THROW(start(0, {l, 7}, 1, 0, 0), std::invalid_argument);
  EXPECT_THROW(start(0, {l, l}, 1, 0, 0), std::invalid_argument);
  EXPECT_THROW(start(0, {l}, -1, 0, 0), std::invalid_argument);
  EXPECT_THROW(start(0, {l}, 1, -1, 0), std::invalid_argument);
  EXPECT_THROW(start(0, {l}, 1, 0, 0, kTrafficClasses), std::invalid_argument);
  EXPECT_THROW(net.set_link_capacity(0, l, -1), std::invalid_argument);
  net.advance_to(100);
  EXPECT_THROW(net.advance_to(99), std::invalid_argument);
  EXPECT_THROW(start(99, {l}, 1, 0, 0), std::invalid_argument);
  EXPECT_EQ(net.active_flows(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BothSolvers, FlowNetworkTest,
                         ::testing::Values(SolverMode::Incremental, SolverMode::Full),
                         [](const auto& info) {
                           return info.param == SolverMode::Full ? "Full" : "Incremental";
                         });

}  // namespace
}  // namespace zerosim::net
