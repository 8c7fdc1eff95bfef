#include "sim/collective/nccl_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "sim/cluster/topology.h"
#include "sim/core/error.h"

namespace zerosim::nccl {

namespace {

constexpr double kEps = 1e-9;

// NCCL's PCI link bandwidth for an x16 link: width * speed / 80 (src/graph/topo.cc), i.e. 12 GB/s
// at Gen3 (PCI_BW) doubling per generation.
double nccl_pci_bw(int gen) { return 12.0 * std::pow(2.0, std::max(1, gen) - 3); }

// The search of src/graph/search.cc ncclTopoCompute, reduced to what decides the result on the
// topologies zerosim builds: start at the fastest speed the GPU's path allows, keep the best
// nChannels x speed, stop when it reaches the GPU's total bandwidth or when the next speed is
// below 0.49 x the best one. `channels_at(s)` is how many channels of speed s fit.
template <class F>
GraphInfo search_speeds(const std::vector<float>& speeds, double max_bw, double total_bw,
                        int min_channels, F channels_at) {
  GraphInfo best;
  std::size_t start = 0;
  while (start + 1 < speeds.size() &&
         (speeds[start] > max_bw + kEps || speeds[start] * min_channels > total_bw + kEps)) {
    ++start;
  }
  double best_total = 0;
  for (std::size_t i = start; i < speeds.size(); ++i) {
    const double s = speeds[i];
    const int c = channels_at(s);
    if (c >= 1 && c * s > best_total + kEps) {
      best = {c, s, s};
      best_total = c * s;
    }
    if (best_total >= total_bw - kEps) break;
    if (i + 1 < speeds.size() && best_total > 0 && speeds[i + 1] / best.bw_inter <= 0.49) break;
  }
  if (best.n_channels == 0) best = {1, 0.1, 0.1};  // NCCL's "simple order" fallback
  return best;
}

// src/graph/search.cc end of ncclTopoCompute: duplicate channels with enough bandwidth.
GraphInfo duplicate_channels(GraphInfo g, Arch arch, int max_channels) {
  if (g.bw_intra < 25.0) return g;
  if (arch >= Arch::Hopper && g.bw_intra < 50.0 && g.n_channels > 4) return g;
  const int dup = std::min(g.n_channels * 2, max_channels);
  const int div = (dup + g.n_channels - 1) / g.n_channels;
  g.bw_intra /= div;
  g.bw_inter /= div;
  g.n_channels = dup;
  return g;
}

int floor_div(double a, double b) { return static_cast<int>(std::floor(a / b + kEps)); }

// Ranks, their NCCL nodes (NVLink domains, in order of first appearance) and ranks per node.
void place_ranks(const ClusterSpec& c, std::span<const std::int32_t> ranks, CommGraph& m) {
  m.ranks.assign(ranks.begin(), ranks.end());
  m.n_ranks = static_cast<int>(ranks.size());
  const int num_gpus = c.num_gpus();
  const int domain = std::max(1, std::min(c.nvlink_domain_gpus, num_gpus));
  {
    std::set<std::int32_t> seen;
    for (std::int32_t r : ranks) {
      if (r < 0 || r >= num_gpus) {
        throw std::invalid_argument("nccl: rank " + std::to_string(r) + " outside the cluster's " +
                                    std::to_string(num_gpus) + " GPUs");
      }
      if (!seen.insert(r).second) {
        throw std::invalid_argument("nccl: rank " + std::to_string(r) + " twice in a group");
      }
    }
  }
  // Domain -> its NCCL node index: one lookup per rank, so that a group of a million ranks over
  // a hundred thousand domains is not a quadratic search.
  std::unordered_map<int, int> node_of_domain;
  node_of_domain.reserve(ranks.size());
  std::vector<int> per_node;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto [it, added] =
        node_of_domain.try_emplace(ranks[i] / domain, static_cast<int>(per_node.size()));
    if (added) {
      per_node.push_back(0);
      m.node_first.push_back(static_cast<int>(i));
    }
    m.node_index.push_back(it->second);
    ++per_node[it->second];
  }
  m.n_nodes = static_cast<int>(per_node.size());
  m.ppn = m.n_ranks > 0 ? *std::max_element(per_node.begin(), per_node.end()) : 0;
}

// What NCCL's topology detection reads of the hardware: the GPU's arch row, its NVLink and PCIe
// speeds in NCCL's units, and the NICs the group's GPUs can reach.
void read_links(const ClusterSpec& c, std::span<const std::int32_t> ranks, const Constants& k,
                CommGraph& m) {
  m.arch = arch_of(c.gpu);
  if (!k.has_arch[idx(m.arch)]) {
    throw InputError("cluster.nccl_version",
                     std::string("NCCL ") + version_name(k.version) + " has no tuning rows for " +
                         arch_name(m.arch) + " GPUs; use 2.27 or later");
  }
  // NVLink: links x NCCL's per-link bandwidth (topo.h). A link carries 25 GB/s per direction up to
  // NVLink4 and 50 GB/s on NVLink5.
  const double per_link_spec = m.arch == Arch::Blackwell ? 50e9 : 25e9;
  const long links = std::lround(c.nvlink_bandwidth / per_link_spec);
  const double pci = nccl_pci_bw(c.pcie_gen);
  if (links > 0) {
    m.intra_hw = Hw::NvLink;
    m.nvlink_total = links * k.nvlink_bw_per_link[idx(m.arch)];
  } else {
    m.intra_hw = Hw::Pci;
    m.nvlink_total = pci;
  }
  const double nic = c.nic_bandwidth / 1e9;
  m.inter_max_bw = std::min(nic, pci);
  if (m.n_nodes > 1) {
    // NICs on the PCIe switches of the communicator's GPUs, per NCCL node; the least of them.
    // One pass over the ranks, each (node, NIC) filed under its NCCL node, then counted.
    std::vector<std::vector<std::pair<int, int>>> nics(static_cast<std::size_t>(m.n_nodes));
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const int node = ranks[i] / c.gpus_per_node;
      for (int n : local_nics_of(c, ranks[i] % c.gpus_per_node))
        nics[static_cast<std::size_t>(m.node_index[i])].push_back({node, n});
    }
    int least = std::numeric_limits<int>::max();
    for (auto& node_nics : nics) {
      std::sort(node_nics.begin(), node_nics.end());
      const auto distinct = std::unique(node_nics.begin(), node_nics.end()) - node_nics.begin();
      least = std::min(least, static_cast<int>(distinct));
    }
    m.nics = least;
    if (m.nics < 1) {
      throw InputError("cluster.nics_per_node", "a group spanning nodes needs NICs");
    }
    // NCCL's hwLat NET values already hold 2.7 us per ring LL hop (the presets' nic_latency for
    // InfiniBand); a slower fabric (EFA) adds the difference as the graph's latencyInter.
    m.latency_inter_us = std::max(0.0, c.nic_latency * 1e6 - 2.7);
  }
}

