// Random arrival/departure sequences on small random networks:
//  - the incremental solver equals the full solver bit for bit (every rate, every completion ps);
//  - both equal an independent brute-force water-filling reference within 1e-9 relative, and the
//    allocation satisfies the definition of max-min fairness (every flow has a saturated link on
//    which no flow is faster);
//  - no link carries more than its capacity; bytes are conserved: every flow completes once, and
//    the integral of each link's load equals the bytes of the flows that crossed it.
#include "sim/net/flow_network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace zerosim::net {
namespace {

struct FlowSpec {
  SimTime start;
  std::vector<LinkId> route;
  Bytes bytes;
  SimTime latency;
  std::uint8_t cls;
};

struct CapacityChange {
  SimTime time;
  LinkId link;
  double capacity;
};

struct Scenario {
  std::vector<double> capacities;
  std::vector<FlowSpec> flows;              // sorted by start
  std::vector<CapacityChange> changes;      // sorted by time
};

struct Size {
  int max_links;
  int max_flows;
  int max_hops;
};

// Mixes "nice" values (exact ties between links, flows ending at the same ps) with arbitrary ones.
Scenario random_scenario(std::uint64_t seed, Size size) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<>(lo, hi)(rng);
  };
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  auto chance = [&](double p) { return uniform(0, 1) < p; };

  Scenario s;
  const int links = 1 + pick(size.max_links);
  const double nice_caps[] = {1e9, 2e9, 4e9, 5e9, 10e9, 12.5e9};
  for (int i = 0; i < links; ++i) {
    s.capacities.push_back(chance(0.5) ? nice_caps[pick(6)] : uniform(1e8, 2e10));
  }
  const int flows = 1 + pick(size.max_flows);
  const Bytes nice_bytes[] = {1'000'000, 10'000'000, 50'000'000, 100'000'000};
  const SimTime nice_starts[] = {0, 1'000'000'000, 5'000'000'000};
  std::vector<LinkId> all(static_cast<std::size_t>(links));
  for (int i = 0; i < links; ++i) all[static_cast<std::size_t>(i)] = static_cast<LinkId>(i);
  for (int i = 0; i < flows; ++i) {
    FlowSpec f;
    f.start = chance(0.3) ? nice_starts[pick(3)]
                          : static_cast<SimTime>(uniform(0, 5e10));
    std::shuffle(all.begin(), all.end(), rng);
    const int hops = chance(0.05) ? 0 : 1 + pick(std::min(links, size.max_hops));
    f.route.assign(all.begin(), all.begin() + hops);
    f.bytes = chance(0.05) ? 0
              : chance(0.4) ? nice_bytes[pick(4)]
                            : static_cast<Bytes>(uniform(1, 1e8));
    f.latency = chance(0.4) ? 0 : static_cast<SimTime>(uniform(0, 1e8));
    f.cls = static_cast<std::uint8_t>(pick(kTrafficClasses));
    s.flows.push_back(std::move(f));
  }
  std::stable_sort(s.flows.begin(), s.flows.end(),
                   [](const FlowSpec& a, const FlowSpec& b) { return a.start < b.start; });
  if (chance(0.3)) {
    const LinkId l = static_cast<LinkId>(pick(links));
    const SimTime t = static_cast<SimTime>(uniform(0, 5e10));
    const double cap = s.capacities[l];
    if (chance(0.3)) {  // failure, then repair
      s.changes.push_back({t, l, 0.0});
      s.changes.push_back({t + static_cast<SimTime>(uniform(1, 1e10)), l, cap});
    } else {
      s.changes.push_back({t, l, cap * (chance(0.5) ? 0.5 : 2.0)});
    }
  }
  return s;
}

// Brute-force water-filling, written apart from the library's progressive filling: raise every
// unfrozen flow's rate by the same amount until some link is full, freeze the flows crossing a
// full link, repeat. O(iterations * flows * hops) with everything recomputed from scratch.
std::vector<double> water_filling(const std::vector<double>& caps,
                                  const std::vector<std::vector<LinkId>>& routes) {
  const std::size_t n = routes.size();
  std::vector<double> rate(n, 0.0);
  std::vector<bool> frozen(n, false);
  auto used = [&](LinkId l) {
    double u = 0;
    for (std::size_t f = 0; f < n; ++f) {
      if (std::find(routes[f].begin(), routes[f].end(), l) != routes[f].end()) u += rate[f];
    }
    return u;
  };
  auto unfrozen_on = [&](LinkId l) {
    int c = 0;
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f] && std::find(routes[f].begin(), routes[f].end(), l) != routes[f].end()) ++c;
    }
    return c;
  };
  for (;;) {
    double step = INFINITY;
    for (LinkId l = 0; l < caps.size(); ++l) {
      const int c = unfrozen_on(l);
      if (c > 0) step = std::min(step, std::max(0.0, caps[l] - used(l)) / c);
    }
    if (step == INFINITY) break;  // everyone frozen
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) rate[f] += step;
    }
    for (LinkId l = 0; l < caps.size(); ++l) {
      if (used(l) >= caps[l] * (1 - 1e-12)) {
        for (std::size_t f = 0; f < n; ++f) {
          if (std::find(routes[f].begin(), routes[f].end(), l) != routes[f].end()) frozen[f] = true;
        }
      }
    }
  }
  return rate;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

