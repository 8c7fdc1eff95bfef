#pragma once
// FlowComm: the flow-level CommBackend (`sim.network=flow`). Collectives become flows on the
// cluster's topology and share its links max-min fairly with every other collective in flight,
// so a pipeline send and a data-parallel all-reduce crossing the same NIC slow each other down.
// The closed-form backends (alpha_beta.h, nccl_backend.h) stay as the fast path without contention.
//
// What start() does with collective c of group g
// ----------------------------------------------
//  1. The cluster ranks of the call: plan.cost_members(g) for a folded plan (the ranks the
//     collective really spans), else the group's members, mapped through plan.real_rank when the
//     plan has one. Communicator order = that order (for SendRecv: sender first, as the plan
//     builders lay out pipeline groups).
//  2. NCCL's choice and zerosim's closed form for (kind, bytes, ranks) (nccl_model.h), laid out
//     as concurrent flows and routed on the topology (nccl_plan.h build_plan + route_plan): per
//     channel one flow per ring edge / tree edge / NVSwitch port, AllToAll one flow per pair,
//     SendRecv one flow per sender NIC across nodes (else one), each with its wire bytes.
//  3. Every flow is injected at `now` with the plan's alpha (launch + NCCL latency + pipeline
//     term) as its latency phase, then shares bandwidth (SimGrid's network model: latency is a phase). The collective ends when
//     its last flow ends. A call with no flows (one rank, zero bytes) ends after the closed form's
//     own time, through a zero-byte, linkless flow (so it still goes through the network's clock).
// The routed layout is computed once per (group, kind, bytes) and cached (flat arrays), so a
// plan's millionth bucket all-reduce costs only the injection. Flows of a layout with the same
// route and the same bytes (NCCL channels that share a rail, hence their NIC and in-node chains)
// are injected as one weighted flow (flow_network.h: bit-identical to injecting them one by one),
// which removes 44 % of the flows of a 4,096-GPU tree all-reduce.
//
// Agreement with the closed form (the contract the tests check)
// ------------------------------------------------------------
// route_plan scales wire bytes so that, on an idle network, the flows end after exactly the
// bandwidth time NcclAnalyticalComm (with the same topology) charges, and every flow waits the same
// alpha, so the two backends agree up to rounding: the picosecond rounding of the alpha and of
// each flow's end (2 ps), and whole bytes per flow (a flow carries ceil or floor of its exact
// share, a few bytes at its fair-share rate: 0 to ~200 ps, <= 5e-6 relative at 4 KiB, <= 6e-9
// at 1 GiB over the presets and shapes of tests/collective/test_flow_backend.cpp). With
// contention FlowComm is slower, by what max-min sharing says.
//
// Traffic classes: flows of group g carry traffic_class_of_group[g] (pass
// static_cast<uint8_t>(TrainingPlan::group_kind[g]): 0 = DP, 1 = TP, 2 = PP, 3 = EP, 4 = CP);
// groups the vector does not cover get kOtherTraffic (5). Classes only label bytes in the link
// report.
//
// Engine protocol and cost: one pending event. next_completion() is the earliest of a collective
// already known to be finished and the network's next date (which may be a latency end or a flow
// that is not its collective's last: pop_completed then reports nothing, which the engine
// allows). pop_completed advances the network, drains its completions into reused buffers and
// allocates nothing in steady state. Determinism: no unordered containers are iterated; equal
// inputs give the same completions in the same order, bit for bit.
//
// Folded plans (sim.ranks=folded): a DP collective is injected over all the cluster ranks it
// stands for. The other replicas' TP and PP collectives are not in the plan; with
// FlowCommOptions::replicas (simulate sets dp and stride tp) a folded collective whose flows
// reach the fabric (a NIC or a switch link) is also injected once per other replica it stands
// for, its ranks shifted by the replica's offset, so that their contention on NICs, leaves and
// spines is played. Copies of collectives that stay inside a node are left out: there another
// replica's copy could only meet, on its own node, the DP flows the folded replica's copy meets
// on its own. When the collective ends (replica_completion):
//   Own (default)  when the folded replica's own copy ends; the other copies are load until
//                  they end (and while they run, the group's next collective gets no copies:
//                  those replicas are behind, and copies must not pile up on a slower path);
//   Slowest        when the last copy ends (every replica waits for the slowest, at every one).
// Both are exact when the replicas see the same contention (test: a 16:1 clos where pairs of
// replicas share uplinks; the folded step equals the unfolded one). When they do not, the truth
// (sim.ranks=all: each replica pays its own delays, the step is the slowest replica's) lies
// between: Slowest compounds a different slowest replica at every pipeline boundary. Measured on
// the 15 published runs where copies change anything (docs/PERFORMANCE.md), error against the
// unfolded step: no copies mean 1.6 % (worst -9.8 %), Own 1.1 % (worst -9.8 %), Slowest 3.3 %
// (worst +20 %, deep pipelines on destination-routed fabrics), so Own is the default; Slowest
// is exact where one replica is the slowest throughout (TP across nodes under ECMP hashing: the
// -9.8 % case). DP sub-groups (a shard, every k-th replica) get copies for the other members of
// their partition.
//
// A second job sharing the fabric (whatif.background_*, add_background_job)
// -----------------------------------------------------------------------
// The topology is built for the cluster's N nodes plus the other job's B nodes. Placement says
// which topology nodes this job gets: Interleaved alternates them (this job's node, the other
// job's, ... until one job runs out), so both jobs sit under the same leaves and cross the same
// spines; After gives this job the first N and the other job the last B, so they share a leaf only
// at the seam (a non-blocking two-tier fabric then keeps them apart). Everything of this job (the
// plan's ranks, degraded nodes) is mapped onto its topology nodes; the NCCL model sees the same
// group shapes, hence makes the same choices. Placement works in whole NVLink domains.
// The other job is persistent traffic from its NICs, injected at time 0 and never finishing
// (endless flows, traffic class "other"): Ring = node i -> node i+1 (mod B), AllToAll = every
// ordered pair, on every rail (NIC k to NIC k), each flow offered at load x nic_bandwidth (a rate
// cap in the max-min solver). It takes its max-min share of every link it crosses, so this job's
// collectives slow down exactly as much as max-min sharing with it says; with the cap below the
// fair share the other job leaves the rest to this one. The link report counts the bytes it moved
// by the makespan as traffic class "other".
//
// One FlowComm plays one plan at a time: start() with a different Plan object while collectives
// are in flight is a std::logic_error (caches keyed by group are dropped on a plan change).
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster/topology.h"
#include "sim/collective/nccl_model.h"
#include "sim/core/engine.h"
#include "sim/net/flow_network.h"

