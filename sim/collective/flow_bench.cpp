// flow_bench: wall time of one 1 GiB all-reduce simulated at flow level (FlowComm) on DGX H100
// clusters (rail-optimized fat tree) of 8 .. 4096 GPUs, and the process's peak RSS.
//
// Per scale it prints
//   topo_s   building the topology (Boost.Graph) and the network links (FlowComm's constructor);
//   cold_s   the first all-reduce: NCCL's choice, the flow layout (build_plan + route_plan,
//            routes through the fabric), injection, and playing the flows to completion;
//   warm_s   a second all-reduce of the same group and size: layout cached, injection and
//            playing only (what every later bucket of a training step costs);
// the simulated time, the bus bandwidth, NCCL's flows and the weighted network flows they became
// (identical ones merged), network batches, and peak RSS so far
// (getrusage ru_maxrss, monotone over the run). Times are the best of 3 (warm: of 5).
//
// Usage: flow_bench [max_gpus (default 4096)]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "sim/collective/flow_backend.h"
#include "sim/collective/nccl_model.h"

namespace zerosim {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

// A plan holding one group of n ranks and `calls` all-reduces of `bytes` on it (no ops: FlowComm
// only reads the collectives and groups).
Plan one_group_plan(int n, Bytes bytes, int calls) {
  Plan p;
  p.num_ranks = n;
  p.group_ranks.resize(n);
  std::iota(p.group_ranks.begin(), p.group_ranks.end(), 0);
  p.group_begin.push_back(static_cast<std::uint32_t>(n));
  p.group_names.push_back("all");
  for (int i = 0; i < calls; ++i) {
    Collective c;
    c.kind = CollectiveKind::AllReduce;
    c.group = 0;
    c.bytes = bytes;
    p.collectives.push_back(c);
  }
  return p;
}

// Plays collective c alone from `now` to its completion; returns its end.
SimTime play(FlowComm& comm, const Plan& plan, std::uint32_t c, SimTime now,
             std::vector<std::uint32_t>& done) {
  comm.start(plan, c, now);
  SimTime t = now;
  done.clear();
  while (done.empty()) {
    t = comm.next_completion();
    comm.pop_completed(t, done);
  }
  return t;
}

}  // namespace
}  // namespace zerosim

int main(int argc, char** argv) {
  using namespace zerosim;
  const int max_gpus = argc > 1 ? std::atoi(argv[1]) : 4096;
  const Bytes bytes = Bytes{1} << 30;
  std::printf("flow_bench: one 1 GiB all-reduce, FlowComm on dgx-h100 (rail fat tree)\n");
  std::printf("%6s %6s %-14s %8s %8s %8s %9s %9s %9s %11s %9s %8s\n", "gpus", "links",
              "algo/proto", "flows", "weighted", "batches", "topo_s", "cold_s", "warm_s", "sim_ms", "busbw", "rss_MiB");
  for (int gpus : {8, 64, 512, 4096}) {
    if (gpus > max_gpus) break;
    const ClusterSpec cluster = cluster_from_json(
        nlohmann::json{{"preset", "dgx-h100"}, {"num_gpus", gpus}}, "cluster");
    const Plan plan = one_group_plan(gpus, bytes, 8);
    std::vector<std::uint32_t> done;
    double topo_s = 1e30, cold_s = 1e30, warm_s = 1e30;
    SimTime sim = 0;
    std::size_t links = 0;
    std::uint64_t flows = 0, weighted = 0, batches = 0;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = Clock::now();
      FlowComm comm(cluster);
      topo_s = std::min(topo_s, since(t0));
      links = comm.network().link_count();
      t0 = Clock::now();
      sim = play(comm, plan, 0, 0, done);
      cold_s = std::min(cold_s, since(t0));
      const std::uint64_t b0 = comm.network().counters().batches;
      SimTime now = sim;
      for (std::uint32_t c = 1; c <= 5; ++c) {
        t0 = Clock::now();
        const SimTime end = play(comm, plan, c, now, done);
        warm_s = std::min(warm_s, since(t0));
        if (end - now != sim) std::printf("warning: warm run took %lld ps, cold %lld ps\n",
                                          static_cast<long long>(end - now),
                                          static_cast<long long>(sim));
        now = end;
      }
      const LinkReport r = comm.link_report(now);
      flows = r.flows / 6;
      weighted = r.network_flows / 6;
      batches = (r.solver.batches - b0) / 5;
    }
    const nccl::Prediction p = FlowComm(cluster).model().predict(
        CollectiveKind::AllReduce, bytes,
        plan.group_ranks);
    char algo[32];
    std::snprintf(algo, sizeof algo, "%s/%s", nccl::algo_name(p.algo), nccl::proto_name(p.proto));
    const double busbw = static_cast<double>(bytes) / ps_to_seconds(sim) *
                         nccl::bus_factor(CollectiveKind::AllReduce, gpus) / 1e9;
    std::printf("%6d %6zu %-14s %8llu %8llu %8llu %9.4f %9.4f %9.4f %11.4f %7.1fGB %8.1f\n", gpus,
                links, algo, static_cast<unsigned long long>(flows),
                static_cast<unsigned long long>(weighted),
                static_cast<unsigned long long>(batches), topo_s, cold_s, warm_s,
                ps_to_seconds(sim) * 1e3, busbw, peak_rss_mib());
  }
  return 0;
}