class Lockstep {
 public:
  explicit Lockstep(const Scenario& s) : s_(s) {
    for (double c : s.capacities) {
      inc_.add_link(c);
      full_.add_link(c);
    }
    caps_ = s.capacities;
    ids_.assign(s.flows.size(), 0);
    done_at_.assign(s.flows.size(), -1);
  }

  // Runs the scenario, checking after every step; stops at the first fatal failure.
  void run(bool check_reference) {
    std::size_t next_change = 0;
    std::size_t& next_flow = started_;
    for (int steps = 0;; ++steps) {
      ASSERT_LT(steps, 100000) << "no progress";
      const SimTime tn = inc_.next_event_time();
      ASSERT_EQ(tn, full_.next_event_time());
      const SimTime tf = next_flow < s_.flows.size() ? s_.flows[next_flow].start : kNever;
      const SimTime tc = next_change < s_.changes.size() ? s_.changes[next_change].time : kNever;
      const SimTime te = std::min(tf, tc);
      if (tn == kNever && te == kNever) break;
      if (te <= tn && tf <= tc) {
        const FlowSpec& f = s_.flows[next_flow];
        const FlowId a = inc_.start_flow(f.start, f.route, f.bytes, f.latency, next_flow, f.cls);
        const FlowId b = full_.start_flow(f.start, f.route, f.bytes, f.latency, next_flow, f.cls);
        ASSERT_EQ(a, b);
        ids_[next_flow++] = a;
      } else if (te <= tn) {
        const CapacityChange& c = s_.changes[next_change++];
        inc_.set_link_capacity(c.time, c.link, c.capacity);
        full_.set_link_capacity(c.time, c.link, c.capacity);
        caps_[c.link] = c.capacity;
      } else {
        inc_.advance_to(tn);
        full_.advance_to(tn);
      }
      compare_and_check(check_reference);
      if (::testing::Test::HasFatalFailure()) return;
    }
    check_end();
  }

 private:
  void compare_and_check(bool check_reference) {
    ASSERT_EQ(inc_.now(), full_.now());
    const SimTime now = inc_.now();
    got_a_.clear();
    got_b_.clear();
    inc_.drain_completed(got_a_);
    full_.drain_completed(got_b_);
    ASSERT_EQ(got_a_.size(), got_b_.size());
    for (std::size_t i = 0; i < got_a_.size(); ++i) {
      ASSERT_EQ(got_a_[i].tag, got_b_[i].tag);
      ASSERT_EQ(got_a_[i].time, got_b_[i].time);
      ASSERT_EQ(got_a_[i].flow, got_b_[i].flow);
      const std::size_t f = got_a_[i].tag;
      ASSERT_EQ(done_at_[f], -1) << "flow " << f << " completed twice";
      done_at_[f] = got_a_[i].time;
      ASSERT_GE(got_a_[i].time, s_.flows[f].start + s_.flows[f].latency);
      ASSERT_LE(got_a_[i].time, now);
    }

    // Bit-identical state; collect the sharing flows for the reference.
    std::vector<std::vector<LinkId>> routes;
    std::vector<double> rates;
    std::vector<double> load(caps_.size(), 0.0);
    // Conservation while running: what the flows say they moved (bytes minus remaining, once per
    // link crossed) equals what the links integrated from their loads.
    double moved_by_flows = 0;
    for (std::size_t f = 0; f < started_; ++f) {
      const FlowId id = ids_[f];
      ASSERT_EQ(inc_.flow_phase(id), full_.flow_phase(id));
      ASSERT_TRUE(same_bits(inc_.flow_rate(id), full_.flow_rate(id)))
          << "flow " << f << ": " << inc_.flow_rate(id) << " vs " << full_.flow_rate(id);
      ASSERT_EQ(inc_.flow_completion(id), full_.flow_completion(id));
      if (inc_.flow_phase(id) == FlowPhase::Sharing) {
        const double r = inc_.flow_rate(id);
        routes.push_back(s_.flows[f].route);
        rates.push_back(r);
        for (LinkId l : s_.flows[f].route) load[l] += r;
        const double rem = inc_.flow_remaining(id, now);
        ASSERT_GE(rem, 0.0);
        ASSERT_LE(rem, static_cast<double>(s_.flows[f].bytes));
        moved_by_flows += (static_cast<double>(s_.flows[f].bytes) - rem) *
                          static_cast<double>(s_.flows[f].route.size());
      } else if (done_at_[f] != -1) {
        moved_by_flows += static_cast<double>(s_.flows[f].bytes) *
                          static_cast<double>(s_.flows[f].route.size());
      }
    }
    double carried_by_links = 0;
    for (LinkId l = 0; l < caps_.size(); ++l) {
      carried_by_links += inc_.link_stats(l, now).carried_bytes;
    }
    ASSERT_NEAR(moved_by_flows, carried_by_links, 1e-9 * moved_by_flows + rounding_bytes(0));
    for (LinkId l = 0; l < caps_.size(); ++l) {
      ASSERT_LE(load[l], caps_[l] * (1 + 1e-12)) << "link " << l << " over capacity";
      ASSERT_TRUE(same_bits(inc_.link_load(l), full_.link_load(l)));
      ASSERT_NEAR(inc_.link_load(l), load[l], 1e-12 * caps_[l]);
    }
    if (!check_reference || routes.empty()) return;

    const std::vector<double> ref = water_filling(caps_, routes);
    for (std::size_t i = 0; i < rates.size(); ++i) {
      ASSERT_NEAR(rates[i], ref[i], 1e-9 * ref[i] + 1e-6) << "sharing flow #" << i;
    }
    // Definition of max-min: each flow has a saturated link where it is among the fastest.
    for (std::size_t i = 0; i < rates.size(); ++i) {
      bool has_bottleneck = false;
      for (LinkId l : routes[i]) {
        if (load[l] < caps_[l] * (1 - 1e-9)) continue;
        bool fastest = true;
        for (std::size_t j = 0; j < rates.size(); ++j) {
          const bool crosses =
              std::find(routes[j].begin(), routes[j].end(), l) != routes[j].end();
          if (crosses && rates[j] > rates[i] * (1 + 1e-9) + 1e-6) fastest = false;
        }
        if (fastest) has_bottleneck = true;
      }
      ASSERT_TRUE(has_bottleneck) << "sharing flow #" << i << " has no bottleneck link";
    }
  }

