#pragma once
// The cluster as a graph: GPUs, NVSwitch domains, PCIe switches, hosts, NICs and the scale-out
// fabric (leaf / spine / core switches), with a bandwidth and a latency on every directed link.
//
// What gets built (build_topology)
// --------------------------------
//   per NVLink domain   one NVSwitch vertex; every GPU of the domain has a link to it and one
//                       back, each nvlink_bandwidth per direction (NVSwitch systems are modelled
//                       as one non-blocking crossbar). Without NVSwitch: a full NVLink mesh,
//                       nvlink_bandwidth / (gpus_per_node - 1) per pair and direction.
//   per node            a host (CPU + DRAM) vertex and P PCIe switches, P = min(gpus, nics)
//                       (gpus when there is no NIC): GPU g hangs off switch g*P/gpus, NIC k off
//                       switch k*P/nics, so DGX gets one GPU + one NIC per switch, 4-NIC A100
//                       nodes two GPUs and one NIC per switch, AWS P5 one GPU and four NICs.
//                       GPU<->switch links carry pcie_bandwidth; NIC<->switch links too; the
//                       switch<->host link carries pcie_bandwidth per GPU below it.
//   scale-out           rail-fat-tree: the nodes are cut into scalable units (SU) of
//                       nodes_per_leaf nodes; SU s has one leaf per rail k, which connects NIC k
//                       of every node of the SU ("NIC k of every node on rail switch k").
//                       clos: one top-of-rack leaf per nodes_per_leaf nodes, connecting all their
//                       NICs. Leaves with D downlinks of nic_bandwidth get U = max(1, round(D /
//                       oversubscription)) uplinks that together carry D * nic_bandwidth /
//                       oversubscription (so uplink capacity = downlink capacity / ratio, exactly,
//                       whatever the rounding of U). Two tiers: U spines, each linked to every
//                       leaf. Three tiers: leaves are grouped into pods of leaves_per_pod leaves,
//                       each pod has its own U spines, and spine j of every pod links to the core
//                       plane j (leaves_per_pod cores per plane), non-blocking above the leaves.
//                       One leaf in total: no spine.
//
// Links are numbered densely from 0 (LinkId), one per directed edge, so sim/net's FlowNetwork can
// take them one for one as its links: for (l : topo.links()) net.add_link(l.bandwidth).
//
// Routing (route)
// ---------------
// Inside an NVLink domain a GPU reaches another through the NVSwitch (2 links). Across domains a
// flow leaves through a NIC of a chosen rail: from the GPU over PCIe when the NIC hangs off the
// GPU's own PCIe switch, otherwise first over NVLink to a GPU that owns that NIC (NCCL's PXN),
// then through the fabric to the same rail's NIC at the destination node, and into the
// destination GPU the same way reversed. In the fabric the flow follows a shortest path (BFS on
// the switch graph, Boost.Graph); where several next hops are equally short (ECMP), one is chosen
// deterministically:
//   DestinationModK (InfiniBand, Omni-Path; OpenSM's fat-tree routing): the index is taken from
//       the destination NIC's address (leaf ordinal x leaf ports + port on the leaf), digit by
//       digit (mod the number of choices at each hop): the first digit spreads the destinations
//       of one leaf over the spines, the next spreads the leaves (every rail's included) over the
//       cores, so a permutation of NIC pairs spreads over the uplinks without collisions;
//   EcmpHash (RoCE): a 64-bit mix of (source NIC, destination NIC, flow_hash), so different
//       flows between the same NICs may take different paths and colliding flows are possible,
//       as in real ECMP;
//   Spray (EFA: SRD sprays each flow's packets over up to 64 paths, Shalev et al., "A
//       Cloud-Optimized Transport Protocol for Elastic and Scalable HPC", IEEE Micro 2020): every
//       flow is split evenly over all equal-cost paths. The parallel links of a tier then carry
//       equal loads, so the builder makes each tier one bundle link of their summed capacity (one
//       spine per pod, one core): the same max-min rates, with one path per flow.
// Same inputs, same route, always.
//
// Cost: build O(V + E). route(): O(path length * degree); the BFS distances to each destination
// leaf are computed on first use over the switch subgraph only and cached (memory: one 16-bit
// distance per switch per destination leaf seen). Not thread-safe (the cache is mutable).
//
// Latencies (ASSUMPTIONS, see the constants in topology.cpp): NVLink nvlink_latency per GPU-GPU
// crossing (half on each link), PCIe 0.5 us per link, NIC<->leaf nic_latency / 2 each way, 0.1 us
// per switch-to-switch link.
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "sim/cluster/cluster.h"

