#include "sim/collective/flow_backend.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "sim/collective/nccl_plan.h"
#include "sim/core/error.h"

namespace zerosim {

namespace {

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

const char* placement_name(BackgroundJob::Placement p) {
  return p == BackgroundJob::Placement::Interleaved ? "interleaved" : "after";
}
const char* pattern_name(BackgroundJob::Pattern p) {
  return p == BackgroundJob::Pattern::Ring ? "ring" : "all_to_all";
}

}  // namespace

const char* traffic_class_name(int cls) {
  switch (cls) {
    case kDpTraffic: return "dp";
    case kTpTraffic: return "tp";
    case kPpTraffic: return "pp";
    case kEpTraffic: return "ep";
    case kCpTraffic: return "cp";
    default: return "other";
  }
}

const char* link_kind_name(LinkKind k) {
  switch (k) {
    case LinkKind::NvLink: return "nvlink";
    case LinkKind::Pcie: return "pcie";
    case LinkKind::Host: return "host";
    case LinkKind::Nic: return "nic";
    case LinkKind::LeafSpine: return "leaf_spine";
    case LinkKind::SpineCore: return "spine_core";
  }
  return "?";
}

LinkKind link_kind(const Topology& topo, LinkId link) {
  const TopoLink& l = topo.link(link);
  const VertexKind a = topo.graph()[l.src].kind, b = topo.graph()[l.dst].kind;
  auto either = [&](VertexKind k) { return a == k || b == k; };
  if (l.cls == LinkClass::NvLink) return LinkKind::NvLink;
  if (l.cls == LinkClass::Pcie) return either(VertexKind::Host) ? LinkKind::Host : LinkKind::Pcie;
  if (either(VertexKind::Nic)) return LinkKind::Nic;
  if (either(VertexKind::Core)) return LinkKind::SpineCore;
  return LinkKind::LeafSpine;
}

std::string link_name(const Topology& topo, LinkId link) {
  const TopoLink& l = topo.link(link);
  auto name = [&](VertexId v) {
    const TopoVertex& x = topo.graph()[v];
    std::string s;
    if (x.kind == VertexKind::Nic || x.kind == VertexKind::PcieSwitch ||
        x.kind == VertexKind::Host) {
      s = "node" + std::to_string(x.node) + ".";
    }
    s += vertex_kind_name(x.kind);
    const int idx = x.kind == VertexKind::NvSwitch || x.kind == VertexKind::Host ? x.group : x.index;
    if (x.kind != VertexKind::Host) s += std::to_string(idx < 0 ? static_cast<int>(v) : idx);
    return s;
  };
  return name(l.src) + "->" + name(l.dst);
}

nlohmann::json LinkReport::to_json() const {
  using nlohmann::json;
  json traffic = json::object();
  for (int t = 0; t < kNumTrafficClasses; ++t) {
    traffic[traffic_class_name(t)] = {{"payload_bytes", payload_bytes[t]},
                                      {"wire_bytes", wire_bytes[t]}};
  }
  json links = json::object();
  for (const LinkKindUsage& k : kinds) {
    json bytes = json::object();
    for (int t = 0; t < kNumTrafficClasses; ++t) bytes[traffic_class_name(t)] = k.bytes[t];
    links[link_kind_name(k.kind)] = {{"links", k.links},
                                     {"used_links", k.used_links},
                                     {"busiest", k.busiest_name},
                                     {"busiest_capacity_Bps", k.busiest_capacity},
                                     {"busiest_utilization", k.busiest_utilization},
                                     {"busiest_busy_fraction", k.busiest_busy_fraction},
                                     {"mean_utilization", k.mean_utilization},
                                     {"bytes", std::move(bytes)}};
  }
  json out = {{"makespan_s", ps_to_seconds(makespan)},
              {"collectives", collectives},
              {"flows", flows},
              {"layouts", layouts},
              {"replica_copies", replica_copies},
              {"traffic", std::move(traffic)},
              {"links", std::move(links)},
              {"solver",
               {{"batches", solver.batches},
                {"solves", solver.solves},
                {"links_solved", solver.links_solved},
                {"flows_solved", solver.flows_solved},
                {"flows_redated", solver.flows_redated}}}};
  if (background.nodes > 0) {
    out["background"] = {{"nodes", background.nodes},
                         {"placement", placement_name(background.placement)},
                         {"pattern", pattern_name(background.pattern)},
                         {"load", background.load},
                         {"flows", background_flows},
                         {"bytes", background_bytes}};
  }
  return out;
}

FlowComm::FlowComm(const ClusterSpec& cluster, FlowCommOptions options,
                   std::vector<std::uint8_t> traffic_class_of_group)
    : options_(std::move(options)),
      cluster_(cluster),
      topo_(build_topology(cluster, options_.topology)),
      model_(cluster, options_.nccl),
      net_(options_.solver),
      traffic_class_of_group_(std::move(traffic_class_of_group)) {
  for (std::uint8_t& t : traffic_class_of_group_) {
    if (t >= kNumTrafficClasses) throw std::invalid_argument("FlowComm: traffic class >= " + std::to_string(kNumTrafficClasses));
  }
  build_network();
}

void FlowComm::build_network() {
  net_ = net::FlowNetwork(options_.solver);
  for (const TopoLink& l : topo_.links()) net_.add_link(l.bandwidth);
}

int FlowComm::topology_node(int node) const {
  if (node < 0 || node >= cluster_.nodes) {
    throw std::invalid_argument("FlowComm: node " + std::to_string(node) + " outside the cluster");
  }
  return node_map_.empty() ? node : node_map_[node];
}

void FlowComm::add_background_job(const BackgroundJob& job) {
  if (collectives_ != 0 || capacities_changed_ || !background_.empty() ||
      background_job_.nodes != 0) {
    throw std::logic_error(
        "FlowComm: add_background_job must come first, once (before scale_node_nics and the "
        "first collective)");
  }
  if (job.nodes < 1) throw std::invalid_argument("FlowComm: a background job needs >= 1 node");
  if (!(job.load > 0 && job.load <= 1)) {
    throw std::invalid_argument("FlowComm: background load must be in (0, 1]");
  }
  // Placement moves whole NVLink domains, so no domain mixes the two jobs.
  const int gpn = cluster_.gpus_per_node;
  const int unit = cluster_.nvlink_domain_gpus > gpn ? cluster_.nvlink_domain_gpus / gpn : 1;
  if (cluster_.nodes % unit != 0 || job.nodes % unit != 0) {
    throw InputError("whatif.background_nodes",
                     "both jobs must fill whole NVLink domains of " + std::to_string(unit) +
                         " nodes");
  }
  ClusterSpec both = cluster_;
  both.nodes = cluster_.nodes + job.nodes;
  try {
    topo_ = build_topology(both, options_.topology);
  } catch (const InputError& e) {
    throw InputError("whatif.background_nodes", e.what());
  }
  model_ = nccl::NcclModel(both, options_.nccl);
  build_network();

  // Units of `unit` nodes: this job's, then the other's, alternating (Interleaved) or all of
  // this job's first (After).
  const int mine = cluster_.nodes / unit, theirs = job.nodes / unit;
  std::vector<std::int32_t> other;
  node_map_.clear();
  int next = 0;
  auto place = [&](std::vector<std::int32_t>& into) {
    for (int k = 0; k < unit; ++k) into.push_back(next++);
  };
  if (job.placement == BackgroundJob::Placement::Interleaved) {
    for (int i = 0; i < std::max(mine, theirs); ++i) {
      if (i < mine) place(node_map_);
      if (i < theirs) place(other);
    }
  } else {
    for (int i = 0; i < mine; ++i) place(node_map_);
    for (int i = 0; i < theirs; ++i) place(other);
  }
  background_job_ = job;

  // Its flows, NIC k to NIC k, endless, each capped at load x nic_bandwidth.
  const double cap = job.load * cluster_.nic_bandwidth;
  const int b = job.nodes;
  auto inject = [&](int from, int to) {
    for (int rail = 0; rail < cluster_.nics_per_node; ++rail) {
      const std::vector<LinkId> route =
          topo_.route_nic_to_nic(other[from], rail, other[to], rail,
                                 mix64((static_cast<std::uint64_t>(from) << 32) ^
                                       (static_cast<std::uint64_t>(to) << 8) ^ rail));
      if (route.empty()) continue;
      BackgroundFlow f;
      f.link_begin = static_cast<std::uint32_t>(background_links_.size());
      f.link_count = static_cast<std::uint32_t>(route.size());
      background_links_.insert(background_links_.end(), route.begin(), route.end());
      f.id = net_.start_flow(net_.now(), route, net::kEndlessBytes, 0, kBackgroundTag,
                             kOtherTraffic, 1, cap);
      background_.push_back(f);
    }
  };
  if (b >= 2) {
    if (job.pattern == BackgroundJob::Pattern::Ring) {
      for (int i = 0; i < b; ++i) inject(i, (i + 1) % b);
    } else {
      for (int i = 0; i < b; ++i) {
        for (int j = 0; j < b; ++j) {
          if (i != j) inject(i, j);
        }
      }
    }
  }
  // They share from time 0: one solve now, so the first collective finds them in place.
  net_.advance_to(net_.now());
}

void FlowComm::scale_node_nics(int node, double factor) {
  capacities_changed_ = true;
  node = topology_node(node);
  const TopoGraph& g = topo_.graph();
  for (LinkId id = 0; id < topo_.num_links(); ++id) {
    const TopoLink& l = topo_.link(id);
    const TopoVertex& a = g[l.src];
    const TopoVertex& b = g[l.dst];
    const bool a_nic = a.kind == VertexKind::Nic && a.node == node;
    const bool b_nic = b.kind == VertexKind::Nic && b.node == node;
    // The NIC's fabric side: to or from a leaf (or switch), not its PCIe side.
    if ((a_nic && b.node < 0) || (b_nic && a.node < 0)) {
      net_.set_link_capacity(0, id, l.bandwidth * factor);
    }
  }
}

void FlowComm::bind(const Plan& plan) {
  if (in_flight_ != 0) {
    throw std::logic_error("FlowComm: a new plan started while collectives are in flight");
  }
  plan_ = &plan;
  group_ranks_.assign(plan.num_groups(), {});
  group_ranks_known_.assign(plan.num_groups(), false);
  layout_index_.clear();
  layouts_.clear();
  flows_.clear();
  links_.clear();
  outstanding_.assign(plan.collectives.size(), 0);
  shadows_in_flight_.assign(plan.num_groups(), 0);
}

std::span<const std::int32_t> FlowComm::cluster_ranks(const Plan& plan, int g) {
  if (!group_ranks_known_[g]) {
    std::vector<std::int32_t>& r = group_ranks_[g];
    const std::int32_t* m = plan.cost_members(g);
    r.assign(m, m + plan.cost_size(g));
    if (!plan.folded() && !plan.real_rank.empty()) {
      for (std::int32_t& x : r) x = plan.real_rank.at(x);
    }
    for (std::int32_t x : r) {
      if (x < 0 || x >= cluster_.num_gpus()) {
        throw std::invalid_argument("FlowComm: rank " + std::to_string(x) +
                                    " outside the cluster");
      }
    }
    group_ranks_known_[g] = true;
  }
  return group_ranks_[g];
}

// Replica shifts j >= 1 of a folded group over `ranks` (see the header, "Folded plans"): the
// replicas it covers, D, moved by j must stay inside the replicas and not meet a set already
// covered. A group of the folded replica alone (D = {0}) gets every j; a DP group over all
// replicas none; a DP sub-group (a shard {0..k-1}, or every k-th replica) the other members of
// its partition.
std::vector<int> FlowComm::replica_shifts(std::span<const std::int32_t> ranks) const {
  const int count = options_.replicas, stride = options_.replica_rank_stride;
  std::vector<int> shifts;
  if (count <= 1 || stride <= 0) return shifts;
  std::vector<bool> covered(static_cast<std::size_t>(count), false);
  std::vector<int> d;
  for (std::int32_t r : ranks) {
    const int x = (r / stride) % count;
    if (!covered[x]) d.push_back(x);
    covered[x] = true;
  }
  const int top = *std::max_element(d.begin(), d.end());
  for (int j = 1; top + j < count; ++j) {
    bool free = true;
    for (int x : d) free = free && !covered[x + j];
    if (!free) continue;
    for (int x : d) covered[x + j] = true;
    shifts.push_back(j);
  }
  return shifts;
}

const FlowComm::Layout& FlowComm::layout(const Plan& plan, const Collective& coll) {
  const auto key = std::make_tuple(coll.group, static_cast<std::uint8_t>(coll.kind), coll.bytes);
  auto it = layout_index_.find(key);
  if (it != layout_index_.end()) return layouts_[it->second];

  // This job's ranks on their topology nodes.
  auto on_topology = [&](std::vector<std::int32_t> r) {
    if (!node_map_.empty()) {
      const int gpn = cluster_.gpus_per_node;
      for (std::int32_t& x : r) x = node_map_[x / gpn] * gpn + x % gpn;
    }
    return r;
  };
  const auto ranks = cluster_ranks(plan, coll.group);
  const nccl::CollectivePlan cp =
      nccl::build_plan(model_, coll.kind, coll.bytes, on_topology({ranks.begin(), ranks.end()}));
  Layout l;
  l.flow_begin = static_cast<std::uint32_t>(flows_.size());
  l.empty_duration = seconds_to_ps(cp.prediction.seconds);
  if (!cp.flows.empty()) {
    std::vector<nccl::RoutedPlan> copies;
    copies.push_back(nccl::route_plan(cp, topo_));
    l.payload = cp.total_bytes();
    // The other replicas' copies, when the plan is folded and the collective reaches the fabric
    // (inside a node, another replica's copy meets only flows that mirror this one's).
    bool fabric = false;
    for (const nccl::RoutedFlow& f : copies[0].flows) {
      for (LinkId id : f.links) fabric = fabric || topo_.link(id).cls == LinkClass::Network;
    }
    if (plan.folded() && fabric) {
      for (int j : replica_shifts(ranks)) {
        std::vector<std::int32_t> shifted(ranks.begin(), ranks.end());
        for (std::int32_t& x : shifted) x += j * options_.replica_rank_stride;
        const nccl::CollectivePlan cj =
            nccl::build_plan(model_, coll.kind, coll.bytes, on_topology(std::move(shifted)));
        copies.push_back(nccl::route_plan(cj, topo_));
        l.copy_payload += cj.total_bytes();
        ++l.copies;
      }
    }
    struct Unit {
      const nccl::RoutedFlow* f;
      SimTime latency;
      std::uint64_t hash;
      bool shadow;
    };
    std::vector<Unit> units;
    for (const nccl::RoutedPlan& rp : copies) {
      const SimTime latency = seconds_to_ps(rp.latency_s);
      const bool shadow = &rp != &copies[0];
      for (const nccl::RoutedFlow& f : rp.flows) {
        std::uint64_t h = mix64(static_cast<std::uint64_t>(f.bytes) ^ mix64(latency) ^ shadow);
        for (LinkId id : f.links) h = mix64(h ^ id);
        units.push_back({&f, latency, h, shadow});
      }
    }
    // Identical flows (same links, bytes and latency) become one weighted flow, kept at the
    // place of its first occurrence. Sorted by (hash, content, index) so equal flows are
    // neighbours and the first of a run is the first occurrence.
    const std::size_t n = units.size();
    auto same = [&](std::size_t a, std::size_t b) {
      return units[a].shadow == units[b].shadow && units[a].latency == units[b].latency &&
             units[a].f->bytes == units[b].f->bytes &&
             units[a].f->links == units[b].f->links;
    };
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const Unit& ua = units[a];
      const Unit& ub = units[b];
      if (ua.hash != ub.hash) return ua.hash < ub.hash;
      if (ua.shadow != ub.shadow) return ub.shadow;
      if (ua.latency != ub.latency) return ua.latency < ub.latency;
      if (ua.f->bytes != ub.f->bytes) return ua.f->bytes < ub.f->bytes;
      if (ua.f->links != ub.f->links) return ua.f->links < ub.f->links;
      return a < b;
    });
    std::vector<std::uint32_t> weight(n, 0);  // on the first occurrence only
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i + 1;
      while (j < n && same(order[i], order[j])) ++j;
      weight[order[i]] = static_cast<std::uint32_t>(j - i);
      i = j;
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (weight[i] == 0) continue;
      const nccl::RoutedFlow& f = *units[i].f;
      LayoutFlow lf;
      lf.link_begin = static_cast<std::uint32_t>(links_.size());
      lf.link_count = static_cast<std::uint32_t>(f.links.size());
      lf.bytes = f.bytes;
      lf.latency = units[i].latency;
      lf.weight = weight[i];
      lf.shadow = units[i].shadow;
      if (!lf.shadow) ++l.own_flows;
      links_.insert(links_.end(), f.links.begin(), f.links.end());
      flows_.push_back(lf);
      (lf.shadow ? l.copy_wire : l.wire) += f.bytes * static_cast<Bytes>(weight[i]);
      ++l.flow_count;
    }
    l.unit_flows = static_cast<std::uint32_t>(n);
  }
  layouts_.push_back(l);
  layout_index_.emplace(key, static_cast<std::uint32_t>(layouts_.size() - 1));
  return layouts_.back();
}

