#include "sim/collective/nccl_model.h"

#include <algorithm>
#include <cctype>

#include "sim/core/error.h"

namespace zerosim::nccl {

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  s.erase(std::remove(s.begin(), s.end(), '-'), s.end());
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  return s;
}

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