namespace zerosim {

inline constexpr std::uint8_t kDpTraffic = 0, kTpTraffic = 1, kPpTraffic = 2, kEpTraffic = 3,
                               kCpTraffic = 4, kOtherTraffic = 5;
inline constexpr int kNumTrafficClasses = net::kTrafficClasses;  // 6
const char* traffic_class_name(int cls);  // "dp", "tp", "pp", "ep", "cp", "other"

// The other job of "A second job sharing the fabric" above.
struct BackgroundJob {
  enum class Placement : std::uint8_t { Interleaved, After };
  enum class Pattern : std::uint8_t { Ring, AllToAll };
  int nodes = 0;  // B >= 1 (B = 1: a ring or all-to-all with no pair sends nothing)
  Placement placement = Placement::Interleaved;
  Pattern pattern = Pattern::Ring;
  double load = 1.0;  // (0, 1]: each flow's offered rate, as a fraction of nic_bandwidth
};

// When a folded collective with other replicas' copies ends (see "Folded plans").
enum class ReplicaCompletion : std::uint8_t {
  Own,      // when the folded replica's own copy ends; the others' are load until they end
  Slowest,  // when the last copy ends (every replica waits for the slowest, at every collective)
};

struct FlowCommOptions {
  nccl::ModelOptions nccl;            // NCCL version, forced algorithm/protocol, launch overhead
  TopologyOptions topology;           // leaf sizes, oversubscription override, routing
  net::SolverMode solver = net::SolverMode::Incremental;
  // A folded plan (sim.ranks=folded) stands for `replicas` data-parallel replicas, replica d's
  // copy of the folded replica's cluster rank r being r + d x replica_rank_stride (Megatron's
  // rank order: stride = tp). With replicas > 1, folded collectives that reach the fabric are
  // injected once per replica they stand for (see "Folded plans" above).
  int replicas = 1;
  int replica_rank_stride = 0;
  ReplicaCompletion replica_completion = ReplicaCompletion::Own;
};

// Finer link classes than the topology's LinkClass, by the kinds of the link's two ends.
enum class LinkKind : std::uint8_t {
  NvLink,     // GPU <-> NVSwitch (or GPU <-> GPU without NVSwitch)
  Pcie,       // GPU or NIC <-> PCIe switch
  Host,       // PCIe switch <-> host CPU/DRAM
  Nic,        // NIC <-> leaf (the node's scale-out ports)
  LeafSpine,  // leaf <-> spine
  SpineCore,  // spine <-> core (three tiers)
};
inline constexpr int kNumLinkKinds = 6;
const char* link_kind_name(LinkKind k);  // "nvlink", "pcie", "host", "nic", "leaf_spine", "spine_core"
LinkKind link_kind(const Topology& topo, LinkId link);
// "gpu3->nvswitch0", "node1.nic2->leaf5", "leaf5->spine0" ... (stable, for reports and traces).
std::string link_name(const Topology& topo, LinkId link);

// Use of one class of links over a run (JSON: one object of LinkReport::to_json's "links").
struct LinkKindUsage {
  LinkKind kind = LinkKind::NvLink;
  std::size_t links = 0;             // directed links of this kind in the topology
  std::size_t used_links = 0;        // of which carried any bytes
  // The busiest link: largest carried bytes / capacity (ties: lowest LinkId).
  LinkId busiest = 0;
  std::string busiest_name;
  double busiest_capacity = 0;       // bytes/s, one direction
  double busiest_utilization = 0;    // carried bytes / (capacity x makespan), 0..1
  double busiest_busy_fraction = 0;  // time with >= 1 flow sharing it / makespan, 0..1
  double mean_utilization = 0;       // over all `links` of the kind (idle ones count as 0)
  // Bytes crossing links of this kind by traffic class (a flow's bytes counted once per link of
  // this kind it crosses), completed flows only: exact integers.
  std::array<Bytes, kNumTrafficClasses> bytes{};
};

// What the lead puts in the JSON report (key "network"; see to_json for the exact keys).
struct LinkReport {
  SimTime makespan = 0;
  std::vector<LinkKindUsage> kinds;  // in LinkKind order, kinds the topology has
  // Per traffic class: NCCL payload bytes of the flows injected (what the algorithm moves between
  // GPUs, each flow counted once) and wire bytes (payload x the protocol scale of route_plan,
  // what occupies links).
  std::array<Bytes, kNumTrafficClasses> payload_bytes{};
  std::array<Bytes, kNumTrafficClasses> wire_bytes{};
  std::uint64_t collectives = 0;     // collectives started
  std::uint64_t flows = 0;           // flows injected (NCCL's flows, a weighted flow counting its weight)
  std::uint64_t network_flows = 0;   // the same as the network's (weighted) flows
  std::uint64_t replica_copies = 0;  // other replicas' copies injected with folded collectives
  std::uint64_t layouts = 0;         // distinct (group, kind, bytes) layouts routed
  // The other job on the fabric, when there is one (nodes == 0: none): its flows and the bytes
  // they moved by the makespan (also in payload/wire "other" and the links' "other" bytes).
  BackgroundJob background;
  std::uint64_t background_flows = 0;
  Bytes background_bytes = 0;
  net::SolverCounters solver;

