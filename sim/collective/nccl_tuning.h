#pragma once
// NCCL's tuner replayed (layer 1 of nccl_model.h, second half): ncclTopoTuneModel
// (src/graph/tuning.cc) turns the graphs of nccl_graph.h into a latency in us and an algorithm
// bandwidth in GB/s for every (collective, algorithm, protocol); nccl_time_us() is
// ncclTopoGetAlgoTime,
//     time = lat + nBytes / (1000 * bw)      (tree correction, ring "plateau" included)
// and choose() is getAlgoInfo/topoGetAlgoInfo: the (algorithm, protocol) of least time, then NCCL's
// channel and thread trimming for small messages. This is what NCCL believes; what zerosim
// predicts on top of it is in nccl_model.h. The numbers the formulas read: nccl_constants.h.
#include <cstdint>
#include <optional>
#include <span>

#include "sim/cluster/cluster.h"
#include "sim/collective/nccl_constants.h"
#include "sim/collective/nccl_graph.h"
#include "sim/core/plan.h"

namespace zerosim::nccl {

// NCCL's collective order (ncclFunc_t), the first index of its tuning tables.
enum class Func : std::uint8_t { Broadcast, Reduce, AllGather, ReduceScatter, AllReduce };
inline constexpr int kNumFuncs = 5;

enum class CpuVendor : std::uint8_t { Intel, Amd };

// What NCCL's choice depends on besides the hardware: its environment and the host CPU.
struct TunerOptions {
  CpuVendor cpu = CpuVendor::Intel;  // getNetOverhead and the multi-node LL cap depend on it
  bool nvls_enable = true;           // NCCL_NVLS_ENABLE
  std::optional<Algo> algo;          // NCCL_ALGO: only this algorithm
  std::optional<Proto> proto;        // NCCL_PROTO: only this protocol
};

// A communicator as NCCL's tuner sees it: its graphs and the tables ncclTopoTuneModel fills.
struct CommInfo : CommGraph {
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

// CollectiveKind -> NCCL function; std::nullopt for SendRecv and AllToAll.
std::optional<Func> func_of(CollectiveKind kind);

// NCCL's view of a communicator: search_graphs, then ncclTopoTuneModel. Throws as search_graphs.
CommInfo build_comm(const ClusterSpec& cluster, std::span<const std::int32_t> ranks,
                    const Constants& k, const TunerOptions& options);
// The two terms of ncclTopoGetAlgoTime in us (latency with the ring plateau, bytes over the
// tree-corrected bandwidth); false when (algo, proto) is unavailable.
bool nccl_terms(const CommInfo& comm, const Constants& k, Func f, Algo a, Proto p, Bytes bytes,
                double* lat_us, double* bw_us);
// ncclTopoGetAlgoTime; -1 when (algo, proto) is unavailable.
double nccl_time_us(const CommInfo& comm, const Constants& k, Func f, Algo a, Proto p,
                    Bytes bytes);
// getAlgoInfo: least NCCL time, then channel / thread trimming. Throws InputError("collective.algo")
// when the forced algorithm / protocol cannot run this collective.
Choice choose(const CommInfo& comm, const Constants& k, Func f, Bytes bytes);

}  // namespace zerosim::nccl
