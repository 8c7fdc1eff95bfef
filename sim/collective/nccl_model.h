#pragma once
// NCCL's own cost model and algorithm choice, replayed for a communicator of the simulated
// cluster, plus zerosim's prediction of the time the collective really takes.
//
// Two layers, kept apart on purpose:
//
// 1. NCCL's tuner (what NCCL believes). For a group of ranks, build_comm() emulates NCCL's
//    topology search (src/graph/search.cc: channels x per-channel bandwidth for the ring, tree and
//    NVLS graphs, from NCCL's per-NVLink and per-NIC speeds) and ncclTopoTuneModel
//    (src/graph/tuning.cc: a latency in us and an algorithm bandwidth in GB/s for every
//    (collective, algorithm, protocol)). nccl_time_us() is ncclTopoGetAlgoTime:
//        time = lat + nBytes / (1000 * bw)      (tree correction, ring "plateau" included)
//    and choose() is getAlgoInfo/topoGetAlgoInfo: the (algorithm, protocol) of least time, then
//    NCCL's channel and thread trimming for small messages. Constants: nccl_constants.h.
//
// 2. zerosim's prediction (what happens). Starting from NCCL's choice and its numbers:
//        seconds = launch + lat + pipeline + nBytes / bw * fabric
//    launch    per-call host/launch overhead of an un-graphed NCCL call (kLaunchOverheadS; off
//              with ModelOptions::launch_overhead = false, e.g. CUDA graphs);
//    pipeline  Ring/Simple only: NCCL's latency counts one per-step latency per ring step, but a
//              Simple ring moves each step as CHUNKSTEPS/SLICESTEPS = 2 slices and repeats the
//              2(n-1) (all-reduce) or n-1 steps once per loop of nChannels*nRanks*2 MiB, each slice
//              paying the per-step latency hwLat[intra][Ring][Simple]. zerosim adds the slices
//              NCCL does not count ("waiting for proper chunk modeling", tuning.cc), except for
//              multi-node all-reduce, where NCCL's own "plateau" factor (latency x1.4) stands
//              for the same effect;
//    fabric    >= 1: how much the routed flows of the collective overload a fabric link
//              (oversubscription, ECMP collisions) relative to the endpoint links; 1 without a
//              Topology. With a Topology the bandwidth term is also floored at the raw load of
//              the busiest endpoint link (see nccl_plan.h, predict_on_topology).
// The reasons and the validation are in docs/NCCL_MODEL.md and docs/VALIDATION.md.
//
// Sizes: `bytes` is nccl-tests' "size": the buffer of all-reduce / broadcast / reduce, the full
// output of all-gather, the full input of reduce-scatter, the send buffer of all-to-all, the
// message of send/recv. That is also NCCL's nBytes for the tuner.
// Ranks: global GPU ranks (node = rank / gpus_per_node, NVLink domain = rank /
// nvlink_domain_gpus), in communicator order (NCCL lays rings in rank order). NCCL's "node" is
// taken to be the NVLink domain, so a GB200 NVL72 rack is one node (MNNVL).
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/collective/nccl_constants.h"
#include "sim/core/plan.h"

