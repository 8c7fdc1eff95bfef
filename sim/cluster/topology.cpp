#include "sim/cluster/topology.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/visitors.hpp>

#include "sim/core/error.h"

namespace zerosim {

namespace {

// ASSUMPTION: per-link latencies that no preset states. PCIe: half of NCCL's per-hop PCI ring LL
// latency (1.0 us, src/graph/tuning.cc hwLat) per link, so GPU -> switch -> NIC costs one NCCL hop.
// Switch-to-switch: ~100 ns port-to-port plus cable, typical of NDR/HDR InfiniBand switches.
constexpr double kPcieLinkLatency = 0.5e-6;
constexpr double kSwitchLinkLatency = 0.1e-6;
// Default leaf sizing: a 64-port leaf with half its ports facing down (DGX SuperPOD SU: 32 nodes).
constexpr int kLeafDownPorts = 32;
constexpr int kDefaultSusPerPod = 4;
constexpr int kDefaultTorsPerPod = 16;
constexpr std::uint16_t kUnreached = std::numeric_limits<std::uint16_t>::max();

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool is_switch(VertexKind k) {
  return k == VertexKind::Leaf || k == VertexKind::Spine || k == VertexKind::Core;
}

}  // namespace

const char* vertex_kind_name(VertexKind k) {
  switch (k) {
    case VertexKind::Gpu: return "gpu";
    case VertexKind::NvSwitch: return "nvswitch";
    case VertexKind::PcieSwitch: return "pcie";
    case VertexKind::Host: return "host";
    case VertexKind::Nic: return "nic";
    case VertexKind::Leaf: return "leaf";
    case VertexKind::Spine: return "spine";
    case VertexKind::Core: return "core";
  }
  return "?";
}

const char* link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::NvLink: return "nvlink";
    case LinkClass::Pcie: return "pcie";
    case LinkClass::Network: return "network";
  }
  return "?";
}

VertexId Topology::add_vertex(const TopoVertex& v) {
  auto id = static_cast<VertexId>(boost::add_vertex(v, g_));
  switch_index_.push_back(is_switch(v.kind) ? num_switches_++ : -1);
  return id;
}

void Topology::add_simplex(VertexId a, VertexId b, double bandwidth, double latency,
                           LinkClass cls) {
  auto id = static_cast<LinkId>(links_.size());
  boost::add_edge(a, b, TopoEdge{id}, g_);
  links_.push_back({a, b, bandwidth, latency, cls});
}

void Topology::add_duplex(VertexId a, VertexId b, double bandwidth, double latency,
                          LinkClass cls) {
  add_simplex(a, b, bandwidth, latency, cls);
  add_simplex(b, a, bandwidth, latency, cls);
}

LinkId Topology::link_between(VertexId u, VertexId v) const {
  for (auto [e, end] = boost::out_edges(u, g_); e != end; ++e) {
    if (boost::target(*e, g_) == v) return g_[*e].link;
  }
  throw std::invalid_argument("topology: no link between vertices " + std::to_string(u) +
                              " and " + std::to_string(v));
}

std::vector<int> local_nics_of(const ClusterSpec& c, int local_rank) {
  std::vector<int> out;
  const int gpn = c.gpus_per_node, nics = c.nics_per_node;
  if (nics <= 0 || gpn <= 0) return out;
  const int switches = std::min(gpn, nics);
  const int mine = local_rank * switches / gpn;
  for (int k = 0; k < nics; ++k) {
    if (k * switches / nics == mine) out.push_back(k);
  }
  return out;
}

// Builds a Topology in tiers: the GPUs and their NVLink domains, each node's host, PCIe switches
// and NICs, then the scale-out fabric's leaves and the tiers above them.
class TopologyBuilder {
 public:
  TopologyBuilder(const ClusterSpec& c, const TopologyOptions& opt)
      : c_(c), opt_(opt), rail_(c.topology == "rail-fat-tree"), gpn_(c.gpus_per_node),
        nics_(c.nics_per_node), num_gpus_(c.nodes * c.gpus_per_node) {}

