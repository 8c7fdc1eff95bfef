// Fuzz target: the topology reader. The input is either a topologies/*.json preset file (read as
// {"preset": "inline", ...}, one node unless it says otherwise) or a scenario's `cluster` object
// ({"preset": name, "nodes": n, overrides...}). A cluster that reads must serialise to JSON that
// reads back to the same cluster, price collectives analytically, and, up to 2048 GPUs, build its
// topology graph and route between GPUs (within a node, across nodes, to the host) with both the
// default fabric layout and a small-leaf three-tier one.
#include "sim/cluster/topology.h"
#include "sim/collective/alpha_beta.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using namespace zerosim;

void exercise_topology(const ClusterSpec& c, const TopologyOptions& opt) {
  const Topology t = build_topology(c, opt);
  const int n = t.num_gpus();
  const int pairs[][2] = {{0, n - 1}, {0, n / 2}, {n - 1, 0}, {0, std::min(1, n - 1)}};
  for (const auto& p : pairs) {
    for (std::uint64_t hash : {0ull, 0x9E3779B97F4A7C15ull}) {
      const std::vector<LinkId> r = t.route(p[0], p[1], hash);
      (void)t.route_latency(r);
      (void)t.route_bandwidth(r);
    }
    if (t.nics_per_node() > 0 && t.node_of(p[0]) != t.node_of(p[1])) {
      for (int rail = 0; rail < t.nics_per_node(); rail += std::max(1, t.nics_per_node() - 1)) {
        (void)t.route(p[0], p[1], 7, rail);
      }
    }
  }
  (void)t.route_gpu_to_host(n - 1);
  (void)t.route_host_to_gpu(0);
  if (c.nvswitch) {
    (void)t.route_gpu_to_nvswitch(n - 1);
    (void)t.route_nvswitch_to_gpu(0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<fuzz::json> in = fuzz::parse_input(data, size);
  if (!in) return 0;
  fuzz::guarded("fuzz_topology", [&] {
    fuzz::json value = *in;
    if (value.is_object() && !value.contains("preset")) value["preset"] = "inline";
    const ClusterSpec c = cluster_from_json(value, "cluster");
    const fuzz::json out = cluster_to_json(c);
    const fuzz::json again = cluster_to_json(cluster_from_json(out, "cluster"));
    if (again != out) {
      std::fprintf(stderr, "fuzz_topology: cluster_to_json does not read back:\n%s\n%s\n",
                   out.dump().c_str(), again.dump().c_str());
      std::abort();
    }
    const LinkConstants k = default_link_constants(c);
    const int n = c.num_gpus();
    for (CollectiveKind kind :
         {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::SendRecv}) {
      (void)alpha_beta_collective(c, k, kind, Bytes{1} << 30, n, std::min(n, c.gpus_per_node),
                                  c.nodes > 1);
    }
    if (n > 2048) return;
    exercise_topology(c, {});
    TopologyOptions small;
    small.nodes_per_leaf = 1 + c.nodes % 3;
    small.leaves_per_pod = 2;
    small.oversubscription = 3;
    exercise_topology(c, small);
  });
  return 0;
}
