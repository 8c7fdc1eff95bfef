// net_bench: wall time and solves per second of the max-min flow network, incremental vs full.
//
//  ring  N GPUs (8 per node) on a rail-optimized two-level fat tree: per GPU one NVLink out/in
//        (450 GB/s) and one NIC up/down (50 GB/s); leaves per (rail, pod of 16 nodes), 16 spines,
//        50 GB/s leaf<->spine links, ECMP by hashing the GPU pair. A ring all-reduce's flows: 8
//        channels, one flow per ring edge per channel (8N flows), each 1 GiB/N bytes, repeated for
//        `rounds` rounds; sizes and latencies jittered by a few percent so arrivals and departures
//        fall on distinct picoseconds (every one is a solve). Components stay small: the case
//        selective update is made for.
//  spine N flows that all cross one spine link: every event's component is every flow, so
//        selective update can only lose (its graph walk is pure overhead).
//
// Usage: net_bench [max_gpus (default 4096)] [full-mode solve budget (default 4000)]
// Full mode (and the spine case) stops after the budget of solves; solves/s is measured on that
// prefix. Each line is the best of three runs.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sim/net/flow_network.h"

namespace zerosim::net {
namespace {

struct Workload {
  std::vector<double> capacities;
  std::vector<std::vector<LinkId>> routes;  // one per repeated flow
  Bytes bytes = 0;
};

Workload ring_workload(int gpus) {
  constexpr int kPerNode = 8, kPodNodes = 16, kSpines = 16, kChannels = 8;
  const int nodes = gpus / kPerNode;
  const int pods = (nodes + kPodNodes - 1) / kPodNodes;
  Workload w;
  auto link = [&](double cap) {
    w.capacities.push_back(cap);
    return static_cast<LinkId>(w.capacities.size() - 1);
  };
  std::vector<LinkId> nvl_out(gpus), nvl_in(gpus), nic_up(gpus), nic_down(gpus);
  for (int g = 0; g < gpus; ++g) {
    nvl_out[g] = link(450e9);
    nvl_in[g] = link(450e9);
    nic_up[g] = link(50e9);
    nic_down[g] = link(50e9);
  }
  const int leaves = kPerNode * pods;  // leaf (rail, pod) = rail * pods + pod
  std::vector<LinkId> leaf_up(leaves * kSpines), leaf_down(leaves * kSpines);
  for (int i = 0; i < leaves * kSpines; ++i) {
    leaf_up[i] = link(50e9);
    leaf_down[i] = link(50e9);
  }
  auto route = [&](int a, int b) {
    const int na = a / kPerNode, nb = b / kPerNode;
    if (na == nb) return std::vector<LinkId>{nvl_out[a], nvl_in[b]};
    const int la = (a % kPerNode) * pods + na / kPodNodes;
    const int lb = (b % kPerNode) * pods + nb / kPodNodes;
    if (la == lb) return std::vector<LinkId>{nic_up[a], nic_down[b]};
    const unsigned hash = static_cast<unsigned>(a) * 2654435761u ^ static_cast<unsigned>(b);
    const int s = static_cast<int>(hash % kSpines);
    return std::vector<LinkId>{nic_up[a], leaf_up[la * kSpines + s], leaf_down[lb * kSpines + s],
                               nic_down[b]};
  };
  for (int c = 0; c < kChannels; ++c) {
    // channel c visits nodes in order, inside a node the locals c, c+1, ..., c+7 (mod 8)
    std::vector<int> order;
    for (int n = 0; n < nodes; ++n) {
      for (int k = 0; k < kPerNode; ++k) order.push_back(n * kPerNode + (c + k) % kPerNode);
    }
    for (int i = 0; i < gpus; ++i) w.routes.push_back(route(order[i], order[(i + 1) % gpus]));
  }
  w.bytes = static_cast<Bytes>(1073741824LL / gpus);
  return w;
}

Workload spine_workload(int flows) {
  Workload w;
  w.capacities.push_back(400e9);  // the spine: 0
  for (int i = 0; i < flows; ++i) {
    w.capacities.push_back(50e9);
    w.capacities.push_back(50e9);
    w.routes.push_back({static_cast<LinkId>(1 + 2 * i), 0, static_cast<LinkId>(2 + 2 * i)});
  }
  w.bytes = 16 << 20;
  return w;
}

struct Result {
  SolverCounters counters;
  double wall_s = 0;
  SimTime end = 0;
  std::uint64_t completions = 0;
  bool finished = false;
};

Result run_once(const Workload& w, SolverMode mode, int rounds, std::uint64_t max_solves) {
  FlowNetwork net(mode);
  for (double c : w.capacities) net.add_link(c);
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<> jitter(0.95, 1.05);
  auto start = [&](SimTime now, std::uint64_t edge) {
    const auto bytes = static_cast<Bytes>(static_cast<double>(w.bytes) * jitter(rng));
    const auto latency = static_cast<SimTime>(5e6 * jitter(rng));  // ~5 us
    net.start_flow(now, w.routes[edge], bytes, latency, edge);
  };
  std::vector<int> left(w.routes.size(), rounds - 1);
  std::vector<Completion> done;
  done.reserve(w.routes.size());
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t e = 0; e < w.routes.size(); ++e) start(0, e);
  for (;;) {
    const SimTime t = net.next_event_time();
    if (t == kNever) {
      r.finished = true;
      break;
    }
    net.advance_to(t);
    done.clear();
    net.drain_completed(done);
    r.completions += done.size();
    for (const Completion& c : done) {
      if (left[c.tag]-- > 0) start(t, c.tag);
    }
    if (net.counters().solves >= max_solves) break;
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.counters = net.counters();
  r.end = net.now();
  return r;
}

// Best of three: the machine is shared, the minimum is the least disturbed measurement.
Result run(const Workload& w, SolverMode mode, int rounds, std::uint64_t max_solves) {
  Result best = run_once(w, mode, rounds, max_solves);
  for (int i = 0; i < 2; ++i) {
    Result r = run_once(w, mode, rounds, max_solves);
    if (r.wall_s < best.wall_s) best = r;
  }
  return best;
}

void report(const char* name, int n, const Workload& w, const char* mode, const Result& r) {
  const double solves = static_cast<double>(r.counters.solves);
  std::printf("%-5s %5d %6zu %-11s %8llu %9.1f %9.1f %10.3f %11.0f %8.2f %s\n", name, n,
              w.routes.size(), mode, static_cast<unsigned long long>(r.counters.solves),
              static_cast<double>(r.counters.flows_solved) / solves,
              static_cast<double>(r.counters.flows_redated) / solves, r.wall_s * 1e3,
              solves / r.wall_s, r.wall_s / solves * 1e6,
              r.finished ? ("end " + std::to_string(r.end) + " ps").c_str() : "(budget)");
}

}  // namespace
}  // namespace zerosim::net

int main(int argc, char** argv) {
  using namespace zerosim::net;
  const int max_gpus = argc > 1 ? std::atoi(argv[1]) : 4096;
  const std::uint64_t budget = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4000;
  constexpr std::uint64_t kAll = ~0ULL;
  std::printf("%-5s %5s %6s %-11s %8s %9s %9s %10s %11s %8s\n", "case", "N", "flows", "mode",
              "solves", "flows/slv", "redate/slv", "wall_ms", "solves/s", "us/solve");
  for (int n : {8, 64, 512, 4096}) {
    if (n > max_gpus) break;
    const Workload w = ring_workload(n);
    report("ring", n, w, "incremental", run(w, SolverMode::Incremental, 4, kAll));
    report("ring", n, w, "full", run(w, SolverMode::Full, 4, budget));
  }
  for (int n : {64, 512, 4096}) {
    if (n > max_gpus) break;
    const Workload w = spine_workload(n);
    report("spine", n, w, "incremental", run(w, SolverMode::Incremental, 4, budget));
    report("spine", n, w, "full", run(w, SolverMode::Full, 4, budget));
  }
  return 0;
}
