// Steady state allocates nothing: once a workload has run once (vectors grown, flow slots and
// their route buffers created), running it again performs zero heap allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "sim/net/flow_network.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// Counts every allocation of this test executable; only the difference across the measured
// window matters.
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace zerosim::net {
namespace {

// 16 links in a ring, 64 flows of 3 hops each with staggered sizes and latencies, so the run has
// joins, departures and re-datings at distinct instants, then the same again.
void run_round(FlowNetwork& net, SimTime start, std::vector<Completion>& done) {
  for (std::uint32_t i = 0; i < 64; ++i) {
    const LinkId route[3] = {i % 16, (i + 1) % 16, (i + 5) % 16};
    net.start_flow(start + i * 1000, route, 1'000'000 + i * 7919, (i % 5) * 100'000, i, i % 4);
  }
  while (net.next_event_time() != kNever) {
    net.advance_to(net.next_event_time());
    net.drain_completed(done);
  }
}

TEST(FlowNetworkAlloc, SteadyStateAllocatesNothing) {
  for (SolverMode mode : {SolverMode::Incremental, SolverMode::Full}) {
    FlowNetwork net(mode);
    for (int l = 0; l < 16; ++l) net.add_link(1e9 * (1 + l % 3));
    std::vector<Completion> done;
    done.reserve(1000);
    const long first = g_allocations.load();
    run_round(net, 0, done);
    EXPECT_GT(g_allocations.load() - first, 0) << "the counter counts";
    ASSERT_EQ(done.size(), 64u);
    const auto solves = net.counters().solves;
    const long before = g_allocations.load();
    run_round(net, net.now() + 1, done);
    const long after = g_allocations.load();
    ASSERT_EQ(done.size(), 128u);
    EXPECT_GT(net.counters().solves, solves);
    EXPECT_EQ(after - before, 0) << "allocations in the second round";
  }
}

// Collective-like rounds: 300 flows start together with one latency, so batches take them in
// bulk and solves re-date most of the waiting flows at once, with weights and caps, beside
// an endless capped flow started once before the measured window.
void run_bulk_round(FlowNetwork& net, SimTime start, std::vector<Completion>& done) {
  for (std::uint32_t i = 0; i < 300; ++i) {
    const LinkId route[2] = {i % 16, (i / 16 + 3) % 16 == i % 16 ? (i + 1) % 16 : (i / 16 + 3) % 16};
    net.start_flow(start, route, 1'000'000 * (1 + i % 3), 500'000, i, i % 4, 1 + i % 5,
                   i % 7 == 0 ? 1e8 : kUncapped);
  }
  while (net.next_event_time() != kNever) {
    net.advance_to(net.next_event_time());
    net.drain_completed(done);
  }
}

TEST(FlowNetworkAlloc, BulkBatchesAllocateNothing) {
  for (SolverMode mode : {SolverMode::Incremental, SolverMode::Full}) {
    FlowNetwork net(mode);
    for (int l = 0; l < 16; ++l) net.add_link(1e9 * (1 + l % 3));
    const LinkId bg[2] = {0, 5};
    net.start_flow(0, bg, kEndlessBytes, 0, 999, 3, 2, 2e8);
    std::vector<Completion> done;
    done.reserve(1000);
    run_bulk_round(net, 0, done);
    ASSERT_EQ(done.size(), 300u);
    const long before = g_allocations.load();
    run_bulk_round(net, net.now() + 1, done);
    const long after = g_allocations.load();
    ASSERT_EQ(done.size(), 600u);
    EXPECT_EQ(after - before, 0) << "allocations in the second round";
    EXPECT_EQ(net.active_flows(), 1u);
  }
}

}  // namespace
}  // namespace zerosim::net