  Topology build() {
    check();
    t_.nodes_ = c_.nodes;
    t_.gpus_per_node_ = gpn_;
    t_.nics_per_node_ = nics_;
    t_.nvswitch_ = c_.nvswitch;
    if (opt_.routing != Routing::Auto) {
      t_.routing_ = opt_.routing;
    } else {
      t_.routing_ = (c_.fabric == "infiniband" || c_.fabric == "omnipath") ? Routing::DestinationModK
                    : c_.fabric == "efa"                                    ? Routing::Spray
                                                                            : Routing::EcmpHash;
    }
    scale_up();
    hosts();
    if (nics_ > 0) fabric();
    return std::move(t_);
  }

 private:
  void check() const {
    if (c_.nodes < 1 || c_.gpus_per_node < 1) {
      throw InputError("cluster.nodes", "a topology needs at least one node with one GPU");
    }
    if (!(c_.nvlink_bandwidth > 0) && c_.gpus_per_node > 1) {
      throw InputError("cluster.nvlink_bandwidth", "must be > 0 to connect the GPUs of a node");
    }
    if (!rail_ && c_.topology != "clos") {
      throw InputError("cluster.topology", "unknown topology '" + c_.topology +
                                               "'; expected one of: rail-fat-tree, clos");
    }
    if (c_.nodes > 1 && c_.nics_per_node < 1) {
      throw InputError("cluster.nics_per_node",
                       "a multi-node cluster needs at least one NIC per node");
    }
    if (c_.nics_per_node > 0 && !(c_.nic_bandwidth > 0)) {
      throw InputError("cluster.nic_bandwidth", "must be > 0");
    }
  }

  // GPUs, then the NVLink domains: an NVSwitch per domain, or all-to-all links shared evenly.
  void scale_up() {
    const int domain_size = std::max(1, std::min(c_.nvlink_domain_gpus, num_gpus_));
    const int num_domains = (num_gpus_ + domain_size - 1) / domain_size;
    for (int r = 0; r < num_gpus_; ++r) {
      t_.gpu_.push_back(t_.add_vertex({VertexKind::Gpu, r / gpn_, r, r / domain_size}));
    }
    if (c_.nvswitch) {
      for (int d = 0; d < num_domains; ++d) {
        VertexId s = t_.add_vertex({VertexKind::NvSwitch, -1, d, d});
        t_.nvs_.push_back(s);
        for (int r = d * domain_size; r < std::min(num_gpus_, (d + 1) * domain_size); ++r) {
          t_.add_duplex(t_.gpu_[r], s, c_.nvlink_bandwidth, c_.nvlink_latency / 2, LinkClass::NvLink);
        }
      }
    } else if (domain_size > 1) {
      const double per_pair = c_.nvlink_bandwidth / (domain_size - 1);
      for (int d = 0; d < num_domains; ++d) {
        const int end = std::min(num_gpus_, (d + 1) * domain_size);
        for (int a = d * domain_size; a < end; ++a) {
          for (int b = a + 1; b < end; ++b) {
            t_.add_duplex(t_.gpu_[a], t_.gpu_[b], per_pair, c_.nvlink_latency, LinkClass::NvLink);
          }
        }
      }
    }
  }

