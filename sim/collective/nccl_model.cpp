#include "sim/collective/nccl_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "sim/cluster/topology.h"
#include "sim/core/error.h"

namespace zerosim::nccl {

namespace {

constexpr double kEps = 1e-9;

int idx(Func f) { return static_cast<int>(f); }
int idx(Algo a) { return static_cast<int>(a); }
int idx(Proto p) { return static_cast<int>(p); }
int idx(Hw h) { return static_cast<int>(h); }
int idx(Arch a) { return static_cast<int>(a); }

// NCCL's log2i: floor(log2(n)), 0 for n <= 1.
int log2i(std::int64_t n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  s.erase(std::remove(s.begin(), s.end(), '-'), s.end());
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  return s;
}

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

}  // namespace

double bus_factor(CollectiveKind kind, int n) {
  if (n <= 1) return 0;
  switch (kind) {
    case CollectiveKind::AllReduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll: return static_cast<double>(n - 1) / n;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
    case CollectiveKind::SendRecv: return 1.0;
  }
  return 1.0;
}

std::optional<Func> func_of(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return Func::AllReduce;
    case CollectiveKind::ReduceScatter: return Func::ReduceScatter;
    case CollectiveKind::AllGather: return Func::AllGather;
    case CollectiveKind::Broadcast: return Func::Broadcast;
    case CollectiveKind::Reduce: return Func::Reduce;
    case CollectiveKind::AllToAll:
    case CollectiveKind::SendRecv: return std::nullopt;
  }
  return std::nullopt;
}

CollectiveKind parse_collective(const std::string& text, const std::string& key_path) {
  const std::string t = lower(text);
  if (t == "allreduce") return CollectiveKind::AllReduce;
  if (t == "reducescatter") return CollectiveKind::ReduceScatter;
  if (t == "allgather") return CollectiveKind::AllGather;
  if (t == "broadcast" || t == "bcast") return CollectiveKind::Broadcast;
  if (t == "reduce") return CollectiveKind::Reduce;
  if (t == "alltoall") return CollectiveKind::AllToAll;
  if (t == "sendrecv" || t == "p2p") return CollectiveKind::SendRecv;
  const std::vector<std::string> names = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                          "reduce",     "all_to_all",     "send_recv"};
  throw InputError(key_path, "unknown collective '" + text + "'" + did_you_mean(text, names) +
                                 "; expected one of: " + join_list(names));
}

const char* collective_cli_name(CollectiveKind kind) { return collective_name(kind); }

Algo parse_algo(const std::string& text, const std::string& key_path) {
  const std::string t = lower(text);
  if (t == "ring") return Algo::Ring;
  if (t == "tree") return Algo::Tree;
  if (t == "nvls") return Algo::Nvls;
  if (t == "nvlstree") return Algo::NvlsTree;
  if (t == "pat") return Algo::Pat;
  const std::vector<std::string> names = {"ring", "tree", "nvls", "nvls_tree", "pat", "auto"};
  throw InputError(key_path, "unknown algorithm '" + text + "'" + did_you_mean(text, names) +
                                 "; expected one of: " + join_list(names) +
                                 " (CollNet needs a SHARP network plugin zerosim does not model)");
}

Proto parse_proto(const std::string& text, const std::string& key_path) {
  const std::string t = lower(text);
  if (t == "ll") return Proto::LL;
  if (t == "ll128") return Proto::LL128;
  if (t == "simple") return Proto::Simple;
  const std::vector<std::string> names = {"LL", "LL128", "Simple", "auto"};
  throw InputError(key_path, "unknown protocol '" + text + "'" + did_you_mean(text, names) +
                                 "; expected one of: " + join_list(names));
}

Arch arch_of(const GpuSpec& gpu) {
  std::string n = gpu.name;
  for (char& ch : n) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("V100")) return Arch::Volta;
  if (has("B200") || has("B100") || has("B300") || has("GB200") || has("GB300")) {
    return Arch::Blackwell;
  }
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200")) return Arch::Hopper;
  if (has("A100") || has("A800")) return Arch::Ampere;
  // Unknown name: by dense BF16 peak (V100 has none; A100 312; H100 989; B200 2250).
  if (gpu.peak_tflops_bf16 <= 0) return Arch::Volta;
  if (gpu.peak_tflops_bf16 < 500) return Arch::Ampere;
  if (gpu.peak_tflops_bf16 < 1500) return Arch::Hopper;
  return Arch::Blackwell;
}