  // {"makespan_s", "collectives", "flows", "layouts",
  //  "traffic": {"dp": {"payload_bytes", "wire_bytes"}, "tp": ..., "pp": ..., "other": ...},
  //  "links": {"nvlink": {"links", "used_links", "busiest", "busiest_capacity_Bps",
  //                        "busiest_utilization", "busiest_busy_fraction", "mean_utilization",
  //                        "bytes": {"dp", "tp", "pp", "other"}}, "pcie": ..., "nic": ...},
  //  "replica_copies": other replicas' copies injected with folded collectives,
  //  "solver": {"batches", "solves", "links_solved", "flows_solved", "flows_redated"},
  //  "background": {"nodes", "placement", "pattern", "load", "flows", "bytes"} (only with one)}
  nlohmann::json to_json() const;
};

class FlowComm : public CommBackend {
 public:
  // Builds the topology of `cluster` (InputError for clusters it cannot build) and one network
  // link per topology link, with the link's bandwidth.
  explicit FlowComm(const ClusterSpec& cluster, FlowCommOptions options = {},
                    std::vector<std::uint8_t> traffic_class_of_group = {});

  void start(const Plan& plan, std::uint32_t c, SimTime now) override;
  SimTime next_completion() const override;
  void pop_completed(SimTime now, std::vector<std::uint32_t>& done) override;

  // Link use from time 0 to `makespan` (>= the last event; the engine's makespan). O(links).
  LinkReport link_report(SimTime makespan) const;

  // A degraded node (of this job): every link between one of its NICs and the fabric runs at
  // `factor` of its bandwidth, in both directions. Call before the first collective.
  void scale_node_nics(int node, double factor);