  // Hosts, PCIe switches and NICs.
  void hosts() {
    const double pcie = c_.pcie_bandwidth > 0 ? c_.pcie_bandwidth : c_.nic_bandwidth;
    const int per_node_switches = nics_ > 0 ? std::min(gpn_, nics_) : gpn_;
    t_.gpu_pcie_.assign(num_gpus_, -1);
    t_.nic_pcie_.assign(static_cast<std::size_t>(c_.nodes) * nics_, -1);
    t_.nic_address_.assign(static_cast<std::size_t>(c_.nodes) * nics_, 0);
    for (int n = 0; n < c_.nodes; ++n) {
      VertexId host = t_.add_vertex({VertexKind::Host, n, n, -1});
      t_.host_.push_back(host);
      const int first_switch = static_cast<int>(t_.pcie_.size());
      for (int s = 0; s < per_node_switches; ++s) {
        t_.pcie_.push_back(t_.add_vertex({VertexKind::PcieSwitch, n, first_switch + s, -1}));
        t_.pcie_gpus_.emplace_back();
        t_.pcie_nics_.emplace_back();
      }
      for (int g = 0; g < gpn_; ++g) {
        const int s = first_switch + g * per_node_switches / gpn_;
        t_.gpu_pcie_[n * gpn_ + g] = s;
        t_.pcie_gpus_[s].push_back(g);
        t_.add_duplex(t_.gpu_[n * gpn_ + g], t_.pcie_[s], pcie, kPcieLinkLatency, LinkClass::Pcie);
      }
      for (int s = first_switch; s < first_switch + per_node_switches; ++s) {
        const double up = pcie * std::max<std::size_t>(1, t_.pcie_gpus_[s].size());
        t_.add_duplex(t_.pcie_[s], host, up, kPcieLinkLatency, LinkClass::Pcie);
      }
      for (int k = 0; k < nics_; ++k) {
        const int s = first_switch + k * per_node_switches / nics_;
        VertexId nic = t_.add_vertex({VertexKind::Nic, n, k, -1});
        t_.nic_.push_back(nic);
        t_.nic_pcie_[n * nics_ + k] = s;
        t_.pcie_nics_[s].push_back(k);
        t_.add_duplex(nic, t_.pcie_[s], std::max(pcie, c_.nic_bandwidth), kPcieLinkLatency,
                      LinkClass::Pcie);
      }
    }
  }

  // Scale-out fabric: leaves (one per rail and scalable unit, or one per rack), then spines, and
  // with three tiers and several pods, cores.
  void fabric() {
    int per_leaf = opt_.nodes_per_leaf > 0
                       ? opt_.nodes_per_leaf
                       : (rail_ ? std::min(c_.nodes, kLeafDownPorts)
                                : std::max(1, kLeafDownPorts / nics_));
    per_leaf = std::max(1, per_leaf);
    t_.nodes_per_leaf_ = per_leaf;
    const int down = rail_ ? per_leaf : per_leaf * nics_;  // nominal downlinks per leaf
    double ratio = opt_.oversubscription >= 1 ? opt_.oversubscription : c_.oversubscription;
    if (!(ratio >= 1)) ratio = 1;
    // A sprayed fabric spreads every flow evenly over all its equal-cost paths, so each tier's
    // parallel links carry equal loads and act as one bundle of their summed capacity: one spine
    // per pod and one core, with bundle links, is that fabric's max-min allocation exactly.
    spray_ = t_.routing_ == Routing::Spray;
    up_links_ = spray_ ? 1 : std::max(1, static_cast<int>(std::lround(down / ratio)));
    up_each_ = down * c_.nic_bandwidth / ratio / up_links_;
    leaves(per_leaf, down);
    const int num_leaves = static_cast<int>(t_.leaves_.size());
    if (num_leaves <= 1) return;
    const int per_pod = opt_.leaves_per_pod > 0
                            ? opt_.leaves_per_pod
                            : (rail_ ? kDefaultSusPerPod * nics_ : kDefaultTorsPerPod);
    const int pods = (num_leaves + per_pod - 1) / per_pod;
    if (c_.fabric_tiers >= 3 && pods > 1) {
      spines_and_cores(per_pod, pods);
    } else {
      for (int j = 0; j < up_links_; ++j) {
        VertexId spine = t_.add_vertex({VertexKind::Spine, -1, j, 0});
        ++t_.num_spines_;
        for (int i = 0; i < num_leaves; ++i) {
          t_.add_duplex(t_.leaves_[i], spine, up_each_, kSwitchLinkLatency, LinkClass::Network);
        }
      }
    }
  }

  void leaves(int per_leaf, int down) {
    const int units = (c_.nodes + per_leaf - 1) / per_leaf;
    const double half = c_.nic_latency / 2;
    for (int u = 0; u < units; ++u) {
      const int leaves_here = rail_ ? nics_ : 1;
      for (int k = 0; k < leaves_here; ++k) {
        VertexId leaf =
            t_.add_vertex({VertexKind::Leaf, -1, static_cast<int>(t_.leaves_.size()), u});
        t_.leaves_.push_back(leaf);
        // A NIC's routing address is its leaf's ordinal times the leaf's nominal ports, plus its
        // port on the leaf: the order OpenSM's fat-tree routing assigns destinations in.
        const std::uint32_t base = static_cast<std::uint32_t>(t_.leaves_.size() - 1) * down;
        std::uint32_t port = 0;
        for (int n = u * per_leaf; n < std::min(c_.nodes, (u + 1) * per_leaf); ++n) {
          for (int j = rail_ ? k : 0; j < (rail_ ? k + 1 : nics_); ++j) {
            t_.add_duplex(t_.nic_[n * nics_ + j], leaf, c_.nic_bandwidth, half, LinkClass::Network);
            t_.nic_address_[n * nics_ + j] = base + port++;
          }
        }
      }
    }
  }