namespace zerosim::nccl {

// NCCL's collective order (ncclFunc_t), the first index of its tuning tables.
enum class Func : std::uint8_t { Broadcast, Reduce, AllGather, ReduceScatter, AllReduce };
inline constexpr int kNumFuncs = 5;

enum class CpuVendor : std::uint8_t { Intel, Amd };

// Per-call overhead of an un-graphed NCCL launch as measured by nccl-tests / torch benchmarks:
// collectives.json's small messages take 43.8 us (8x A100 all-reduce 32 KiB, nccl-tests) and
// 40.0 us (8x H200, 32 KiB, torch) where NCCL's own model says 16.0 and 15.4 us. Two independent
// curves, 27.8 and 24.6 us apart: 25 us. See docs/NCCL_MODEL.md.
inline constexpr double kLaunchOverheadS = 25e-6;

struct ModelOptions {
  std::string nccl_version;          // "" = the cluster's nccl_version
  CpuVendor cpu = CpuVendor::Intel;  // getNetOverhead and the multi-node LL cap depend on it
  bool launch_overhead = true;       // add launch_overhead_s per call
  double launch_overhead_s = kLaunchOverheadS;
  bool pipeline_term = true;         // zerosim's Ring/Simple slice latency (see above)
  bool nvls_enable = true;           // NCCL_NVLS_ENABLE
  std::optional<Algo> algo;          // NCCL_ALGO: only this algorithm
  std::optional<Proto> proto;        // NCCL_PROTO: only this protocol
};

// One of NCCL's graphs as its search would leave it: channels x per-channel GB/s.
struct GraphInfo {
  int n_channels = 0;
  double bw_intra = 0;  // GB/s per channel inside a node
  double bw_inter = 0;  // GB/s per channel across nodes
};

// A communicator as NCCL's tuner sees it.
struct CommInfo {
  std::vector<std::int32_t> ranks;
  std::vector<int> node_index;     // per rank: index of its NCCL node (NVLink domain), 0..n_nodes-1
  std::vector<int> node_first;     // per node: first position of the node in `ranks`
  int n_ranks = 0;
  int n_nodes = 0;
  int ppn = 0;                     // most ranks of the communicator on one NCCL node
  int nics = 0;                    // NICs local to the communicator's GPUs, per node (min)
  Arch arch = Arch::Hopper;
  Hw intra_hw = Hw::NvLink;
  bool nvls_support = false;
  double nvlink_total = 0;         // NCCL GB/s of one GPU's NVLinks (links x per-link bw)
  double inter_max_bw = 0;         // NCCL GB/s of one GPU->NIC path (min(NIC, PCIe))
  double latency_inter_us = 0;     // graph latencyInter: network latency beyond NCCL's 2.7 us
  GraphInfo ring, tree, nvls;
  int comm_channels = 0;           // channels the kernels run on (ring graph x2, <= MAXCHANNELS)
  int nvls_channels = 0;
  // NCCL keeps these as float; double here so the closed forms hold to rounding.
  double bandwidth[kNumFuncs][kNumAlgos][kNumProtos] = {};  // algorithm GB/s; 0 = not available
  double latency[kNumFuncs][kNumAlgos][kNumProtos] = {};    // us
  int max_threads[kNumAlgos][kNumProtos] = {};
  int thread_threshold[kNumAlgos][kNumProtos] = {};
};

// NCCL's choice for one call.
struct Choice {
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;
  int channels = 0;      // after NCCL's small-message trimming
  int threads = 0;
  double nccl_time_us = 0;  // NCCL's own estimate
};

struct Prediction {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Bytes bytes = 0;
  int n_ranks = 0;
  int n_nodes = 0;
  Version version = Version::V2_27;
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;
  bool p2p = false;          // send/recv and all-to-all: not NCCL's tuner (see nccl_model.cpp)
  int channels = 0;
  int threads = 0;
  double nccl_time_s = 0;    // NCCL's estimate (no launch, no pipeline term)
  double launch_s = 0;
  double latency_s = 0;      // NCCL's latency term (plateau included)
  double pipeline_s = 0;
  double bandwidth_s = 0;    // nBytes / bw, times fabric_factor
  double fabric_factor = 1;
  double seconds = 0;        // launch + latency + pipeline + bandwidth
  double algbw = 0;          // bytes / seconds (nccl-tests), bytes/s
  double busbw = 0;          // algbw * bus_factor (nccl-tests), bytes/s
  double alpha_s() const { return launch_s + latency_s + pipeline_s; }
};

// nccl-tests' bus-bandwidth factor: 2(n-1)/n all-reduce; (n-1)/n all-gather, reduce-scatter,
// all-to-all; 1 broadcast, reduce, send/recv.
double bus_factor(CollectiveKind kind, int n);
// CollectiveKind -> NCCL function; std::nullopt for SendRecv and AllToAll.
std::optional<Func> func_of(CollectiveKind kind);
// "all_reduce", "allreduce", "all-reduce" ... -> kind. Throws InputError(key_path).
CollectiveKind parse_collective(const std::string& text, const std::string& key_path);
const char* collective_cli_name(CollectiveKind kind);  // "all_reduce"
// "ring", "tree", "nvls", "nvls_tree", "pat" (+ "collnet..." rejected) / "ll", "ll128", "simple".
Algo parse_algo(const std::string& text, const std::string& key_path);
Proto parse_proto(const std::string& text, const std::string& key_path);
// GPU generation from the GPU name (V100/A100/H100/H200/B200...), else from its peak BF16.
Arch arch_of(const GpuSpec& gpu);

// NCCL's view of a communicator (see layer 1 above).
CommInfo build_comm(const ClusterSpec& cluster, std::span<const std::int32_t> ranks,
                    const Constants& k, const ModelOptions& options);
// ncclTopoGetAlgoTime; -1 when (algo, proto) is unavailable.
double nccl_time_us(const CommInfo& comm, const Constants& k, Func f, Algo a, Proto p,
                    Bytes bytes);
// getAlgoInfo: least NCCL time, then channel / thread trimming. Throws InputError("collective.algo")
// when the forced algorithm / protocol cannot run this collective.
Choice choose(const CommInfo& comm, const Constants& k, Func f, Bytes bytes);

// Caches one CommInfo per rank list: const methods fill the cache, so one model must not be
// shared between threads without a lock.
class NcclModel {
 public:
  // Throws InputError for an unparsable nccl_version.
  explicit NcclModel(ClusterSpec cluster, ModelOptions options = {});

  // zerosim's prediction, without a topology (fabric factor 1). n = ranks.size() >= 1; one rank
  // (or zero bytes) costs nothing. Throws std::invalid_argument for ranks outside the cluster.
  Prediction predict(CollectiveKind kind, Bytes bytes, std::span<const std::int32_t> ranks) const;

  // The communicator over `ranks`, cached by rank list.
  const CommInfo& comm(std::span<const std::int32_t> ranks) const;

  const ClusterSpec& cluster() const { return cluster_; }
  const ModelOptions& options() const { return options_; }
  const Constants& constants() const { return *k_; }

 private:
  Prediction predict_p2p(CollectiveKind kind, Bytes bytes, const CommInfo& comm) const;

  ClusterSpec cluster_;
  ModelOptions options_;
  const Constants* k_;
  mutable std::map<std::vector<std::int32_t>, CommInfo> cache_;
};

}  // namespace zerosim::nccl
