#pragma once
// FlowComm: the flow-level CommBackend (`sim.network=flow`). Collectives become flows on the
// cluster's topology and share its links max-min fairly with every other collective in flight,
// so a pipeline send and a data-parallel all-reduce crossing the same NIC slow each other down.
// The analytical backends (analytical.h, nccl_backend.h) stay as the fast path without contention.
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
//     term) as its latency phase, then shares bandwidth (STYLE habit 5). The collective ends when
//     its last flow ends. A call with no flows (one rank, zero bytes) ends after the closed form's
//     own time, through a zero-byte, linkless flow (so it still goes through the network's clock).
// The routed layout is computed once per (group, kind, bytes) and cached (flat arrays), so a
// plan's millionth bucket all-reduce costs only the injection.
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
// static_cast<uint8_t>(TrainingPlan::group_kind[g]): 0 = DP, 1 = TP, 2 = PP); groups the vector
// does not cover get kOtherTraffic (3). Classes only label bytes in the link report.
//
// Engine protocol and cost: one pending event. next_completion() is the earliest of a collective
// already known to be finished and the network's next date (which may be a latency end or a flow
// that is not its collective's last: pop_completed then reports nothing, which the engine
// allows). pop_completed advances the network, drains its completions into reused buffers and
// allocates nothing in steady state. Determinism: no unordered containers are iterated; equal
// inputs give the same completions in the same order, bit for bit.
//
// Folded plans (sim.ranks=folded): a DP collective is injected over all the cluster ranks it
// stands for, but the other replicas' TP and PP traffic is not in the plan, so contention from
// it is missing. Exact when nothing contends (test: the folded tiny step equals the unfolded one);
// with sim.network=flow prefer unfolded plans where TP/PP traffic shares NICs with DP.
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

inline constexpr std::uint8_t kDpTraffic = 0, kTpTraffic = 1, kPpTraffic = 2, kOtherTraffic = 3;
inline constexpr int kNumTrafficClasses = net::kTrafficClasses;  // 4
const char* traffic_class_name(int cls);  // "dp", "tp", "pp", "other"

struct FlowCommOptions {
  nccl::ModelOptions nccl;            // NCCL version, forced algorithm/protocol, launch overhead
  TopologyOptions topology;           // leaf sizes, oversubscription override, routing
  net::SolverMode solver = net::SolverMode::Incremental;
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
  std::uint64_t flows = 0;           // flows injected
  std::uint64_t layouts = 0;         // distinct (group, kind, bytes) layouts routed
  net::SolverCounters solver;

  // {"makespan_s", "collectives", "flows", "layouts",
  //  "traffic": {"dp": {"payload_bytes", "wire_bytes"}, "tp": ..., "pp": ..., "other": ...},
  //  "links": {"nvlink": {"links", "used_links", "busiest", "busiest_capacity_Bps",
  //                        "busiest_utilization", "busiest_busy_fraction", "mean_utilization",
  //                        "bytes": {"dp", "tp", "pp", "other"}}, "pcie": ..., "nic": ...},
  //  "solver": {"batches", "solves", "links_solved", "flows_solved", "flows_redated"}}
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

  // A degraded node: every link between one of its NICs and the fabric runs at `factor` of its
  // bandwidth, in both directions. Call before the first collective.
  void scale_node_nics(int node, double factor);

  // For tests and reports: the same model and topology give NcclAnalyticalComm(model(),
  // &topology()) the closed form this backend agrees with on an idle network.
  const Topology& topology() const { return topo_; }
  const nccl::NcclModel& model() const { return model_; }
  const net::FlowNetwork& network() const { return net_; }
  std::size_t in_flight() const { return in_flight_; }

 private:
  struct Layout {               // one routed (group, kind, bytes)
    std::uint32_t flow_begin = 0;  // in flows_
    std::uint32_t flow_count = 0;
    SimTime latency = 0;        // alpha of every flow
    SimTime empty_duration = 0; // flow_count == 0: the closed form's time
    Bytes payload = 0;
    Bytes wire = 0;
  };
  struct LayoutFlow {
    std::uint32_t link_begin = 0;  // in links_
    std::uint32_t link_count = 0;
    Bytes bytes = 0;               // wire bytes
  };
  struct Ready {
    SimTime time;
    std::uint32_t c;
  };

  void bind(const Plan& plan);
  void absorb(SimTime now);
  std::span<const std::int32_t> cluster_ranks(const Plan& plan, int g);
  const Layout& layout(const Plan& plan, const Collective& coll);

  FlowCommOptions options_;
  Topology topo_;
  nccl::NcclModel model_;
  net::FlowNetwork net_;
  std::vector<std::uint8_t> traffic_class_of_group_;

  // per plan (dropped on a plan change)
  const Plan* plan_ = nullptr;
  std::vector<std::vector<std::int32_t>> group_ranks_;  // cluster ranks per group, lazily
  std::vector<bool> group_ranks_known_;
  std::map<std::tuple<std::int32_t, std::uint8_t, Bytes>, std::uint32_t> layout_index_;
  std::vector<Layout> layouts_;
  std::vector<LayoutFlow> flows_;
  std::vector<LinkId> links_;
  std::vector<std::uint32_t> outstanding_;  // per collective: flows not yet completed

  // running state
  std::vector<net::Completion> completions_;  // scratch
  std::vector<Ready> ready_;                  // finished, not yet popped (time order)
  std::size_t in_flight_ = 0;
  std::array<Bytes, kNumTrafficClasses> payload_bytes_{};
  std::array<Bytes, kNumTrafficClasses> wire_bytes_{};
  std::uint64_t collectives_ = 0;
  std::uint64_t flows_started_ = 0;
};

}  // namespace zerosim
