#include "sim/collective/nccl_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace zerosim::nccl {

namespace {

// A NIC of an NCCL node: (physical node, NIC index). An NCCL node is an NVLink domain, which
// spans several physical nodes on GB200 NVL72.
using Rail = std::pair<int, int>;

// The communicator's members grouped by NCCL node, and each node's NICs (sorted).
struct Layout {
  std::vector<std::vector<std::int32_t>> members;  // per node, communicator order
  std::vector<std::vector<Rail>> rails;            // per node
};

Layout layout_of(const ClusterSpec& c, const CommInfo& m) {
  Layout l;
  l.members.resize(m.n_nodes);
  l.rails.resize(m.n_nodes);
  for (std::size_t i = 0; i < m.ranks.size(); ++i) l.members[m.node_index[i]].push_back(m.ranks[i]);
  for (int ni = 0; ni < m.n_nodes; ++ni) {
    std::vector<Rail>& r = l.rails[ni];
    for (std::int32_t rank : l.members[ni]) {
      for (int nic : local_nics_of(c, rank % c.gpus_per_node)) {
        r.push_back({rank / c.gpus_per_node, nic});
      }
    }
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
  }
  return l;
}

bool owns(const ClusterSpec& c, std::int32_t rank, Rail rail) {
  if (rank / c.gpus_per_node != rail.first) return false;
  const auto nics = local_nics_of(c, rank % c.gpus_per_node);
  return std::find(nics.begin(), nics.end(), rail.second) != nics.end();
}

// Members of node `ni` rotated so that the owner of `rail` comes first.
std::vector<std::int32_t> rotated(const ClusterSpec& c, const Layout& l, int ni, Rail rail) {
  std::vector<std::int32_t> v = l.members[ni];
  if (rail.second < 0) return v;
  auto it = std::find_if(v.begin(), v.end(), [&](std::int32_t r) { return owns(c, r, rail); });
  if (it != v.end()) std::rotate(v.begin(), it, v.end());
  return v;
}

Rail rail_for(const Layout& l, int ni, int channel) {
  const auto& r = l.rails[ni];
  return r.empty() ? Rail{-1, -1} : r[channel % r.size()];
}

Bytes share(Bytes total, int parts, int i) {
  return total / parts + (i < total % parts ? 1 : 0);
}

void add(std::vector<PlanFlow>& out, std::int32_t src, std::int32_t dst, Bytes bytes, int channel,
         int rail, std::uint64_t hash, FlowEnd se = FlowEnd::Gpu, FlowEnd de = FlowEnd::Gpu) {
  if (bytes <= 0) return;
  PlanFlow f;
  f.src = src;
  f.dst = dst;
  f.src_end = se;
  f.dst_end = de;
  f.bytes = bytes;
  f.channel = static_cast<std::int16_t>(channel);
  f.rail = static_cast<std::int16_t>(rail);
  f.hash = hash;
  out.push_back(f);
}

// Ring order for one channel: nodes in communicator order, each rotated to its rail owner.
std::vector<std::int32_t> ring_order(const ClusterSpec& c, const Layout& l, int channel,
                                     std::vector<int>* rail_of_node) {
  std::vector<std::int32_t> seq;
  const int nodes = static_cast<int>(l.members.size());
  rail_of_node->assign(nodes, -1);
  for (int ni = 0; ni < nodes; ++ni) {
    const Rail rail = nodes > 1 ? rail_for(l, ni, channel) : Rail{-1, -1};
    (*rail_of_node)[ni] = rail.second;
    auto part = rotated(c, l, ni, rail);
    seq.insert(seq.end(), part.begin(), part.end());
  }
  return seq;
}

// Tree edges (child node, parent node) per NCCL node and the chain inside each node.
void tree_flows(const ClusterSpec& c, const Layout& l, int channel, int channels, Bytes sc,
                bool chain, std::vector<PlanFlow>& out) {
  const int nodes = static_cast<int>(l.members.size());
  const int tree = (channels >= 2 && channel >= channels / 2) ? 1 : 0;
  std::vector<std::vector<std::int32_t>> order(nodes);
  std::vector<int> rails(nodes);
  for (int ni = 0; ni < nodes; ++ni) {
    const Rail rail = nodes > 1 ? rail_for(l, ni, channel) : Rail{-1, -1};
    rails[ni] = rail.second;
    order[ni] = rotated(c, l, ni, rail);
  }
  std::uint64_t h = static_cast<std::uint64_t>(channel) << 32;
  if (chain) {
    for (int ni = 0; ni < nodes; ++ni) {
      for (std::size_t k = 0; k + 1 < order[ni].size(); ++k) {
        add(out, order[ni][k + 1], order[ni][k], sc, channel, -1, h++);  // up (reduce)
        add(out, order[ni][k], order[ni][k + 1], sc, channel, -1, h++);  // down (broadcast)
      }
    }
  }
  for (int ni = 0; ni < nodes; ++ni) {
    const int parent = dtree_parent(nodes, ni, tree);
    if (parent < 0) continue;
    add(out, order[ni][0], order[parent][0], sc, channel, rails[ni], h++);
    add(out, order[parent][0], order[ni][0], sc, channel, rails[ni], h++);
  }
}

}  // namespace