  // Puts the cluster beside another job's `job.nodes` nodes on a larger fabric and starts that
  // job's persistent flows (see the header). Call first: before scale_node_nics and the first
  // collective (it rebuilds the topology and the network); std::logic_error otherwise or when
  // called twice, std::invalid_argument for a bad job, InputError when the larger cluster cannot
  // be built (key whatif.background_nodes).
  void add_background_job(const BackgroundJob& job);
  // The topology node of this job's node `node` (identity without a background job).
  int topology_node(int node) const;
  // The background flows started (unit flows), 0 without a background job.
  std::size_t background_flows() const { return background_.size(); }

  // For tests and reports: the same model and topology give NcclAnalyticalComm(model(),
  // &topology()) the closed form this backend agrees with on an idle network.
  const Topology& topology() const { return topo_; }
  const nccl::NcclModel& model() const { return model_; }
  const net::FlowNetwork& network() const { return net_; }
  std::size_t in_flight() const { return in_flight_; }

 private:
  struct Layout {               // one routed (group, kind, bytes)
    std::uint32_t flow_begin = 0;  // in flows_
    std::uint32_t flow_count = 0;  // weighted flows
    std::uint32_t unit_flows = 0;  // NCCL's flows (sum of the weights)
    SimTime empty_duration = 0; // flow_count == 0: the closed form's time
    std::uint32_t copies = 0;   // other replicas' copies included (folded plans)
    std::uint32_t own_flows = 0;  // flows of the folded replica's own copy
    Bytes copy_payload = 0;     // of the copies
    Bytes copy_wire = 0;
    Bytes payload = 0;
    Bytes wire = 0;
  };
  struct LayoutFlow {
    std::uint32_t link_begin = 0;  // in links_
    std::uint32_t link_count = 0;
    std::uint32_t weight = 1;      // identical NCCL flows it stands for
    Bytes bytes = 0;               // wire bytes (of one of them)
    SimTime latency = 0;           // its copy's alpha
    bool shadow = false;           // another replica's copy
  };
  struct BackgroundFlow {
    net::FlowId id;
    std::uint32_t link_begin = 0;  // in background_links_
    std::uint32_t link_count = 0;
  };
  struct Ready {
    SimTime time;
    std::uint32_t c;
  };

  void bind(const Plan& plan);
  void build_network();
  void absorb(SimTime now);
  std::span<const std::int32_t> cluster_ranks(const Plan& plan, int g);
  std::vector<int> replica_shifts(std::span<const std::int32_t> ranks) const;
  const Layout& layout(const Plan& plan, const Collective& coll);

  FlowCommOptions options_;
  ClusterSpec cluster_;
  Topology topo_;
  nccl::NcclModel model_;
  net::FlowNetwork net_;
  std::vector<std::uint8_t> traffic_class_of_group_;
  // this job's node -> topology node (empty: identity), and the other job
  std::vector<std::int32_t> node_map_;
  BackgroundJob background_job_;
  std::vector<BackgroundFlow> background_;
  std::vector<LinkId> background_links_;
  bool capacities_changed_ = false;
  static constexpr std::uint64_t kShadowBit = std::uint64_t{1} << 62;  // | group
  static constexpr std::uint64_t kBackgroundTag = std::uint64_t{1} << 63;

  // per plan (dropped on a plan change)
  const Plan* plan_ = nullptr;
  std::vector<std::vector<std::int32_t>> group_ranks_;  // cluster ranks per group, lazily
  std::vector<bool> group_ranks_known_;
  std::map<std::tuple<std::int32_t, std::uint8_t, Bytes>, std::uint32_t> layout_index_;
  std::vector<Layout> layouts_;
  std::vector<LayoutFlow> flows_;
  std::vector<LinkId> links_;
  std::vector<std::uint32_t> outstanding_;  // per collective: flows not yet completed
  std::vector<std::uint32_t> shadows_in_flight_;  // per group: other replicas' flows (Own)

  // running state
  std::vector<net::Completion> completions_;  // scratch
  std::vector<Ready> ready_;                  // finished, not yet popped (time order)
  std::size_t in_flight_ = 0;
  std::array<Bytes, kNumTrafficClasses> payload_bytes_{};
  std::array<Bytes, kNumTrafficClasses> wire_bytes_{};
  std::uint64_t collectives_ = 0;
  std::uint64_t flows_started_ = 0;
  std::uint64_t network_flows_started_ = 0;
  std::uint64_t replica_copies_ = 0;
};

}  // namespace zerosim