// Brings the network to `now` and turns the flows that ended into finished collectives.
void FlowComm::absorb(SimTime now) {
  net_.advance_to(now);
  completions_.clear();
  net_.drain_completed(completions_);
  for (const net::Completion& done : completions_) {
    if ((done.tag & kBackgroundTag) != 0) continue;  // never happens: endless
    if ((done.tag & kShadowBit) != 0) {              // another replica's copy (Own)
      --shadows_in_flight_[done.tag & ~kShadowBit];
      continue;
    }
    const auto c = static_cast<std::uint32_t>(done.tag);
    if (--outstanding_[c] == 0) {
      ready_.push_back({done.time, c});
      --in_flight_;
    }
  }
}

void FlowComm::start(const Plan& plan, std::uint32_t c, SimTime now) {
  if (&plan != plan_) bind(plan);
  if (c >= outstanding_.size()) throw std::invalid_argument("FlowComm: unknown collective id");
  if (outstanding_[c] != 0) throw std::logic_error("FlowComm: collective started twice");
  absorb(now);
  const Collective& coll = plan.collectives[c];
  const Layout& l = layout(plan, coll);
  const std::uint8_t tc =
      static_cast<std::size_t>(coll.group) < traffic_class_of_group_.size()
          ? traffic_class_of_group_[coll.group]
          : kOtherTraffic;
  const bool slowest = options_.replica_completion == ReplicaCompletion::Slowest;
  // Own: the copies of the previous collective of this group still running means those
  // replicas are behind; they would start this one later, so its copies are left out rather
  // than let copies pile up on a path slower than the folded replica's.
  const bool copies = l.copies > 0 && (slowest || shadows_in_flight_[coll.group] == 0);
  std::uint32_t started = 0, units = 0;
  if (l.flow_count == 0) {
    net_.start_flow(now, {}, 0, l.empty_duration, c, tc);
    outstanding_[c] = 1;
  } else {
    for (std::uint32_t i = 0; i < l.flow_count; ++i) {
      const LayoutFlow& f = flows_[l.flow_begin + i];
      if (f.shadow && !copies) continue;
      const std::uint64_t tag =
          f.shadow && !slowest ? (kShadowBit | static_cast<std::uint64_t>(coll.group)) : c;
      net_.start_flow(now, std::span<const LinkId>(links_.data() + f.link_begin, f.link_count),
                      f.bytes, f.latency, tag, tc, f.weight);
      if (f.shadow && !slowest) ++shadows_in_flight_[coll.group];
      ++started;
      units += f.weight;
    }
    outstanding_[c] = slowest ? started : l.own_flows;
  }
  ++in_flight_;
  ++collectives_;
  flows_started_ += std::max<std::uint32_t>(units, 1);
  network_flows_started_ += std::max<std::uint32_t>(started, 1);
  payload_bytes_[tc] += l.payload;
  wire_bytes_[tc] += l.wire;
  if (copies) {
    replica_copies_ += l.copies;
    payload_bytes_[tc] += l.copy_payload;
    wire_bytes_[tc] += l.copy_wire;
  }
}

