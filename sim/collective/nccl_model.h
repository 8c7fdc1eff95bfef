#pragma once
// zerosim's prediction of an NCCL collective: NCCL's own cost model and algorithm choice, replayed
// for a communicator of the simulated cluster, plus the time the collective really takes.
//
// Two layers, kept apart on purpose:
//
// 1. NCCL's tuner (what NCCL believes), in two files. nccl_graph.h emulates NCCL's topology
//    search (src/graph/search.cc: channels x per-channel bandwidth for the ring, tree and NVLS
//    graphs, from NCCL's per-NVLink and per-NIC speeds); nccl_tuning.h replays ncclTopoTuneModel
//    (src/graph/tuning.cc: a latency in us and an algorithm bandwidth in GB/s for every
//    (collective, algorithm, protocol)), ncclTopoGetAlgoTime and getAlgoInfo (NCCL's choice, its
//    channels and threads). Constants: nccl_constants.h.
//
// 2. zerosim's prediction (what happens), here. Starting from NCCL's choice and its numbers:
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
#include <span>
#include <string>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/collective/nccl_tuning.h"
#include "sim/core/plan.h"
#include "sim/fitted/fitted_constants.h"

namespace zerosim::nccl {

// Per-call overhead of an un-graphed NCCL launch: a fitted constant, declared with its data in
// sim/fitted/fitted_constants.h (kNcclLaunchOverhead). See docs/NCCL_MODEL.md.
inline constexpr double kLaunchOverheadS = fitted::kNcclLaunchOverhead.value;

// NCCL's environment (TunerOptions: CPU, NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE) plus the release
// and zerosim's own terms.
struct ModelOptions : TunerOptions {
  std::string nccl_version;          // "" = the cluster's nccl_version
  bool launch_overhead = true;       // add launch_overhead_s per call
  double launch_overhead_s = kLaunchOverheadS;
  bool pipeline_term = true;         // zerosim's Ring/Simple slice latency (see above)
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
// "all_reduce", "allreduce", "all-reduce" ... -> kind. Throws InputError(key_path).
CollectiveKind parse_collective(const std::string& text, const std::string& key_path);
const char* collective_cli_name(CollectiveKind kind);  // "all_reduce"
// "ring", "tree", "nvls", "nvls_tree", "pat" (+ "collnet..." rejected) / "ll", "ll128", "simple".
Algo parse_algo(const std::string& text, const std::string& key_path);
Proto parse_proto(const std::string& text, const std::string& key_path);

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