int btree_parent(int n, int rank) {
  if (rank <= 0 || rank >= n) return -1;
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  return up;
}

int dtree_parent(int n, int rank, int tree) {
  if (tree == 0) return btree_parent(n, rank);
  if (n % 2 == 1) {
    const int u = btree_parent(n, (rank - 1 + n) % n);
    return u < 0 ? -1 : (u + 1) % n;
  }
  const int u = btree_parent(n, n - 1 - rank);
  return u < 0 ? -1 : n - 1 - u;
}

Bytes CollectivePlan::total_bytes() const {
  Bytes s = 0;
  for (const auto& f : flows) s += f.bytes;
  return s;
}

CollectivePlan build_plan(const NcclModel& model, CollectiveKind kind, Bytes bytes,
                          std::span<const std::int32_t> ranks, int root) {
  CollectivePlan plan;
  plan.prediction = model.predict(kind, bytes, ranks);
  plan.latency_s = plan.prediction.alpha_s();
  const int n = static_cast<int>(ranks.size());
  if (n > 0 && (root < 0 || root >= n)) throw std::invalid_argument("nccl: root outside the group");
  if (n <= 1 || bytes <= 0) return plan;
  const ClusterSpec& c = model.cluster();
  const CommInfo& m = model.comm(ranks);
  const Layout l = layout_of(c, m);
  const Prediction& p = plan.prediction;
  auto& out = plan.flows;

  if (kind == CollectiveKind::SendRecv) {
    if (n != 2) throw std::invalid_argument("nccl: send/recv needs a group of exactly 2 ranks");
    const std::int32_t src = ranks[0], dst = ranks[1];
    if (m.n_nodes == 1) {
      add(out, src, dst, bytes, 0, -1, 0);
    } else {
      auto nics = local_nics_of(c, src % c.gpus_per_node);
      if (nics.empty()) nics.push_back(-1);
      const int parts = static_cast<int>(nics.size());
      for (int i = 0; i < parts; ++i) add(out, src, dst, share(bytes, parts, i), i, nics[i], i);
    }
    return plan;
  }
  if (kind == CollectiveKind::AllToAll) {
    if (m.n_nodes == 1) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (i == j) continue;
          add(out, ranks[i], ranks[j], share(bytes, n, j), 0, -1,
              static_cast<std::uint64_t>(i) * n + j);
        }
      }
      return plan;
    }
    // Across nodes NCCL's all-to-all goes through PXN (NCCL >= 2.12, on by default): a rank
    // hands the data for a remote rank to the member of its own node that owns the NIC of the
    // remote rank's rail, over NVLink, and that member sends it over that rail. So a node sends
    // to each remote rank once, on one rail: the data of all its members for that rank is one
    // flow. What a rank sends inside its node (its own peers' data and what it relays) is one
    // flow per peer. A rank whose rail no member of its node owns sends directly.
    std::map<std::pair<std::int32_t, std::int32_t>, Bytes> nvlink;  // (from, to) in a node
    std::map<std::pair<std::int32_t, std::int32_t>, std::pair<Bytes, int>> remote;  // bytes, rail
    std::vector<int> node_of(n);
    for (int i = 0; i < n; ++i) node_of[i] = m.node_index[i];
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        const Bytes b = share(bytes, n, j);
        if (node_of[i] == node_of[j]) {
          nvlink[{ranks[i], ranks[j]}] += b;
          continue;
        }
        const auto nics = local_nics_of(c, ranks[j] % c.gpus_per_node);
        const int rail = nics.empty() ? -1 : nics.front();
        std::int32_t relay = ranks[i];
        if (rail >= 0) {
          for (std::int32_t r : l.members[node_of[i]]) {
            if (owns(c, r, {r / c.gpus_per_node, rail})) relay = r;
          }
        }
        if (relay != ranks[i]) nvlink[{ranks[i], relay}] += b;
        auto& [sent, on] = remote[{relay, ranks[j]}];
        sent += b;
        // Without a member on that rail the rank sends directly, through its own NIC.
        on = rail >= 0 && owns(c, relay, {relay / c.gpus_per_node, rail}) ? rail : -1;
      }
    }
    std::uint64_t h = 0;
    for (const auto& [ends, b] : nvlink) add(out, ends.first, ends.second, b, 0, -1, h++);
    for (const auto& [ends, r] : remote) add(out, ends.first, ends.second, r.first, 0, r.second, h++);
    return plan;
  }

  const int channels = std::max(1, p.channels);
  const Func f = *func_of(kind);
  std::vector<int> node_of_rank(c.num_gpus(), -1);
  for (std::size_t i = 0; i < m.ranks.size(); ++i) node_of_rank[m.ranks[i]] = m.node_index[i];
  switch (p.algo) {
    case Algo::Ring:
    case Algo::Pat: {
      plan.approximate = p.algo == Algo::Pat;
      for (int ch = 0; ch < channels; ++ch) {
        const Bytes sc = share(bytes, channels, ch);
        std::vector<int> rail_of_node;
        auto seq = ring_order(c, l, ch, &rail_of_node);
        auto rail_of = [&](std::int32_t a, std::int32_t b) {
          const int na = node_of_rank[a], nb = node_of_rank[b];
          return na == nb ? -1 : rail_of_node[nb];  // the receiver owns it
        };
        const std::uint64_t h0 = static_cast<std::uint64_t>(ch) * n;
        if (f == Func::Broadcast || f == Func::Reduce) {
          auto first = std::find(seq.begin(), seq.end(), ranks[root]);
          std::rotate(seq.begin(), first, seq.end());
          for (int i = 0; i + 1 < n; ++i) {
            const std::int32_t a = f == Func::Broadcast ? seq[i] : seq[i + 1];
            const std::int32_t b = f == Func::Broadcast ? seq[i + 1] : seq[i];
            add(out, a, b, sc, ch, rail_of(a, b), h0 + i);
          }
        } else {
          const int passes = f == Func::AllReduce ? 2 : 1;
          for (int i = 0; i < n; ++i) {
            const std::int32_t a = seq[i], b = seq[(i + 1) % n];
            add(out, a, b, passes * (sc - share(sc, n, i)), ch, rail_of(a, b), h0 + i);
          }
        }
      }
      break;
    }
    case Algo::Tree:
      for (int ch = 0; ch < channels; ++ch) {
        tree_flows(c, l, ch, channels, share(bytes, channels, ch), true, out);
      }
      break;
    case Algo::Nvls:
    case Algo::NvlsTree: {
      for (int ch = 0; ch < channels; ++ch) {
        const Bytes sc = share(bytes, channels, ch);
        for (int ni = 0; ni < m.n_nodes; ++ni) {
          const int local = static_cast<int>(l.members[ni].size());
          const Bytes slice = sc / local;
          Bytes up = sc + slice, down = sc + slice;  // all-reduce
          if (f == Func::ReduceScatter) { up = sc; down = slice; }
          if (f == Func::AllGather) { up = slice; down = sc; }
          std::uint64_t h = (static_cast<std::uint64_t>(ch) << 32) + ni * 1024;
          for (std::int32_t r : l.members[ni]) {
            add(out, r, r, up, ch, -1, h++, FlowEnd::Gpu, FlowEnd::NvSwitch);
            add(out, r, r, down, ch, -1, h++, FlowEnd::NvSwitch, FlowEnd::Gpu);
          }
        }
        if (p.algo == Algo::NvlsTree) tree_flows(c, l, ch, channels, sc, false, out);
      }
      break;
    }
    default:
      throw std::logic_error("nccl: no flow layout for this algorithm");
  }
  return plan;
}

