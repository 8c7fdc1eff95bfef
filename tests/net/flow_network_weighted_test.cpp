// Weighted flows, rate caps and endless flows (flow_network.h, "Weighted flows and rate caps"):
//  - closed-form max-min answers on one or two links, derived in the comments;
//  - a flow of weight k is bit for bit k identical unit flows (rates, completion picoseconds, link
//    loads and statistics), on random sequences, in both solver modes; the unweighted side puts
//    hundreds of flows on one date, where the weighted side puts a few;
//  - with caps, the rates equal an independent brute-force water-filling in which every cap is a
//    private link of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "sim/net/flow_network.h"

namespace zerosim::net {
namespace {

constexpr SimTime kS = 1'000'000'000'000;  // ps per second

std::vector<Completion> run_to_idle(FlowNetwork& net) {
  while (net.next_event_time() != kNever) net.advance_to(net.next_event_time());
  std::vector<Completion> done;
  net.drain_completed(done);
  return done;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

class WeightedTest : public ::testing::TestWithParam<SolverMode> {
 protected:
  FlowNetwork net{GetParam()};
};

// One 10 GB/s link; A capped at 2 GB/s, B uncapped. The cap offers 2 < 10/2, so A is fixed at 2
// and B takes the rest, 8. 1 GB at 8 GB/s ends at 0.125 s; then A alone is still held at 2 GB/s:
// it has moved 0.25 GB, 0.75 GB left at 2 GB/s = 0.375 s more, so it ends at 0.5 s (1 GB / 2).
TEST_P(WeightedTest, CapBelowTheFairShareLeavesTheRestToTheOthers) {
  const LinkId l = net.add_link(10e9);
  const FlowId a = net.start_flow(0, std::vector<LinkId>{l}, 1'000'000'000, 0, 1, 0, 1, 2e9);
  const FlowId b = net.start_flow(0, std::vector<LinkId>{l}, 1'000'000'000, 0, 2);
  net.advance_to(0);
  EXPECT_EQ(net.flow_rate(a), 2e9);
  EXPECT_EQ(net.flow_rate(b), 8e9);
  EXPECT_EQ(net.link_load(l), 10e9);
  const auto done = run_to_idle(net);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].tag, 2u);
  EXPECT_EQ(done[0].time, kS / 8);
  EXPECT_EQ(done[1].tag, 1u);
  EXPECT_EQ(done[1].time, kS / 2);
}

// The same link, A capped at 6 GB/s: the fair share 5 is below the cap, which never binds.
TEST_P(WeightedTest, CapAboveTheFairShareChangesNothing) {
  const LinkId l = net.add_link(10e9);
  const FlowId a = net.start_flow(0, std::vector<LinkId>{l}, 1'000'000'000, 0, 1, 0, 1, 6e9);
  const FlowId b = net.start_flow(0, std::vector<LinkId>{l}, 1'000'000'000, 0, 2);
  net.advance_to(0);
  EXPECT_EQ(net.flow_rate(a), 5e9);
  EXPECT_EQ(net.flow_rate(b), 5e9);
}

// A cap equal to the fair share is a tie between the cap and the link, fixed in one step: 5 each.
// Then on two links in series (L0 10 GB/s, L1 4 GB/s): C on both, capped at 3; D on L0 only;
// E on L1 only. L1 offers 4/2 = 2 < 3, so C and E get 2, and D the 8 left on L0.
TEST_P(WeightedTest, CapTiesAndCapsBehindAnotherBottleneck) {
  const LinkId l = net.add_link(10e9);
  const FlowId a = net.start_flow(0, std::vector<LinkId>{l}, 1'000'000'000, 0, 1, 0, 1, 5e9);
  const FlowId b = net.start_flow(0, std::vector<LinkId>{l}, 1'000'000'000, 0, 2);
  net.advance_to(0);
  EXPECT_EQ(net.flow_rate(a), 5e9);
  EXPECT_EQ(net.flow_rate(b), 5e9);

  FlowNetwork n2(GetParam());
  const LinkId l0 = n2.add_link(10e9);
  const LinkId l1 = n2.add_link(4e9);
  const FlowId c = n2.start_flow(0, std::vector<LinkId>{l0, l1}, 1'000'000, 0, 1, 0, 1, 3e9);
  const FlowId d = n2.start_flow(0, std::vector<LinkId>{l0}, 1'000'000, 0, 2);
  const FlowId e = n2.start_flow(0, std::vector<LinkId>{l1}, 1'000'000, 0, 3);
  n2.advance_to(0);
  EXPECT_EQ(n2.flow_rate(c), 2e9);
  EXPECT_EQ(n2.flow_rate(e), 2e9);
  EXPECT_EQ(n2.flow_rate(d), 8e9);
}

// A 12 GB/s link, a weight-3 flow and a unit flow: four unit flows, 3 GB/s each; the link's load
// is 12 GB/s. 3 GB per unit flow at 3 GB/s: all end at 1 s; the weighted flow is one completion
// of weight 3, and the link is credited 3 x 3 GB + 3 GB of class 1 and 2.
TEST_P(WeightedTest, WeightedFlowSharesAsItsWeight) {
  const LinkId l = net.add_link(12e9);
  const FlowId w = net.start_flow(0, std::vector<LinkId>{l}, 3'000'000'000, 0, 7, 1, 3);
  const FlowId u = net.start_flow(0, std::vector<LinkId>{l}, 3'000'000'000, 0, 8, 2);
  net.advance_to(0);
  EXPECT_EQ(net.flow_rate(w), 3e9);
  EXPECT_EQ(net.flow_rate(u), 3e9);
  EXPECT_EQ(net.link_load(l), 12e9);
  EXPECT_EQ(net.link_flow_count(l), 2u);
  const auto done = run_to_idle(net);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].tag, 7u);
  EXPECT_EQ(done[0].weight, 3u);
  EXPECT_EQ(done[0].time, kS);
  EXPECT_EQ(done[1].weight, 1u);
  EXPECT_EQ(done[1].time, kS);
  const LinkStats s = net.link_stats(l, net.now());
  EXPECT_EQ(s.completed_bytes[1], 9'000'000'000);
  EXPECT_EQ(s.completed_bytes[2], 3'000'000'000);
  EXPECT_NEAR(s.carried_bytes, 12e9, 1.0);
}

// An endless flow capped at 4 GB/s and a 6 GB flow on a 10 GB/s link: 4 and 6 GB/s, the finite
// flow ends at 1 s; the endless one stays at its cap (a link alone would offer 10), never
// completes, and has moved 4 GB/s x 3 s = 12 GB at 3 s. Uncapped, it takes the whole link.
TEST_P(WeightedTest, EndlessFlowNeverCompletes) {
  const LinkId l = net.add_link(10e9);
  const FlowId bg = net.start_flow(0, std::vector<LinkId>{l}, kEndlessBytes, 0, 1, 3, 1, 4e9);
  const FlowId f = net.start_flow(0, std::vector<LinkId>{l}, 6'000'000'000, 0, 2);
  net.advance_to(0);
  EXPECT_EQ(net.flow_rate(bg), 4e9);
  EXPECT_EQ(net.flow_rate(f), 6e9);
  EXPECT_EQ(net.flow_completion(bg), kNever);
  EXPECT_EQ(net.next_event_time(), kS);
  net.advance_to(kS);
  EXPECT_EQ(net.next_event_time(), kNever);
  EXPECT_EQ(net.flow_rate(bg), 4e9);
  net.advance_to(3 * kS);
  EXPECT_EQ(net.flow_phase(bg), FlowPhase::Sharing);
  EXPECT_DOUBLE_EQ(net.flow_delivered(bg, 3 * kS), 12e9);
  EXPECT_EQ(net.flow_remaining(bg, 3 * kS), kUncapped);
  EXPECT_EQ(net.active_flows(), 1u);
  std::vector<Completion> done;
  net.drain_completed(done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 2u);

  FlowNetwork n2(GetParam());
  const LinkId l2 = n2.add_link(10e9);
  const FlowId free_bg = n2.start_flow(0, std::vector<LinkId>{l2}, kEndlessBytes, 0, 1, 3);
  n2.advance_to(0);
  EXPECT_EQ(n2.flow_rate(free_bg), 10e9);
  EXPECT_DOUBLE_EQ(n2.flow_delivered(free_bg, kS / 2), 5e9);
}

TEST_P(WeightedTest, MisuseThrows) {
  const LinkId l = net.add_link(1e9);
  const std::vector<LinkId> r{l};
  EXPECT_THROW(net.start_flow(0, r, 1, 0, 0, 0, 0), std::invalid_argument);
  EXPECT_THROW(net.start_flow(0, r, 1, 0, 0, 0, 1, 0.0), std::invalid_argument);
  EXPECT_THROW(net.start_flow(0, r, 1, 0, 0, 0, 1, -1.0), std::invalid_argument);
  EXPECT_THROW(net.start_flow(0, {}, kEndlessBytes, 0, 0), std::invalid_argument);
  EXPECT_EQ(net.active_flows(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BothSolvers, WeightedTest,
                         ::testing::Values(SolverMode::Incremental, SolverMode::Full),
                         [](const auto& info) {
                           return info.param == SolverMode::Full ? "Full" : "Incremental";
                         });

// ---- random sequences ---------------------------------------------------------------------------

struct Spec {
  SimTime start;
  std::vector<LinkId> route;
  Bytes bytes;
  SimTime latency;
  std::uint32_t weight;
  double cap;
  std::uint8_t cls;
};

struct Case {
  std::vector<double> capacities;
  std::vector<Spec> flows;  // sorted by start
  SimTime change_at = kNever;
  LinkId change_link = 0;
  double change_capacity = 0;
};

// Few start dates and latencies, so that many flows share a date; some caps, some endless flows.
Case random_case(std::uint64_t seed, int max_links, int max_flows, std::uint32_t max_weight) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<>(lo, hi)(rng);
  };
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  auto chance = [&](double p) { return uniform(0, 1) < p; };
  Case c;
  const int links = 1 + pick(max_links);
  for (int i = 0; i < links; ++i) c.capacities.push_back(chance(0.5) ? 1e9 * (1 + pick(8)) : uniform(1e8, 2e10));
  std::vector<LinkId> all(static_cast<std::size_t>(links));
  for (int i = 0; i < links; ++i) all[static_cast<std::size_t>(i)] = static_cast<LinkId>(i);
  const int flows = 1 + pick(max_flows);
  for (int i = 0; i < flows; ++i) {
    Spec f;
    f.start = chance(0.6) ? SimTime{1'000'000'000} * pick(3) : static_cast<SimTime>(uniform(0, 3e9));
    std::shuffle(all.begin(), all.end(), rng);
    const int hops = 1 + pick(std::min(links, 4));
    f.route.assign(all.begin(), all.begin() + hops);
    f.bytes = chance(0.05) ? kEndlessBytes
              : chance(0.5) ? Bytes{10'000'000} * (1 + pick(4))
                            : static_cast<Bytes>(uniform(1, 5e7));
    f.latency = chance(0.6) ? 1'000'000 : static_cast<SimTime>(uniform(0, 1e7));
    f.weight = 1 + static_cast<std::uint32_t>(pick(static_cast<int>(max_weight)));
    f.cap = chance(0.3) ? (chance(0.5) ? 1e9 * (1 + pick(4)) : uniform(1e8, 1e10)) : kUncapped;
    f.cls = static_cast<std::uint8_t>(pick(kTrafficClasses));
    c.flows.push_back(std::move(f));
  }
  std::stable_sort(c.flows.begin(), c.flows.end(),
                   [](const Spec& a, const Spec& b) { return a.start < b.start; });
  if (chance(0.3)) {
    c.change_link = static_cast<LinkId>(pick(links));
    c.change_at = static_cast<SimTime>(uniform(0, 3e9));
    c.change_capacity = c.capacities[c.change_link] * (chance(0.5) ? 0.5 : 2.0);
  }
  return c;
}

// Water-filling written apart from the library: every unfrozen unit flow rises by the same step
// until a link is full or a flow reaches its cap; flows on a full link, or at their cap, freeze.
std::vector<double> water_filling(const std::vector<double>& caps,
                                  const std::vector<std::vector<LinkId>>& routes,
                                  const std::vector<double>& max_rate) {
  const std::size_t n = routes.size();
  std::vector<double> rate(n, 0.0);
  std::vector<bool> frozen(n, false);
  auto crosses = [&](std::size_t f, LinkId l) {
    return std::find(routes[f].begin(), routes[f].end(), l) != routes[f].end();
  };
  for (;;) {
    double step = INFINITY;
    for (LinkId l = 0; l < caps.size(); ++l) {
      double used = 0;
      int unfrozen = 0;
      for (std::size_t f = 0; f < n; ++f) {
        if (!crosses(f, l)) continue;
        used += rate[f];
        unfrozen += frozen[f] ? 0 : 1;
      }
      if (unfrozen > 0) step = std::min(step, std::max(0.0, caps[l] - used) / unfrozen);
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) step = std::min(step, max_rate[f] - rate[f]);
    }
    if (step == INFINITY) break;
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) rate[f] += step;
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (rate[f] >= max_rate[f] * (1 - 1e-12)) frozen[f] = true;
    }
    for (LinkId l = 0; l < caps.size(); ++l) {
      double used = 0;
      for (std::size_t f = 0; f < n; ++f) used += crosses(f, l) ? rate[f] : 0;
      if (used >= caps[l] * (1 - 1e-12)) {
        for (std::size_t f = 0; f < n; ++f) {
          if (crosses(f, l)) frozen[f] = true;
        }
      }
    }
  }
  return rate;
}

// Plays `c` on a weighted network (one flow per spec) and an unweighted one (each spec as
// `weight` consecutive unit flows), in lockstep, checking equality bit for bit after every step
// and, when `reference`, the rates against water_filling over the unit flows.
void lockstep(const Case& c, SolverMode mode, bool reference) {
  FlowNetwork wnet(mode), unet(mode);
  for (double cap : c.capacities) {
    wnet.add_link(cap);
    unet.add_link(cap);
  }
  std::vector<double> caps = c.capacities;
  std::vector<FlowId> wid(c.flows.size());
  std::vector<std::vector<FlowId>> uid(c.flows.size());
  std::vector<SimTime> wdone(c.flows.size(), -1);
  std::vector<std::uint32_t> ucount(c.flows.size(), 0);
  std::vector<SimTime> udone(c.flows.size(), -1);
  std::vector<Completion> got;
  std::size_t next = 0;
  bool changed = c.change_at == kNever;
  for (int steps = 0;; ++steps) {
    ASSERT_LT(steps, 100000) << "no progress";
    const SimTime tn = wnet.next_event_time();
    ASSERT_EQ(tn, unet.next_event_time());
    const SimTime tf = next < c.flows.size() ? c.flows[next].start : kNever;
    const SimTime tc = changed ? kNever : c.change_at;
    if (tn == kNever && tf == kNever && tc == kNever) break;
    if (tf <= tn && tf <= tc) {
      const Spec& f = c.flows[next];
      wid[next] = wnet.start_flow(f.start, f.route, f.bytes, f.latency, next, f.cls, f.weight,
                                  f.cap);
      for (std::uint32_t k = 0; k < f.weight; ++k) {
        uid[next].push_back(
            unet.start_flow(f.start, f.route, f.bytes, f.latency, next, f.cls, 1, f.cap));
      }
      ++next;
    } else if (tc <= tn) {
      wnet.set_link_capacity(c.change_at, c.change_link, c.change_capacity);
      unet.set_link_capacity(c.change_at, c.change_link, c.change_capacity);
      caps[c.change_link] = c.change_capacity;
      changed = true;
    } else {
      wnet.advance_to(tn);
      unet.advance_to(tn);
    }
    ASSERT_EQ(wnet.now(), unet.now());
    const SimTime now = wnet.now();
    got.clear();
    wnet.drain_completed(got);
    for (const Completion& d : got) {
      ASSERT_EQ(wdone[d.tag], -1);
      ASSERT_EQ(d.weight, c.flows[d.tag].weight);
      wdone[d.tag] = d.time;
    }
    got.clear();
    unet.drain_completed(got);
    for (const Completion& d : got) {
      ASSERT_EQ(d.weight, 1u);
      ASSERT_TRUE(udone[d.tag] == -1 || udone[d.tag] == d.time) << "copies end apart";
      udone[d.tag] = d.time;
      ++ucount[d.tag];
    }
    std::vector<std::vector<LinkId>> routes;
    std::vector<double> rates, max_rate;
    for (std::size_t f = 0; f < next; ++f) {
      if (wdone[f] != -1) {
        ASSERT_EQ(ucount[f], c.flows[f].weight) << "flow " << f;
      }
      ASSERT_EQ(wdone[f], udone[f]) << "flow " << f;
      for (FlowId u : uid[f]) {
        ASSERT_EQ(wnet.flow_phase(wid[f]), unet.flow_phase(u));
        ASSERT_TRUE(same_bits(wnet.flow_rate(wid[f]), unet.flow_rate(u))) << "flow " << f;
        ASSERT_EQ(wnet.flow_completion(wid[f]), unet.flow_completion(u));
        if (unet.flow_phase(u) == FlowPhase::Sharing) {
          routes.push_back(c.flows[f].route);
          rates.push_back(unet.flow_rate(u));
          max_rate.push_back(c.flows[f].cap);
        }
      }
    }
    for (LinkId l = 0; l < caps.size(); ++l) {
      ASSERT_TRUE(same_bits(wnet.link_load(l), unet.link_load(l))) << "link " << l;
      ASSERT_LE(wnet.link_load(l), caps[l] * (1 + 1e-12));
      const LinkStats a = wnet.link_stats(l, now);
      const LinkStats b = unet.link_stats(l, now);
      ASSERT_EQ(a.busy_ps, b.busy_ps);
      ASSERT_EQ(a.completed_bytes, b.completed_bytes);
      ASSERT_TRUE(same_bits(a.carried_bytes, b.carried_bytes));
    }
    if (!reference || routes.empty()) continue;
    const std::vector<double> ref = water_filling(caps, routes, max_rate);
    for (std::size_t i = 0; i < rates.size(); ++i) {
      ASSERT_NEAR(rates[i], ref[i], 1e-9 * ref[i] + 1e-6) << "unit flow #" << i;
      ASSERT_LE(rates[i], max_rate[i]);
    }
  }
  for (std::size_t f = 0; f < c.flows.size(); ++f) {
    if (c.flows[f].bytes == kEndlessBytes) {
      EXPECT_EQ(wdone[f], -1);
      EXPECT_EQ(wnet.flow_phase(wid[f]), FlowPhase::Sharing);
    } else {
      EXPECT_NE(wdone[f], -1) << "flow " << f << " never completed";
    }
  }
}

// Small networks, weights up to 4, every step checked against the brute force too.
TEST(FlowNetworkWeighted, WeightedEqualsUnitFlowsAndReferenceOnSmallNetworks) {
  for (std::uint64_t seed = 1; seed <= 600; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Case c = random_case(seed, 5, 8, 4);
    for (SolverMode mode : {SolverMode::Incremental, SolverMode::Full}) {
      lockstep(c, mode, true);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Weights up to 60 on up to 40 flows: the unit side has hundreds of flows on one date (bulk
// extraction and rebuilds of the heap), the weighted side a few dozen (one sift each).
TEST(FlowNetworkWeighted, WeightedEqualsUnitFlowsWithManyFlowsPerDate) {
  for (std::uint64_t seed = 5001; seed <= 5150; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Case c = random_case(seed, 16, 40, 60);
    for (SolverMode mode : {SolverMode::Incremental, SolverMode::Full}) {
      lockstep(c, mode, false);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace zerosim::net