namespace zerosim {

enum class VertexKind : std::uint8_t { Gpu, NvSwitch, PcieSwitch, Host, Nic, Leaf, Spine, Core };
const char* vertex_kind_name(VertexKind k);

// Which part of the machine a link belongs to (reports split traffic by it).
enum class LinkClass : std::uint8_t { NvLink, Pcie, Network };
const char* link_class_name(LinkClass c);

enum class Routing : std::uint8_t { Auto, DestinationModK, EcmpHash, Spray };

struct TopoVertex {
  VertexKind kind = VertexKind::Gpu;
  std::int32_t node = -1;    // owning node (GPU, PCIe switch, host, NIC), else -1
  std::int32_t index = -1;   // GPU: global rank; NIC: index in node (= rail); switch: ordinal
  std::int32_t group = -1;   // GPU, NVSwitch: NVLink domain; Leaf: SU/rack; Spine, Core: pod/plane
};

struct TopoEdge {
  std::uint32_t link = 0;    // LinkId
};

// Directed graph, one edge per direction; bidirectionalS so in-edges are available.
using TopoGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                        TopoVertex, TopoEdge>;
using VertexId = std::uint32_t;
using LinkId = std::uint32_t;

struct TopoLink {
  VertexId src = 0;
  VertexId dst = 0;
  double bandwidth = 0;  // bytes/s, this direction
  double latency = 0;    // seconds
  LinkClass cls = LinkClass::Network;
};

struct TopologyOptions {
  // rail-fat-tree: nodes per scalable unit (one leaf per rail each); clos: nodes per top-of-rack
  // leaf. 0 = default: rail-fat-tree min(nodes, 32) (DGX SuperPOD SU of 32 nodes), clos
  // max(1, 32 / nics_per_node) (half of a 64-port leaf facing down).
  int nodes_per_leaf = 0;
  // Three tiers only: leaves per pod. 0 = default: 4 SUs' worth of rail leaves (4 * rails), or
  // 16 top-of-rack leaves for clos.
  int leaves_per_pod = 0;
  // < 1 means "use the cluster's oversubscription".
  double oversubscription = 0;
  Routing routing = Routing::Auto;  // Auto: DestinationModK (infiniband, omnipath), Spray (efa),
                                    // EcmpHash (roce)
};

class Topology {
 public:
  const TopoGraph& graph() const { return g_; }
  const std::vector<TopoLink>& links() const { return links_; }
  const TopoLink& link(LinkId id) const { return links_.at(id); }
  std::size_t num_links() const { return links_.size(); }
  int num_gpus() const { return static_cast<int>(gpu_.size()); }
  int num_nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int nics_per_node() const { return nics_per_node_; }
  int num_leaves() const { return static_cast<int>(leaves_.size()); }
  int num_spines() const { return num_spines_; }
  int num_cores() const { return num_cores_; }
  int nodes_per_leaf() const { return nodes_per_leaf_; }
  Routing routing() const { return routing_; }

  VertexId gpu_vertex(int rank) const { return gpu_.at(rank); }
  VertexId nic_vertex(int node, int nic) const { return nic_.at(node * nics_per_node_ + nic); }
  VertexId nvswitch_vertex(int domain) const { return nvs_.at(domain); }
  VertexId host_vertex(int node) const { return host_.at(node); }
  int node_of(int rank) const { return rank / gpus_per_node_; }
  int domain_of(int rank) const { return graph()[gpu_.at(rank)].group; }
  bool same_nvlink_domain(int a, int b) const { return domain_of(a) == domain_of(b); }

