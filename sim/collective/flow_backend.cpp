#include "sim/collective/flow_backend.h"

#include <algorithm>
#include <stdexcept>

#include "sim/collective/nccl_plan.h"

namespace zerosim {

const char* traffic_class_name(int cls) {
  switch (cls) {
    case kDpTraffic: return "dp";
    case kTpTraffic: return "tp";
    case kPpTraffic: return "pp";
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
  return {{"makespan_s", ps_to_seconds(makespan)},
          {"collectives", collectives},
          {"flows", flows},
          {"layouts", layouts},
          {"traffic", std::move(traffic)},
          {"links", std::move(links)},
          {"solver",
           {{"batches", solver.batches},
            {"solves", solver.solves},
            {"links_solved", solver.links_solved},
            {"flows_solved", solver.flows_solved},
            {"flows_redated", solver.flows_redated}}}};
}

FlowComm::FlowComm(const ClusterSpec& cluster, FlowCommOptions options,
                   std::vector<std::uint8_t> traffic_class_of_group)
    : options_(std::move(options)),
      topo_(build_topology(cluster, options_.topology)),
      model_(cluster, options_.nccl),
      net_(options_.solver),
      traffic_class_of_group_(std::move(traffic_class_of_group)) {
  for (std::uint8_t& t : traffic_class_of_group_) {
    if (t >= kNumTrafficClasses) throw std::invalid_argument("FlowComm: traffic class >= 4");
  }
  for (const TopoLink& l : topo_.links()) net_.add_link(l.bandwidth);
}

void FlowComm::scale_node_nics(int node, double factor) {
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
}

std::span<const std::int32_t> FlowComm::cluster_ranks(const Plan& plan, int g) {
  if (!group_ranks_known_[g]) {
    std::vector<std::int32_t>& r = group_ranks_[g];
    const std::int32_t* m = plan.cost_members(g);
    r.assign(m, m + plan.cost_size(g));
    if (!plan.folded() && !plan.real_rank.empty()) {
      for (std::int32_t& x : r) x = plan.real_rank.at(x);
    }
    group_ranks_known_[g] = true;
  }
  return group_ranks_[g];
}

const FlowComm::Layout& FlowComm::layout(const Plan& plan, const Collective& coll) {
  const auto key = std::make_tuple(coll.group, static_cast<std::uint8_t>(coll.kind), coll.bytes);
  auto it = layout_index_.find(key);
  if (it != layout_index_.end()) return layouts_[it->second];

  const auto ranks = cluster_ranks(plan, coll.group);
  const nccl::CollectivePlan cp = nccl::build_plan(model_, coll.kind, coll.bytes, ranks);
  Layout l;
  l.flow_begin = static_cast<std::uint32_t>(flows_.size());
  l.empty_duration = seconds_to_ps(cp.prediction.seconds);
  if (!cp.flows.empty()) {
    const nccl::RoutedPlan rp = nccl::route_plan(cp, topo_);
    l.latency = seconds_to_ps(rp.latency_s);
    l.payload = cp.total_bytes();
    for (const nccl::RoutedFlow& f : rp.flows) {
      LayoutFlow lf;
      lf.link_begin = static_cast<std::uint32_t>(links_.size());
      lf.link_count = static_cast<std::uint32_t>(f.links.size());
      lf.bytes = f.bytes;
      links_.insert(links_.end(), f.links.begin(), f.links.end());
      flows_.push_back(lf);
      l.wire += f.bytes;
    }
    l.flow_count = static_cast<std::uint32_t>(rp.flows.size());
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
  if (l.flow_count == 0) {
    net_.start_flow(now, {}, 0, l.empty_duration, c, tc);
    outstanding_[c] = 1;
  } else {
    for (std::uint32_t i = 0; i < l.flow_count; ++i) {
      const LayoutFlow& f = flows_[l.flow_begin + i];
      net_.start_flow(now, std::span<const LinkId>(links_.data() + f.link_begin, f.link_count),
                      f.bytes, l.latency, c, tc);
    }
    outstanding_[c] = l.flow_count;
  }
  ++in_flight_;
  ++collectives_;
  flows_started_ += std::max<std::uint32_t>(l.flow_count, 1);
  payload_bytes_[tc] += l.payload;
  wire_bytes_[tc] += l.wire;
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
  rep.layouts = layouts_.size();
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
