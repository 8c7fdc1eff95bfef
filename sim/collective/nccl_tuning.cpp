#include "sim/collective/nccl_tuning.h"

#include <algorithm>
#include <limits>

#include "sim/core/error.h"

namespace zerosim::nccl {

namespace {

// NCCL's log2i: floor(log2(n)), 0 for n <= 1.
int log2i(std::int64_t n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

// ncclTopoTuneModel's threads per (algorithm, protocol) and the per-thread work thresholds
// getAlgoInfo trims against.
void set_threads(const Constants& k, CommInfo& m) {
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
}

// What ncclTopoTuneModel knows of the communicator while it fills its tables.
struct Tune {
  const CommInfo& m;
  const Constants& k;
  const TunerOptions& opt;
  int n = 0, nn = 0;
  double ppn = 0;  // ranks per node as a real number, as NCCL computes it
  double ll_max_bw = 0, per_ch_tree = 0, per_ch_ring128 = 0, per_ch_tree128 = 0;
  Hw intra_hw = Hw::NvLink, hw = Hw::NvLink;  // link class inside a node; of the ring's steps
};

// One collective's row of the tables.
struct Row {
  Func f;
  bool ar = false, agrs = false;  // all-reduce; all-gather or reduce-scatter
  int nsteps = 0, n_inter_steps = 0;
};

bool offered(const Tune& t, const Row& r, Algo al) {
  const bool pat_ok = t.k.pat && t.nn == t.n;  // ncclPatEnable: one GPU per node
  switch (al) {
    case Algo::Ring: return true;
    case Algo::Tree: return r.ar;
    case Algo::Nvls:
      return t.m.nvls_support && t.nn == 1 &&
             (r.ar || (r.agrs && t.k.nvls_allgather_reducescatter));
    case Algo::NvlsTree: return t.m.nvls_support && t.nn > 1 && r.ar;
    case Algo::Pat: return r.agrs && pat_ok;
    default: return false;  // CollNet: needs a SHARP plugin
  }
}

// Algorithm bandwidth, GB/s: the graph's bus bandwidth, the protocol's refinements and caps, then
// bus -> algorithm bandwidth.
double algo_bandwidth(const Tune& t, const Row& r, Algo al, Proto p, const GraphInfo& g) {
  const Constants& k = t.k;
  const int nn = t.nn;
  const double ppn = t.ppn;
  const bool nvls_like = al == Algo::Nvls || al == Algo::NvlsTree;
  double bw = nn <= 2 ? g.bw_intra : g.bw_inter;
  if (al == Algo::Nvls && k.nvls_bw_min_intra_inter) {
    bw = (r.agrs && k.nvls_ag_rs_227_formula)
             ? std::min(g.bw_intra * (ppn - 1) / ppn, g.bw_inter * 0.9)
             : std::min(g.bw_intra, g.bw_inter);
  }
  if (al == Algo::NvlsTree && k.nvls_bw_min_intra_inter) {
    bw = std::min(g.bw_intra, nn <= 2 ? g.bw_inter : g.bw_inter / 2);
  }
  double bus = g.n_channels * bw;
  if (al == Algo::Ring && p == Proto::LL) {
    const bool quarter = nn > 1 || r.ar || r.f == Func::Reduce;
    bus = std::min(t.ll_max_bw, bus * (quarter ? k.ring_ll_factor_allreduce
                                               : k.ring_ll_factor_other));
  }
  if (al == Algo::Ring && p == Proto::LL128) {
    bus = std::min(bus * (ppn < 2 ? k.ring_ll128_factor_ppn1 : k.ring_ll128_factor),
                   g.n_channels * t.per_ch_ring128);
  }
  if (al == Algo::Tree) bus = std::min(bus * k.tree_factor, g.n_channels * t.per_ch_tree);
  if (al == Algo::Tree && p == Proto::LL) bus = std::min(bus * k.tree_ll_factor, t.ll_max_bw);
  if (al == Algo::Tree && p == Proto::LL128) {
    bus = std::min(bus * (nn == 1 ? k.tree_ll128_factor_1node : k.tree_ll128_factor_multinode),
                   g.n_channels * t.per_ch_tree128);
  }
  if (al == Algo::Pat) bus *= k.pat_factor;
  // busBw -> algorithm bandwidth. 2.25+: no conversion for non-ring all-gather/reduce-scatter.
  const bool no_ratio = k.nvls_ag_rs_227_formula && r.agrs && al != Algo::Ring;
  if (!no_ratio) {
    if (al == Algo::Ring) bus *= static_cast<double>(t.n) / r.nsteps;
    else if (nvls_like) bus *= k.nvls_ratio;
    else bus *= 0.5;
  }
  return bus;
}

// Latency, us.
double algo_latency(const Tune& t, const Row& r, Algo al, Proto p) {
  const Constants& k = t.k;
  const int ai = idx(al), pi = idx(p);
  const int n = t.n, nn = t.nn;
  double lat = k.base_lat[ai][pi];
  double intra_lat = k.hw_lat[idx(t.intra_hw)][ai][pi];
  double inter_lat = (k.inter_lat_tree_when_ppn1 && t.ppn == 1)
                         ? k.hw_lat[idx(Hw::Net)][idx(Algo::Tree)][pi]
                         : k.hw_lat[idx(Hw::Net)][ai][pi];
  inter_lat += t.m.latency_inter_us;
  if (p == Proto::Simple) inter_lat += t.m.latency_inter_us;  // flush
  switch (al) {
    case Algo::Ring:
      if (r.f == Func::Broadcast || r.f == Func::Reduce) {
        lat += k.hw_lat[idx(t.hw)][ai][pi];  // sameChannels
      } else {
        double net_overhead = 0;
        if (nn > 1) {
          net_overhead = t.opt.cpu == CpuVendor::Amd ? k.net_overhead_amd_us
                                                     : k.net_overhead_intel_us;
          if (p == Proto::Simple) net_overhead *= 3;
        }
        intra_lat = std::max(intra_lat, net_overhead);
        lat += (r.nsteps - r.n_inter_steps) * intra_lat + r.n_inter_steps * inter_lat;
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
  return lat;
}

// ncclTopoTuneModel: the bandwidth and latency tables of a communicator of two or more ranks.
void tune_model(const Constants& k, const TunerOptions& opt, CommInfo& m) {
  const Arch a = m.arch;
  Tune t{m, k, opt};
  t.n = m.n_ranks;
  t.nn = m.n_nodes;
  t.ppn = static_cast<double>(t.n) / std::max(1, t.nn);
  const int index2 = t.nn <= 2 ? t.nn - 1 : 2;
  const int index1 = t.nn == 1 ? idx(a) : (opt.cpu == CpuVendor::Amd ? 1 : 0);
  t.ll_max_bw = k.ll_max_bw[index1][index2];
  t.per_ch_tree = k.per_ch_max_tree_bw[idx(a)][index2];
  t.per_ch_ring128 = k.per_ch_max_ring_ll128_bw[idx(a)][index2];
  t.per_ch_tree128 = k.per_ch_max_tree_ll128_bw[idx(a)][index2];
  t.intra_hw = m.intra_hw;
  t.hw = t.nn == 1 ? t.intra_hw : Hw::Net;
  const bool ll128_ok = m.intra_hw == Hw::NvLink && (a != Arch::Blackwell || k.ll128_blackwell);

  for (int fi = 0; fi < kNumFuncs; ++fi) {
    Row r{static_cast<Func>(fi)};
    r.ar = r.f == Func::AllReduce;
    r.agrs = r.f == Func::AllGather || r.f == Func::ReduceScatter;
    const int n = t.n, nn = t.nn;
    r.nsteps = r.ar ? 2 * (n - 1) : r.agrs ? n - 1 : n;
    if (k.ring_inter_steps_227) {
      r.n_inter_steps = nn == 1 ? 0 : r.ar ? 2 * (nn - 1) : nn - 1;
    } else {
      r.n_inter_steps = r.ar ? (nn > 1 ? 2 * nn : 0) : r.agrs ? nn - 1 : nn;
    }
    for (int ai = 0; ai < kNumAlgos; ++ai) {
      const Algo al = static_cast<Algo>(ai);
      if (!offered(t, r, al)) continue;
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
        m.bandwidth[fi][ai][pi] = algo_bandwidth(t, r, al, p, g);
        m.latency[fi][ai][pi] = algo_latency(t, r, al, p);
      }
    }
  }
}

}  // namespace

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

CommInfo build_comm(const ClusterSpec& c, std::span<const std::int32_t> ranks, const Constants& k,
                    const TunerOptions& opt) {
  CommInfo m;
  static_cast<CommGraph&>(m) = search_graphs(c, ranks, k, opt.nvls_enable);
  set_threads(k, m);
  if (m.n_ranks <= 1) return m;
  tune_model(k, opt, m);
  return m;
}

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

}  // namespace zerosim::nccl