  // NICs sharing the GPU's PCIe switch (its "rails"), in NIC order; empty without NICs.
  const std::vector<int>& local_nics(int rank) const;
  // The NIC a GPU uses by default: its first local NIC, or NIC (local rank * nics / gpus).
  int default_rail(int rank) const;
  // A GPU of `node` that owns NIC `rail` (the lowest-numbered one).
  int rail_gpu(int node, int rail) const;

  // Links of the route from GPU src to GPU dst (empty if src == dst). Across NVLink domains the
  // flow uses NIC `rail` at both ends (rail < 0: default_rail(src)); flow_hash picks among equal
  // paths (EcmpHash only). Throws std::invalid_argument for unknown ranks or a bad rail, and
  // InputError (key "cluster.nics_per_node") when two domains must talk and there are no NICs.
  std::vector<LinkId> route(int src, int dst, std::uint64_t flow_hash = 0, int rail = -1) const;
  // GPU <-> its NVSwitch (NVLS traffic) and GPU <-> host memory (offload copies).
  std::vector<LinkId> route_gpu_to_nvswitch(int rank) const;
  std::vector<LinkId> route_nvswitch_to_gpu(int rank) const;
  std::vector<LinkId> route_gpu_to_host(int rank) const;
  std::vector<LinkId> route_host_to_gpu(int rank) const;
  // Fabric part only: NIC (node_a, rail_a) to NIC (node_b, rail_b).
  std::vector<LinkId> route_nic_to_nic(int node_a, int rail_a, int node_b, int rail_b,
                                       std::uint64_t flow_hash = 0) const;

  // Sum of link latencies, seconds; min link bandwidth (bytes/s; +inf for an empty route).
  double route_latency(std::span<const LinkId> route) const;
  double route_bandwidth(std::span<const LinkId> route) const;

  // The link from u to v (std::invalid_argument if none).
  LinkId link_between(VertexId u, VertexId v) const;

 private:
  friend class TopologyBuilder;
  VertexId add_vertex(const TopoVertex& v);
  void add_duplex(VertexId a, VertexId b, double bandwidth, double latency, LinkClass cls);
  void add_simplex(VertexId a, VertexId b, double bandwidth, double latency, LinkClass cls);
  void append_gpu_to_nic(std::vector<LinkId>& out, int rank, int rail) const;
  void append_nic_to_gpu(std::vector<LinkId>& out, int rail, int rank) const;
  const std::vector<std::uint16_t>& distances_to_leaf(VertexId leaf) const;
  VertexId leaf_of_nic(VertexId nic) const;

  TopoGraph g_;
  std::vector<TopoLink> links_;
  std::vector<VertexId> gpu_, nic_, nvs_, host_, pcie_, leaves_;
  std::vector<int> gpu_pcie_;                 // rank -> index into pcie_ (global)
  std::vector<int> nic_pcie_;                 // node*nics+nic -> index into pcie_
  std::vector<std::uint32_t> nic_address_;    // node*nics+nic -> DestinationModK address
  std::vector<std::vector<int>> pcie_nics_;   // pcie switch -> NIC indices in node
  std::vector<std::vector<int>> pcie_gpus_;   // pcie switch -> local ranks
  std::vector<int> switch_index_;             // vertex -> dense switch index or -1
  int num_switches_ = 0;
  int nodes_ = 0, gpus_per_node_ = 0, nics_per_node_ = 0, nodes_per_leaf_ = 0;
  int num_spines_ = 0, num_cores_ = 0;
  bool nvswitch_ = true;
  Routing routing_ = Routing::DestinationModK;
  mutable std::unordered_map<VertexId, std::vector<std::uint16_t>> dist_cache_;
};

// The NICs on the PCIe switch of GPU `local_rank` of a node (the mapping build_topology uses: P =
// min(gpus, nics) switches, GPU g on switch g*P/gpus, NIC k on switch k*P/nics). Empty without NICs.
std::vector<int> local_nics_of(const ClusterSpec& cluster, int local_rank);

// Builds the graph of a cluster. Throws InputError with a key path for inputs it cannot build
// (no NICs on a multi-node cluster, non-positive bandwidths, unknown topology name).
Topology build_topology(const ClusterSpec& cluster, const TopologyOptions& options = {});

}  // namespace zerosim