CommInfo build_comm(const ClusterSpec& c, std::span<const std::int32_t> ranks, const Constants& k,
                    const ModelOptions& opt) {
  CommInfo m;
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
  // NCCL nodes = NVLink domains, in order of first appearance.
  std::vector<int> domain_ids;
  std::vector<int> per_node;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int d = ranks[i] / domain;
    auto it = std::find(domain_ids.begin(), domain_ids.end(), d);
    int ni = static_cast<int>(it - domain_ids.begin());
    if (it == domain_ids.end()) {
      domain_ids.push_back(d);
      per_node.push_back(0);
      m.node_first.push_back(static_cast<int>(i));
    }
    m.node_index.push_back(ni);
    ++per_node[ni];
  }
  m.n_nodes = static_cast<int>(domain_ids.size());
  m.ppn = m.n_ranks > 0 ? *std::max_element(per_node.begin(), per_node.end()) : 0;

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
    int least = std::numeric_limits<int>::max();
    for (int ni = 0; ni < m.n_nodes; ++ni) {
      std::set<std::pair<int, int>> nics;
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (m.node_index[i] != ni) continue;
        const int node = ranks[i] / c.gpus_per_node;
        for (int n : local_nics_of(c, ranks[i] % c.gpus_per_node)) nics.insert({node, n});
      }
      least = std::min(least, static_cast<int>(nics.size()));
    }
    m.nics = least;
    if (m.nics < 1) {
      throw InputError("cluster.nics_per_node", "a group spanning nodes needs NICs");
    }
    // NCCL's hwLat NET values already hold 2.7 us per ring LL hop (the presets' nic_latency for
    // InfiniBand); a slower fabric (EFA) adds the difference as the graph's latencyInter.
    m.latency_inter_us = std::max(0.0, c.nic_latency * 1e6 - 2.7);
  }

  const Arch a = m.arch;
  const int ring_max = k.ring_graph_max_channels;
  const double nvl = m.nvlink_total;
  if (m.n_nodes == 1) {
    m.ring = search_speeds(k.speed_intra[idx(a)], nvl, nvl, 1,
                           [&](double s) { return std::min(ring_max, floor_div(nvl, s)); });
  } else {
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

  m.nvls_support = c.nvls && opt.nvls_enable && a >= Arch::Hopper && m.ppn >= 2 &&
                   m.intra_hw == Hw::NvLink && c.nvswitch && m.ppn <= 32;
  if (m.nvls_support) {
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

  // Threads (ncclTopoTuneModel) and per-thread thresholds.
  for (int al = 0; al < kNumAlgos; ++al) {
    m.max_threads[al][idx(Proto::LL)] = k.ll_max_threads;
    m.max_threads[al][idx(Proto::LL128)] = k.ll128_max_threads;
    m.max_threads[al][idx(Proto::Simple)] = k.max_threads;
    m.thread_threshold[al][idx(Proto::LL)] = k.ll_thread_threshold;
    m.thread_threshold[al][idx(Proto::LL128)] = k.ll128_thread_threshold;
    m.thread_threshold[al][idx(Proto::Simple)] = k.simple_thread_threshold;
  }
  m.max_threads[idx(Algo::Ring)][idx(Proto::Simple)] =
      m.ring.bw_intra * m.ring.n_channels <= k.pci_bw ? 256 : k.simple_max_threads;
  m.max_threads[idx(Algo::Tree)][idx(Proto::Simple)] = k.simple_max_threads;
  m.thread_threshold[idx(Algo::Ring)][idx(Proto::LL)] *= m.n_ranks;

  // ncclTopoTuneModel: bandwidth and latency tables.
  const int n = m.n_ranks;
  const int nn = m.n_nodes;
  const double ppn = static_cast<double>(n) / std::max(1, nn);
  if (n <= 1) return m;
  const int index2 = nn <= 2 ? nn - 1 : 2;
  const int index1 = nn == 1 ? idx(a) : (opt.cpu == CpuVendor::Amd ? 1 : 0);
  const double ll_max_bw = k.ll_max_bw[index1][index2];
  const double per_ch_tree = k.per_ch_max_tree_bw[idx(a)][index2];
  const double per_ch_ring128 = k.per_ch_max_ring_ll128_bw[idx(a)][index2];
  const double per_ch_tree128 = k.per_ch_max_tree_ll128_bw[idx(a)][index2];
  const Hw intra_hw = m.intra_hw;
  const Hw hw = nn == 1 ? intra_hw : Hw::Net;
  const bool ll128_ok = m.intra_hw == Hw::NvLink && (a != Arch::Blackwell || k.ll128_blackwell);
  const bool pat_ok = k.pat && nn == n;  // ncclPatEnable: one GPU per node

  for (int fi = 0; fi < kNumFuncs; ++fi) {
    const Func f = static_cast<Func>(fi);
    const bool ar = f == Func::AllReduce;
    const bool agrs = f == Func::AllGather || f == Func::ReduceScatter;
    const int nsteps = ar ? 2 * (n - 1) : agrs ? n - 1 : n;
    int n_inter_steps;
    if (k.ring_inter_steps_227) {
      n_inter_steps = nn == 1 ? 0 : ar ? 2 * (nn - 1) : nn - 1;
    } else {
      n_inter_steps = ar ? (nn > 1 ? 2 * nn : 0) : agrs ? nn - 1 : nn;
    }
    for (int ai = 0; ai < kNumAlgos; ++ai) {
      const Algo al = static_cast<Algo>(ai);
      bool offered = false;
      switch (al) {
        case Algo::Ring: offered = true; break;
        case Algo::Tree: offered = ar; break;
        case Algo::Nvls: offered = m.nvls_support && nn == 1 &&
                                   (ar || (agrs && k.nvls_allgather_reducescatter)); break;
        case Algo::NvlsTree: offered = m.nvls_support && nn > 1 && ar; break;
        case Algo::Pat: offered = agrs && pat_ok; break;
        default: offered = false;  // CollNet: needs a SHARP plugin
      }
      if (!offered) continue;
      if (opt.algo && *opt.algo != al) continue;
      const GraphInfo& g = al == Algo::Ring || al == Algo::Pat ? m.ring
                           : al == Algo::Tree                  ? m.tree
                                                               : m.nvls;
      for (int pi = 0; pi < kNumProtos; ++pi) {
        const Proto p = static_cast<Proto>(pi);
        const bool nvls_like = al == Algo::Nvls || al == Algo::NvlsTree;
        if ((nvls_like || al == Algo::Pat) && p != Proto::Simple) continue;
        if (p == Proto::LL128 && !ll128_ok) continue;
        if (opt.proto && *opt.proto != p) continue;

        double bw = nn <= 2 ? g.bw_intra : g.bw_inter;
        if (al == Algo::Nvls && k.nvls_bw_min_intra_inter) {
          bw = (agrs && k.nvls_ag_rs_227_formula)
                   ? std::min(g.bw_intra * (ppn - 1) / ppn, g.bw_inter * 0.9)
                   : std::min(g.bw_intra, g.bw_inter);
        }
        if (al == Algo::NvlsTree && k.nvls_bw_min_intra_inter) {
          bw = std::min(g.bw_intra, nn <= 2 ? g.bw_inter : g.bw_inter / 2);
        }
        double bus = g.n_channels * bw;
        if (al == Algo::Ring && p == Proto::LL) {
          const bool quarter = nn > 1 || ar || f == Func::Reduce;
          bus = std::min(ll_max_bw, bus * (quarter ? k.ring_ll_factor_allreduce
                                                   : k.ring_ll_factor_other));
        }
        if (al == Algo::Ring && p == Proto::LL128) {
          bus = std::min(bus * (ppn < 2 ? k.ring_ll128_factor_ppn1 : k.ring_ll128_factor),
                         g.n_channels * per_ch_ring128);
        }
        if (al == Algo::Tree) bus = std::min(bus * k.tree_factor, g.n_channels * per_ch_tree);
        if (al == Algo::Tree && p == Proto::LL) bus = std::min(bus * k.tree_ll_factor, ll_max_bw);
        if (al == Algo::Tree && p == Proto::LL128) {
          bus = std::min(bus * (nn == 1 ? k.tree_ll128_factor_1node : k.tree_ll128_factor_multinode),
                         g.n_channels * per_ch_tree128);
        }
        if (al == Algo::Pat) bus *= k.pat_factor;
        // busBw -> algorithm bandwidth. 2.25+: no conversion for non-ring all-gather/reduce-scatter.
        const bool no_ratio = k.nvls_ag_rs_227_formula && agrs && al != Algo::Ring;
        if (!no_ratio) {
          if (al == Algo::Ring) bus *= static_cast<double>(n) / nsteps;
          else if (nvls_like) bus *= k.nvls_ratio;
          else bus *= 0.5;
        }
        m.bandwidth[fi][ai][pi] = bus;

        // Latency.
        double lat = k.base_lat[ai][pi];
        double intra_lat = k.hw_lat[idx(intra_hw)][ai][pi];
        double inter_lat = (k.inter_lat_tree_when_ppn1 && ppn == 1)
                               ? k.hw_lat[idx(Hw::Net)][idx(Algo::Tree)][pi]
                               : k.hw_lat[idx(Hw::Net)][ai][pi];
        inter_lat += m.latency_inter_us;
        if (p == Proto::Simple) inter_lat += m.latency_inter_us;  // flush
        switch (al) {
          case Algo::Ring:
            if (f == Func::Broadcast || f == Func::Reduce) {
              lat += k.hw_lat[idx(hw)][ai][pi];  // sameChannels
            } else {
              double net_overhead = 0;
              if (nn > 1) {
                net_overhead = opt.cpu == CpuVendor::Amd ? k.net_overhead_amd_us
                                                         : k.net_overhead_intel_us;
                if (p == Proto::Simple) net_overhead *= 3;
              }
              intra_lat = std::max(intra_lat, net_overhead);
              lat += (nsteps - n_inter_steps) * intra_lat + n_inter_steps * inter_lat;
            }
            break;
          case Algo::Tree:
            lat += 2 * ((n / nn - 1) * intra_lat + log2i(nn) * inter_lat);
            break;
          case Algo::Nvls:
            if (k.nvls_latency_is_intra) {
              lat = intra_lat + (nn > 1 ? inter_lat : 0);
            } else if (nn > 1) {
              lat += k.hw_lat[idx(Hw::Net)][ai][pi];
            }
            break;
          case Algo::NvlsTree:
            if (k.nvls_latency_is_intra) {
              lat += intra_lat + 2 * log2i(nn) * inter_lat;
            } else {
              lat += 2 * (nn - 1) * k.hw_lat[idx(Hw::Net)][ai][pi];
            }
            break;
          case Algo::Pat:
            lat = 8 + log2i(nn) * (inter_lat / 3.5) + n * 2.8;
            break;
          default: break;
        }
        m.latency[fi][ai][pi] = lat;
      }
    }
  }
  return m;
}

namespace {

// The two terms of ncclTopoGetAlgoTime, in us; false when unavailable.
bool nccl_terms(const CommInfo& m, const Constants& k, Func f, Algo a, Proto p, Bytes bytes,
                double* lat_us, double* bw_us) {
  double bw = m.bandwidth[idx(f)][idx(a)][idx(p)];
  double lat = m.latency[idx(f)][idx(a)][idx(p)];
  if (!(bw > 0)) return false;
  const int log_size = log2i(bytes >> 6);
  const bool tree_ok = k.version == Version::V2_27 ? f == Func::AllReduce : true;
  if (a == Algo::Tree && tree_ok && log_size < 23) bw *= k.tree_correction[idx(p)][log_size];
  if (a == Algo::Ring && p == Proto::Simple && m.n_nodes > 1 && f == Func::AllReduce &&
      bytes / (static_cast<Bytes>(m.comm_channels) * m.n_ranks) >= 64) {
    lat *= m.arch >= Arch::Ampere ? k.plateau_factor : k.plateau_factor_volta;
  }
  *lat_us = lat;
  *bw_us = static_cast<double>(bytes) / (1000.0 * bw);
  return true;
}

}  // namespace

double nccl_time_us(const CommInfo& m, const Constants& k, Func f, Algo a, Proto p, Bytes bytes) {
  double lat = 0, bw = 0;
  if (!nccl_terms(m, k, f, a, p, bytes, &lat, &bw)) return -1;
  return lat + bw;
}

Choice choose(const CommInfo& m, const Constants& k, Func f, Bytes bytes) {
  Choice ch;
  double best = std::numeric_limits<double>::infinity();
  bool found = false;
  for (int ai = 0; ai < kNumAlgos; ++ai) {
    for (int pi = 0; pi < kNumProtos; ++pi) {
      const double t = nccl_time_us(m, k, f, static_cast<Algo>(ai), static_cast<Proto>(pi), bytes);
      if (t >= 0 && t < best) {
        best = t;
        ch.algo = static_cast<Algo>(ai);
        ch.proto = static_cast<Proto>(pi);
        found = true;
      }
    }
  }
  if (!found) {
    throw InputError("collective.algo",
                     "no NCCL algorithm/protocol available for this collective on this group "
                     "with the forced algorithm/protocol");
  }
  ch.nccl_time_us = best;
  // getAlgoInfo: trim channels, then threads, while each thread would get too little work.
  const bool nvls_like = ch.algo == Algo::Nvls || ch.algo == Algo::NvlsTree;
  int nc = nvls_like ? m.nvls_channels : m.comm_channels;
  int nt = m.max_threads[idx(ch.algo)][idx(ch.proto)];
  const std::int64_t thr = m.thread_threshold[idx(ch.algo)][idx(ch.proto)];
  if (!nvls_like) {
    while (bytes < static_cast<std::int64_t>(nc) * nt * thr && nc >= 2) --nc;
    while (bytes < static_cast<std::int64_t>(nc) * nt * thr && nt % 128 == 0) nt /= 2;
  }
  if (ch.proto == Proto::Simple) {
    if (ch.algo == Algo::Ring) nt += 32;
    if (ch.algo == Algo::Tree) nt += 4 * 32;
  }
  nt = std::max(nt, 3 * 32);
  if (k.version == Version::V2_27 && (ch.algo == Algo::Tree || ch.algo == Algo::Pat)) {
    nt = k.max_threads;
  }
  ch.channels = nc;
  ch.threads = nt;
  return ch;
}

NcclModel::NcclModel(ClusterSpec cluster, ModelOptions options)
    : cluster_(std::move(cluster)), options_(std::move(options)) {
  const std::string v = options_.nccl_version.empty() ? cluster_.nccl_version : options_.nccl_version;
  k_ = &nccl::constants(version_from_string(
      v.empty() ? "2.27" : v, options_.nccl_version.empty() ? "cluster.nccl_version" : "nccl_version"));
}

const CommInfo& NcclModel::comm(std::span<const std::int32_t> ranks) const {
  std::vector<std::int32_t> key(ranks.begin(), ranks.end());
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(std::move(key), build_comm(cluster_, ranks, *k_, options_)).first->second;
}

Prediction NcclModel::predict(CollectiveKind kind, Bytes bytes,
                              std::span<const std::int32_t> ranks) const {
  Prediction out;
  out.kind = kind;
  out.bytes = bytes;
  out.n_ranks = static_cast<int>(ranks.size());
  out.version = k_->version;
  const CommInfo& m = comm(ranks);
  out.n_nodes = m.n_nodes;
  if (out.n_ranks <= 1 || bytes <= 0) return out;
  auto f = func_of(kind);
  if (!f) return predict_p2p(kind, bytes, m);

  const Choice ch = choose(m, *k_, *f, bytes);
  out.algo = ch.algo;
  out.proto = ch.proto;
  out.channels = ch.channels;
  out.threads = ch.threads;
  out.nccl_time_s = ch.nccl_time_us * 1e-6;
  double lat_us = 0, bw_us = 0;
  nccl_terms(m, *k_, *f, ch.algo, ch.proto, bytes, &lat_us, &bw_us);
  out.latency_s = lat_us * 1e-6;
  out.bandwidth_s = bw_us * 1e-6;
  out.launch_s = options_.launch_overhead ? options_.launch_overhead_s : 0;

  // Where NCCL applies its own "plateau" correction (multi-node Ring/Simple all-reduce, latency
  // x1.4) the slice term would count the same effect twice, so it is left out there.
  const bool sliced = *f == Func::AllReduce || *f == Func::AllGather || *f == Func::ReduceScatter;
  const bool plateau = m.n_nodes > 1 && *f == Func::AllReduce;
  if (options_.pipeline_term && ch.algo == Algo::Ring && ch.proto == Proto::Simple && sliced &&
      !plateau) {
    const int n = m.n_ranks;
    const int nsteps = *f == Func::AllReduce ? 2 * (n - 1) : n - 1;
    const std::int64_t chunk =
        k_->simple_buffer_bytes / k_->steps * k_->chunk_steps;  // 2 MiB per rank per channel
    const std::int64_t loop = static_cast<std::int64_t>(std::max(1, ch.channels)) * n * chunk;
    const std::int64_t loops = (bytes + loop - 1) / loop;
    const int slices = k_->chunk_steps / k_->slice_steps;
    const double step_us =
        k_->hw_lat[idx(m.intra_hw)][idx(Algo::Ring)][idx(Proto::Simple)];
    out.pipeline_s = (static_cast<double>(loops) * nsteps * slices - nsteps) * step_us * 1e-6;
  }
  out.seconds = out.launch_s + out.latency_s + out.pipeline_s + out.bandwidth_s;
  out.algbw = static_cast<double>(bytes) / out.seconds;
  out.busbw = out.algbw * bus_factor(kind, out.n_ranks);
  return out;
}

// Send/recv and all-to-all are NCCL point-to-point operations, outside its tuner. zerosim's model:
// Simple protocol (LL up to NCCL_P2P_LL_THRESHOLD = 16 KiB, enqueue.cc), one Ring step of latency
// (baseLat + hwLat of the link class), and the bandwidth of NCCL's ring graph for the pair: the
// NVLink ring busBw inside a domain, the GPU's NICs x per-channel speed across domains.
// All-to-all: each rank sends bytes/n to every peer at once; the NVLink part and the network part
// run concurrently, the network part sharing the node's NIC bandwidth among its ppn ranks.
Prediction NcclModel::predict_p2p(CollectiveKind kind, Bytes bytes, const CommInfo& m) const {
  Prediction out;
  out.kind = kind;
  out.bytes = bytes;
  out.n_ranks = m.n_ranks;
  out.n_nodes = m.n_nodes;
  out.version = k_->version;
  out.p2p = true;
  out.algo = Algo::Ring;
  const bool ll = bytes <= 16384;
  out.proto = ll ? Proto::LL : Proto::Simple;
  const int pi = idx(out.proto);
  const int ri = idx(Algo::Ring);
  const Hw hw = m.n_nodes > 1 ? Hw::Net : m.intra_hw;
  double lat = k_->base_lat[ri][pi] + k_->hw_lat[idx(hw)][ri][pi];
  if (m.n_nodes > 1) lat += m.latency_inter_us;

  // NVLink bandwidth of a single-domain ring (what the intra graph search gives).
  const CommInfo* intra = &m;
  CommInfo local;
  if (m.n_nodes > 1) {
    std::vector<std::int32_t> first = {m.ranks[0]};
    for (std::size_t i = 1; i < m.ranks.size() && first.size() < 2; ++i) {
      if (m.node_index[i] == 0) first.push_back(m.ranks[i]);
    }
    if (first.size() == 2) {
      local = build_comm(cluster_, first, *k_, options_);
      intra = &local;
    } else {
      intra = nullptr;
    }
  }
  const double nvlink_bus = intra ? intra->ring.n_channels * intra->ring.bw_intra : 0;
  const double net_bus = m.n_nodes > 1 ? m.ring.n_channels * m.ring.bw_inter : 0;
  auto proto_bw = [&](double bw) {
    return ll ? std::min(bw * k_->ring_ll_factor_other, k_->ll_max_bw[idx(m.arch)][0]) : bw;
  };
  double bw_us = 0;
  const double b = static_cast<double>(bytes);
  if (kind == CollectiveKind::SendRecv) {
    const double bw = proto_bw(m.n_nodes > 1 ? net_bus : nvlink_bus);
    bw_us = b / (1000.0 * bw);
    out.channels = m.n_nodes > 1 ? m.ring.n_channels : intra->ring.n_channels;
  } else {  // AllToAll
    const int n = m.n_ranks;
    int local_peers = 0;
    for (int ni = 0; ni < m.n_nodes; ++ni) {
      int cnt = 0;
      for (int x : m.node_index) cnt += x == ni;
      local_peers = std::max(local_peers, cnt - 1);
    }
    const int remote_peers = n - 1 - local_peers;
    const double per_peer = b / n;
    double t_intra = local_peers > 0 ? local_peers * per_peer / (1000.0 * proto_bw(nvlink_bus)) : 0;
    double t_inter = 0;
    if (remote_peers > 0) {
      const double per_rank_net = net_bus / std::max(1, m.ppn);  // node NICs shared by its ranks
      t_inter = remote_peers * per_peer / (1000.0 * proto_bw(per_rank_net));
    }
    bw_us = std::max(t_intra, t_inter);
    out.channels = m.comm_channels;
  }
  out.latency_s = lat * 1e-6;
  out.bandwidth_s = bw_us * 1e-6;
  out.launch_s = options_.launch_overhead ? options_.launch_overhead_s : 0;
  out.nccl_time_s = out.latency_s + out.bandwidth_s;
  out.seconds = out.launch_s + out.latency_s + out.bandwidth_s;
  out.algbw = b / out.seconds;
  out.busbw = out.algbw * bus_factor(kind, out.n_ranks);
  return out;
}

}  // namespace zerosim::nccl