  void spines_and_cores(int per_pod, int pods) {
    const int num_leaves = static_cast<int>(t_.leaves_.size());
    std::vector<std::vector<VertexId>> spines(pods);
    for (int p = 0; p < pods; ++p) {
      for (int j = 0; j < up_links_; ++j) {
        spines[p].push_back(t_.add_vertex({VertexKind::Spine, -1, p * up_links_ + j, p}));
        ++t_.num_spines_;
      }
      for (int i = p * per_pod; i < std::min(num_leaves, (p + 1) * per_pod); ++i) {
        for (int j = 0; j < up_links_; ++j) {
          t_.add_duplex(t_.leaves_[i], spines[p][j], up_each_, kSwitchLinkLatency,
                        LinkClass::Network);
        }
      }
    }
    // Core plane j joins spine j of every pod with per_pod cores: each spine has as much
    // capacity up as down.
    const int cores_per_plane = spray_ ? 1 : per_pod;
    const double core_each = spray_ ? up_each_ * per_pod : up_each_;
    for (int j = 0; j < up_links_; ++j) {
      for (int u = 0; u < cores_per_plane; ++u) {
        VertexId core = t_.add_vertex({VertexKind::Core, -1, j * cores_per_plane + u, j});
        ++t_.num_cores_;
        for (int p = 0; p < pods; ++p) {
          t_.add_duplex(spines[p][j], core, core_each, kSwitchLinkLatency, LinkClass::Network);
        }
      }
    }
  }

  const ClusterSpec& c_;
  const TopologyOptions& opt_;
  const bool rail_;
  const int gpn_, nics_, num_gpus_;
  Topology t_;
  bool spray_ = false;
  int up_links_ = 1;
  double up_each_ = 0;
};

Topology build_topology(const ClusterSpec& c, const TopologyOptions& opt) {
  return TopologyBuilder(c, opt).build();
}

const std::vector<int>& Topology::local_nics(int rank) const {
  return pcie_nics_.at(gpu_pcie_.at(rank));
}

int Topology::default_rail(int rank) const {
  if (nics_per_node_ == 0) return -1;
  const auto& local = local_nics(rank);
  if (!local.empty()) return local.front();
  return (rank % gpus_per_node_) * nics_per_node_ / gpus_per_node_;
}

int Topology::rail_gpu(int node, int rail) const {
  if (rail < 0 || rail >= nics_per_node_) throw std::invalid_argument("topology: bad rail");
  const int s = nic_pcie_.at(node * nics_per_node_ + rail);
  if (pcie_gpus_[s].empty()) return -1;
  return node * gpus_per_node_ + pcie_gpus_[s].front();
}

void Topology::append_gpu_to_nic(std::vector<LinkId>& out, int rank, int rail) const {
  const int node = node_of(rank);
  const int s = nic_pcie_.at(node * nics_per_node_ + rail);
  const VertexId nic = nic_[node * nics_per_node_ + rail];
  if (gpu_pcie_[rank] == s) {
    out.push_back(link_between(gpu_[rank], pcie_[s]));
  } else {
    const int proxy = rail_gpu(node, rail);
    if (proxy >= 0 && same_nvlink_domain(proxy, rank)) {  // PXN: NVLink to the NIC's GPU
      auto hop = route(rank, proxy);
      out.insert(out.end(), hop.begin(), hop.end());
      out.push_back(link_between(gpu_[proxy], pcie_[s]));
    } else {  // through the host
      out.push_back(link_between(gpu_[rank], pcie_[gpu_pcie_[rank]]));
      out.push_back(link_between(pcie_[gpu_pcie_[rank]], host_[node]));
      out.push_back(link_between(host_[node], pcie_[s]));
    }
  }
  out.push_back(link_between(pcie_[s], nic));
}