RoutedPlan route_plan(const CollectivePlan& plan, const Topology& topo) {
  RoutedPlan r;
  r.latency_s = plan.latency_s;
  r.bandwidth_s = plan.prediction.bandwidth_s;
  if (plan.flows.empty()) return r;
  r.flows.reserve(plan.flows.size());
  std::size_t hops = 0;
  for (const PlanFlow& f : plan.flows) {
    RoutedFlow rf;
    if (f.src_end == FlowEnd::NvSwitch) rf.links = topo.route_nvswitch_to_gpu(f.dst);
    else if (f.dst_end == FlowEnd::NvSwitch) rf.links = topo.route_gpu_to_nvswitch(f.src);
    else rf.links = topo.route(f.src, f.dst, f.hash, f.rail);
    hops += rf.links.size();
    rf.bytes = f.bytes;
    r.flows.push_back(std::move(rf));
  }
  // Load per link, summed in flow order; the links visited in increasing id. A small collective
  // on a large fabric (a pipeline send among 16k GPUs' links) gathers and sorts its own links
  // instead of clearing and scanning a vector over all of them: same sums, same order.
  std::vector<std::pair<LinkId, double>> loads;  // (link, load), increasing link
  if (hops * 16 < topo.num_links()) {
    std::vector<std::pair<LinkId, double>> each;
    each.reserve(hops);
    for (const RoutedFlow& f : r.flows) {
      for (LinkId id : f.links) each.push_back({id, static_cast<double>(f.bytes)});
    }
    std::stable_sort(each.begin(), each.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [id, b] : each) {
      if (loads.empty() || loads.back().first != id) loads.push_back({id, 0.0});
      loads.back().second += b;
    }
  } else {
    std::vector<double> load(topo.num_links(), 0.0);
    for (const RoutedFlow& f : r.flows) {
      for (LinkId id : f.links) load[id] += static_cast<double>(f.bytes);
    }
    for (LinkId id = 0; id < topo.num_links(); ++id) {
      if (load[id] > 0) loads.push_back({id, load[id]});
    }
  }
  const auto& g = topo.graph();
  auto fabric_only = [&](const TopoLink& l) {
    auto k1 = g[l.src].kind, k2 = g[l.dst].kind;
    auto sw = [](VertexKind k) {
      return k == VertexKind::Leaf || k == VertexKind::Spine || k == VertexKind::Core;
    };
    return sw(k1) && sw(k2);
  };
  for (const auto& [id, load] : loads) {
    if (load <= 0) continue;
    const TopoLink& l = topo.link(id);
    const double t = load / l.bandwidth;
    if (t > r.max_link_time_s) {
      r.max_link_time_s = t;
      r.bottleneck = id;
    }
    if (!fabric_only(l)) r.endpoint_time_s = std::max(r.endpoint_time_s, t);
  }
  if (r.endpoint_time_s > 0) {
    r.fabric_factor = std::max(1.0, r.max_link_time_s / r.endpoint_time_s);
    r.wire_scale = std::max(1.0, plan.prediction.bandwidth_s / r.endpoint_time_s);
  }
  r.bandwidth_s = std::max(plan.prediction.bandwidth_s, r.endpoint_time_s) * r.fabric_factor;
  for (auto& f : r.flows) {
    f.bytes = static_cast<Bytes>(std::llround(static_cast<double>(f.bytes) * r.wire_scale));
  }
  return r;
}

Prediction predict_on_topology(const NcclModel& model, const Topology& topo, CollectiveKind kind,
                               Bytes bytes, std::span<const std::int32_t> ranks, int root) {
  CollectivePlan plan = build_plan(model, kind, bytes, ranks, root);
  Prediction p = plan.prediction;
  if (plan.flows.empty()) return p;
  RoutedPlan routed = route_plan(plan, topo);
  p.fabric_factor = routed.fabric_factor;
  p.bandwidth_s = routed.bandwidth_s;
  p.seconds = p.launch_s + p.latency_s + p.pipeline_s + p.bandwidth_s;
  p.algbw = static_cast<double>(bytes) / p.seconds;
  p.busbw = p.algbw * bus_factor(kind, p.n_ranks);
  return p;
}

}  // namespace zerosim::nccl