  void check_end() {
    ASSERT_EQ(inc_.active_flows(), 0u);
    ASSERT_EQ(full_.active_flows(), 0u);
    std::vector<Bytes> through(caps_.size(), 0);
    std::vector<std::size_t> flows_through(caps_.size(), 0);
    Bytes injected = 0;  // once per link crossed
    for (std::size_t f = 0; f < s_.flows.size(); ++f) {
      ASSERT_NE(done_at_[f], -1) << "flow " << f << " never completed";
      injected += s_.flows[f].bytes * static_cast<Bytes>(s_.flows[f].route.size());
      for (LinkId l : s_.flows[f].route) {
        through[l] += s_.flows[f].bytes;
        ++flows_through[l];
      }
    }
    Bytes completed_total = 0;
    for (LinkId l = 0; l < caps_.size(); ++l) {
      const LinkStats a = inc_.link_stats(l, inc_.now());
      const LinkStats b = full_.link_stats(l, full_.now());
      Bytes completed = 0;
      for (int c = 0; c < kTrafficClasses; ++c) {
        ASSERT_EQ(a.completed_bytes[static_cast<std::size_t>(c)],
                  b.completed_bytes[static_cast<std::size_t>(c)]);
        completed += a.completed_bytes[static_cast<std::size_t>(c)];
      }
      ASSERT_EQ(completed, through[l]) << "link " << l;
      completed_total += completed;
      ASSERT_EQ(a.busy_ps, b.busy_ps);
      ASSERT_TRUE(same_bits(a.carried_bytes, b.carried_bytes));
      ASSERT_NEAR(a.carried_bytes, static_cast<double>(through[l]),
                  1e-9 * static_cast<double>(through[l]) + rounding_bytes(flows_through[l]))
          << "link " << l;
    }
    ASSERT_EQ(completed_total, injected);
  }

  // Completion dates are rounded up to the ps, so a flow may run up to 1 ps past its last byte
  // (and, through the 1e-12 relative slack, end a fraction of a ps early): at most one ps at the
  // largest capacity per flow, `flows` flows, or every hop of every flow when flows == 0.
  double rounding_bytes(std::size_t flows) const {
    if (flows == 0) {
      for (const FlowSpec& f : s_.flows) flows += f.route.size();
    }
    double max_cap = 0;
    for (double c : s_.capacities) max_cap = std::max(max_cap, 2 * c);
    return static_cast<double>(flows) * max_cap / 1e12 + 1e-6;
  }

  const Scenario& s_;
  FlowNetwork inc_{SolverMode::Incremental};
  FlowNetwork full_{SolverMode::Full};
  std::vector<double> caps_;
  std::vector<FlowId> ids_;
  std::size_t started_ = 0;
  std::vector<SimTime> done_at_;
  std::vector<Completion> got_a_, got_b_;
};

// 2500 sequences on networks of up to 6 links and 12 flows, routes of up to 4 links, with the
// brute-force reference checked after every step.
TEST(FlowNetworkRandom, IncrementalEqualsFullAndReferenceOnSmallNetworks) {
  for (std::uint64_t seed = 1; seed <= 2500; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Scenario s = random_scenario(seed, {6, 12, 4});
    Lockstep run(s);
    run.run(true);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// 300 larger sequences (up to 24 links, 80 flows): bigger components, more ties; incremental
// against full only (the reference is too slow to be worth it here).
TEST(FlowNetworkRandom, IncrementalEqualsFullOnLargerNetworks) {
  for (std::uint64_t seed = 100001; seed <= 100300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Scenario s = random_scenario(seed, {24, 80, 5});
    Lockstep run(s);
    run.run(false);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace zerosim::net