SimTime FlowComm::next_completion() const {
  return ready_.empty() ? net_.next_event_time() : ready_.front().time;
}

void FlowComm::pop_completed(SimTime now, std::vector<std::uint32_t>& done) {
  absorb(now);
  for (const Ready& r : ready_) done.push_back(r.c);
  ready_.clear();
}

LinkReport FlowComm::link_report(SimTime makespan) const {
  LinkReport rep;
  const SimTime end = std::max(makespan, net_.now());
  rep.makespan = end;
  rep.payload_bytes = payload_bytes_;
  rep.wire_bytes = wire_bytes_;
  rep.collectives = collectives_;
  rep.flows = flows_started_;
  rep.network_flows = network_flows_started_;
  rep.layouts = layouts_.size();
  rep.replica_copies = replica_copies_;
  rep.solver = net_.counters();
  const double seconds = ps_to_seconds(end);
  std::array<LinkKindUsage, kNumLinkKinds> k{};
  std::array<double, kNumLinkKinds> best{}, sum_util{};
  std::array<bool, kNumLinkKinds> seen{};
  for (LinkId id = 0; id < topo_.num_links(); ++id) {
    const int kind = static_cast<int>(link_kind(topo_, id));
    LinkKindUsage& u = k[kind];
    const net::LinkStats s = net_.link_stats(id, end);
    const double cap = net_.link_capacity(id);
    const double busy = s.carried_bytes / cap;  // seconds of full-rate use
    const double util = seconds > 0 ? busy / seconds : 0;
    ++u.links;
    if (s.carried_bytes > 0) ++u.used_links;
    sum_util[kind] += util;
    for (int t = 0; t < kNumTrafficClasses; ++t) u.bytes[t] += s.completed_bytes[t];
    if (!seen[kind] || busy > best[kind]) {
      seen[kind] = true;
      best[kind] = busy;
      u.busiest = id;
      u.busiest_capacity = cap;
      u.busiest_utilization = util;
      u.busiest_busy_fraction = end > 0 ? static_cast<double>(s.busy_ps) / end : 0;
    }
  }
  // The other job's flows never complete: count what they moved by `end` as class "other".
  rep.background = background_job_;
  rep.background_flows = background_.size();
  for (const BackgroundFlow& f : background_) {
    const auto moved = static_cast<Bytes>(std::floor(net_.flow_delivered(f.id, end)));
    rep.background_bytes += moved;
    for (std::uint32_t i = 0; i < f.link_count; ++i) {
      k[static_cast<int>(link_kind(topo_, background_links_[f.link_begin + i]))]
          .bytes[kOtherTraffic] += moved;
    }
  }
  rep.payload_bytes[kOtherTraffic] += rep.background_bytes;
  rep.wire_bytes[kOtherTraffic] += rep.background_bytes;
  for (int kind = 0; kind < kNumLinkKinds; ++kind) {
    LinkKindUsage& u = k[kind];
    if (u.links == 0) continue;
    u.kind = static_cast<LinkKind>(kind);
    u.busiest_name = link_name(topo_, u.busiest);
    u.mean_utilization = sum_util[kind] / static_cast<double>(u.links);
    rep.kinds.push_back(std::move(u));
  }
  return rep;
}

}  // namespace zerosim