void Topology::append_nic_to_gpu(std::vector<LinkId>& out, int rail, int rank) const {
  const int node = node_of(rank);
  const int s = nic_pcie_.at(node * nics_per_node_ + rail);
  const VertexId nic = nic_[node * nics_per_node_ + rail];
  out.push_back(link_between(nic, pcie_[s]));
  if (gpu_pcie_[rank] == s) {
    out.push_back(link_between(pcie_[s], gpu_[rank]));
  } else {
    const int proxy = rail_gpu(node, rail);
    if (proxy >= 0 && same_nvlink_domain(proxy, rank)) {
      out.push_back(link_between(pcie_[s], gpu_[proxy]));
      auto hop = route(proxy, rank);
      out.insert(out.end(), hop.begin(), hop.end());
    } else {
      out.push_back(link_between(pcie_[s], host_[node]));
      out.push_back(link_between(host_[node], pcie_[gpu_pcie_[rank]]));
      out.push_back(link_between(pcie_[gpu_pcie_[rank]], gpu_[rank]));
    }
  }
}

VertexId Topology::leaf_of_nic(VertexId nic) const {
  for (auto [e, end] = boost::out_edges(nic, g_); e != end; ++e) {
    VertexId v = static_cast<VertexId>(boost::target(*e, g_));
    if (g_[v].kind == VertexKind::Leaf) return v;
  }
  throw std::invalid_argument("topology: NIC without a leaf");
}

namespace {
struct SwitchOnly {
  const TopoGraph* g = nullptr;
  bool operator()(TopoGraph::vertex_descriptor v) const { return is_switch((*g)[v].kind); }
};
}  // namespace

const std::vector<std::uint16_t>& Topology::distances_to_leaf(VertexId leaf) const {
  auto it = dist_cache_.find(leaf);
  if (it != dist_cache_.end()) return it->second;
  // Every switch-to-switch link exists in both directions with the same capacity class, so the
  // BFS distance from the leaf equals the distance to it.
  boost::filtered_graph<TopoGraph, boost::keep_all, SwitchOnly> sw(g_, boost::keep_all{},
                                                                    SwitchOnly{&g_});
  std::vector<std::uint32_t> dist(boost::num_vertices(g_), 0);
  std::vector<boost::default_color_type> color(boost::num_vertices(g_));
  auto index = boost::get(boost::vertex_index, g_);
  boost::breadth_first_search(
      sw, leaf,
      boost::visitor(boost::make_bfs_visitor(boost::record_distances(
                         boost::make_iterator_property_map(dist.begin(), index),
                         boost::on_tree_edge())))
          .color_map(boost::make_iterator_property_map(color.begin(), index)));
  std::vector<std::uint16_t> out(num_switches_, kUnreached);
  for (std::size_t v = 0; v < dist.size(); ++v) {
    const int si = switch_index_[v];
    if (si >= 0 && color[v] != boost::white_color) out[si] = static_cast<std::uint16_t>(dist[v]);
  }
  return dist_cache_.emplace(leaf, std::move(out)).first->second;
}

std::vector<LinkId> Topology::route_nic_to_nic(int node_a, int rail_a, int node_b, int rail_b,
                                               std::uint64_t flow_hash) const {
  if (node_a < 0 || node_a >= nodes_ || node_b < 0 || node_b >= nodes_ || rail_a < 0 ||
      rail_a >= nics_per_node_ || rail_b < 0 || rail_b >= nics_per_node_) {
    throw std::invalid_argument("topology: bad NIC in route_nic_to_nic");
  }
  std::vector<LinkId> out;
  const VertexId a = nic_vertex(node_a, rail_a);
  const VertexId b = nic_vertex(node_b, rail_b);
  if (a == b) return out;
  const VertexId la = leaf_of_nic(a);
  const VertexId lb = leaf_of_nic(b);
  out.push_back(link_between(a, la));
  const auto& dist = distances_to_leaf(lb);
  std::uint64_t h = routing_ == Routing::DestinationModK
                        ? nic_address_[node_b * nics_per_node_ + rail_b]
                        : mix64(flow_hash ^ mix64((static_cast<std::uint64_t>(a) << 32) | b));
  VertexId cur = la;
  std::vector<std::pair<VertexId, LinkId>> next;
  while (cur != lb) {
    const std::uint16_t d = dist[switch_index_[cur]];
    if (d == kUnreached || d == 0) throw std::logic_error("topology: fabric is disconnected");
    next.clear();
    for (auto [e, end] = boost::out_edges(cur, g_); e != end; ++e) {
      VertexId v = static_cast<VertexId>(boost::target(*e, g_));
      if (switch_index_[v] >= 0 && dist[switch_index_[v]] + 1 == d) next.push_back({v, g_[*e].link});
    }
    std::size_t pick = 0;
    if (next.size() > 1) {
      pick = static_cast<std::size_t>(h % next.size());
      h = routing_ == Routing::DestinationModK ? h / next.size() : mix64(h);
    }
    out.push_back(next[pick].second);
    cur = next[pick].first;
  }
  out.push_back(link_between(lb, b));
  return out;
}

