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

}  // namespace
}  // namespace zerosim::net