// The ring graph (trees reuse it) and the channels the kernels run on.
void search_ring(const ClusterSpec& c, const Constants& k, CommGraph& m) {
  const Arch a = m.arch;
  const int ring_max = k.ring_graph_max_channels;
  const double nvl = m.nvlink_total;
  if (m.n_nodes == 1) {
    m.ring = search_speeds(k.speed_intra[idx(a)], nvl, nvl, 1,
                           [&](double s) { return std::min(ring_max, floor_div(nvl, s)); });
  } else {
    const double pci = nccl_pci_bw(c.pcie_gen);
    const double maxbw = m.inter_max_bw;
    m.ring = search_speeds(k.speed_inter[idx(a)], maxbw, nvl + pci, 1, [&](double s) {
      if (s > maxbw + kEps) return 0;
      int ch = m.nics * floor_div(maxbw, s);
      if (m.ppn > 1) ch = std::min(ch, floor_div(nvl, s));
      return std::min(ring_max, ch);
    });
  }
  m.ring = duplicate_channels(m.ring, a, ring_max);
  m.tree = m.ring;  // NCCL first tries the ring's channel count for trees ("same nChannels")
  m.comm_channels = std::min(k.max_channels, 2 * m.ring.n_channels);
}

// The NVLS graph, where NVLink SHARP is available and enabled.
void search_nvls(const ClusterSpec& c, const Constants& k, bool nvls_enable, CommGraph& m) {
  const Arch a = m.arch;
  const double nvl = m.nvlink_total;
  m.nvls_support = c.nvls && nvls_enable && a >= Arch::Hopper && m.ppn >= 2 &&
                   m.intra_hw == Hw::NvLink && c.nvswitch && m.ppn <= 32;
  if (!m.nvls_support) return;
  // NVLS channel = one head GPU; the NVSwitch pulls from and pushes to every GPU for every
  // channel and twice for the head's own (ncclTopoSearchTryNvls), so each GPU's NVLinks carry
  // (heads + 1) x speed.
  if (m.n_nodes == 1) {
    const int heads = m.ppn;
    const double tree_total = nvl * heads / (heads - 1.0);
    m.nvls = search_speeds(k.speed_intra[idx(a)], nvl, tree_total, heads, [&](double s) {
      return (heads + 1) * s <= nvl + kEps ? heads : 0;
    });
    // search_speeds keeps the best total; NVLS keeps the first feasible (fastest) speed.
    for (float s : k.speed_intra[idx(a)]) {
      if (s <= nvl + kEps && s * heads <= tree_total + kEps && (heads + 1) * s <= nvl + kEps) {
        m.nvls = {heads, s, s};
        break;
      }
    }
  } else {
    const int heads = std::min(m.nics, m.ppn);
    m.nvls = {0, 0, 0};
    for (float s : k.speed_inter[idx(a)]) {
      if (s <= m.inter_max_bw + kEps && (heads + 1) * s <= nvl + kEps) {
        m.nvls = {heads, s, s};
        break;
      }
    }
    if (m.nvls.n_channels == 0) m.nvls_support = false;
  }
  m.nvls_channels = k.nvls_channels[idx(a)] > 0 ? k.nvls_channels[idx(a)] : 16;
}

}  // namespace

Arch arch_of(const GpuSpec& gpu) {
  switch (gpu.generation) {
    case GpuGeneration::Volta: return Arch::Volta;
    case GpuGeneration::Ampere: return Arch::Ampere;
    case GpuGeneration::Hopper: return Arch::Hopper;
    case GpuGeneration::Blackwell: return Arch::Blackwell;
  }
  return Arch::Hopper;
}

CommGraph search_graphs(const ClusterSpec& cluster, std::span<const std::int32_t> ranks,
                        const Constants& k, bool nvls_enable) {
  CommGraph m;
  place_ranks(cluster, ranks, m);
  read_links(cluster, ranks, k, m);
  search_ring(cluster, k, m);
  search_nvls(cluster, k, nvls_enable, m);
  return m;
}

}  // namespace zerosim::nccl