std::vector<LinkId> Topology::route(int src, int dst, std::uint64_t flow_hash, int rail) const {
  if (src < 0 || src >= num_gpus() || dst < 0 || dst >= num_gpus()) {
    throw std::invalid_argument("topology: rank out of range in route");
  }
  std::vector<LinkId> out;
  if (src == dst) return out;
  if (same_nvlink_domain(src, dst)) {
    if (nvswitch_) {
      const VertexId s = nvs_[domain_of(src)];
      out.push_back(link_between(gpu_[src], s));
      out.push_back(link_between(s, gpu_[dst]));
    } else {
      out.push_back(link_between(gpu_[src], gpu_[dst]));
    }
    return out;
  }
  if (nics_per_node_ == 0) {
    throw InputError("cluster.nics_per_node", "GPUs in different NVLink domains need NICs");
  }
  if (rail < 0) rail = default_rail(src);
  if (rail >= nics_per_node_) throw std::invalid_argument("topology: rail out of range");
  const int na = node_of(src);
  const int nb = node_of(dst);
  if (na == nb) {  // same node, different NVLink domain: through the host
    out.push_back(link_between(gpu_[src], pcie_[gpu_pcie_[src]]));
    out.push_back(link_between(pcie_[gpu_pcie_[src]], host_[na]));
    out.push_back(link_between(host_[na], pcie_[gpu_pcie_[dst]]));
    out.push_back(link_between(pcie_[gpu_pcie_[dst]], gpu_[dst]));
    return out;
  }
  append_gpu_to_nic(out, src, rail);
  auto mid = route_nic_to_nic(na, rail, nb, rail, flow_hash);
  out.insert(out.end(), mid.begin(), mid.end());
  append_nic_to_gpu(out, rail, dst);
  return out;
}

std::vector<LinkId> Topology::route_gpu_to_nvswitch(int rank) const {
  if (!nvswitch_) throw std::invalid_argument("topology: no NVSwitch");
  return {link_between(gpu_.at(rank), nvs_[domain_of(rank)])};
}

std::vector<LinkId> Topology::route_nvswitch_to_gpu(int rank) const {
  if (!nvswitch_) throw std::invalid_argument("topology: no NVSwitch");
  return {link_between(nvs_[domain_of(rank)], gpu_.at(rank))};
}

std::vector<LinkId> Topology::route_gpu_to_host(int rank) const {
  const int s = gpu_pcie_.at(rank);
  return {link_between(gpu_[rank], pcie_[s]), link_between(pcie_[s], host_[node_of(rank)])};
}

std::vector<LinkId> Topology::route_host_to_gpu(int rank) const {
  const int s = gpu_pcie_.at(rank);
  return {link_between(host_[node_of(rank)], pcie_[s]), link_between(pcie_[s], gpu_[rank])};
}

double Topology::route_latency(std::span<const LinkId> route) const {
  double s = 0;
  for (LinkId l : route) s += links_.at(l).latency;
  return s;
}

double Topology::route_bandwidth(std::span<const LinkId> route) const {
  double b = std::numeric_limits<double>::infinity();
  for (LinkId l : route) b = std::min(b, links_.at(l).bandwidth);
  return b;
}

}  // namespace zerosim
