#pragma once
// The template of one pipeline stage: the op sequence every rank of that stage runs (all its DP
// and TP ranks run the same one), and the Emitter that appends to it. The stage's parts (passes,
// ZeRO-3 fetches, gradient buckets, offload, optimizer step) emit through one Emitter, so ops get
// their ids in the order the stage runs them; rank_groups.cpp then copies the template to every
// rank of the stage and matches its collectives across ranks.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/plan.h"
#include "sim/parallel/training_plan.h"

namespace zerosim::plan_detail {

// Which group a template op's collective runs on, seen from the rank that runs it. Pipeline
// transfers are two-member "collectives" (send first, receive second) on the group of an ordered
// pair of adjacent stages. DpShard and DpReplica split a DP group of dp ranks into dp / k
// groups of k consecutive ranks (a node's share of the DP group, or a MiCS shard group) and k
// groups of the ranks at the same position in each (dp_subgroup_size gives k). Ep and Edp split
// it alike with k = parallel.ep: the expert-parallel groups (consecutive DP ranks, which exchange
// tokens) and the expert-data-parallel groups (the ranks holding the same experts, which reduce
// their gradients); with expert TP 1 and ep a multiple of tp (Scenario::experts_span_tp) an Ep
// group is ep / tp consecutive DP indices at every TP rank, and Edp splits by k = ep / tp. Cp: the cp consecutive ranks of the dp x cp group that share a sample
// (context parallelism, cp inner to dp as in Megatron's rank order); with hierarchical CP
// (a2a+p2p) Cp is its a2a level, consecutive ranks of those, and CpRing its p2p level, the ranks
// at the same place in each a2a group of a sample's cp ranks. With DualPipe's placements
// the second chunk runs from the last stage back to the first: its activations go to the previous
// stage (BackSendPrev, BackRecvNext) and its gradients to the next (BackSendNext, BackRecvPrev),
// on groups of their own, so that each group carries one chunk's transfers of one direction in
// micro-batch order. Mirror: DualPipe's stages s and pp - 1 - s, whose two copies of the same
// layers sum their gradients. EpNode and EpRail split an Ep group for the flex dispatcher: its
// ranks on one node, and its ranks at the same place on each of its nodes (one per node).
enum class Peer : std::uint8_t {
  Dp, Tp, SendNext, RecvPrev, SendPrev, RecvNext, DpShard, DpReplica, Ep, Edp, Cp,
  BackSendPrev, BackRecvNext, BackSendNext, BackRecvPrev, Mirror, EpNode, EpRail, CpRing
};
inline constexpr int kNumPeers = 19;

// Collectives are matched across ranks by (group, instance).
struct TemplateOp {
  OpKind kind = OpKind::Compute;
  Stream stream = Stream::Compute;
  Phase phase = Phase::Other;
  MemCategory category = MemCategory::Buffers;
  std::int32_t name = 0;
  std::int32_t work = -1;
  Bytes bytes = 0;
  std::uint32_t dep_begin = 0, dep_count = 0;
  Peer peer = Peer::Dp;
  std::int32_t instance = -1;
};

struct Template {
  std::vector<TemplateOp> ops;
  std::vector<std::int32_t> deps;
  // Kind and size of each collective instance, per peer.
  std::vector<std::pair<CollectiveKind, Bytes>> instances[kNumPeers];
};

// Op names are interned once for the whole plan; works are shared by every stage.
struct PlanTables {
  std::vector<std::string>& names;
  std::map<std::string, std::int32_t>& name_ids;
  std::vector<Work>& works;
  const std::int32_t* work_of;  // the Work of each layer-block kind and part (work_index)
  std::map<std::pair<std::int32_t, Bytes>, std::vector<Bytes>>& alloc_tensors;  // Plan's
};

constexpr int work_index(WorkKind k, BackwardPart part) {
  return static_cast<int>(k) * kNumBackwardParts + static_cast<int>(part);
}

// Appends ops to one stage's template. Dependencies given as -1 are dropped (an op that has no
// predecessor yet). A compute op also waits for what the host blocked on since the previous
// compute op (host_wait): a TP collective, a pipeline receive, a throttled gradient reduction.
class Emitter {
 public:
  explicit Emitter(PlanTables tables) : tables_(tables) {}

  std::int32_t add(TemplateOp op, const std::string& name, const std::vector<std::int32_t>& deps);
  // An op priced by a Work of its own (the optimizer step, host copies, host and quantization
  // kernels): appends the Work and the op. A copy's bytes are the Work's.
  std::int32_t work_op(OpKind kind, Work work, Stream stream, Phase phase, const std::string& name,
                       const std::vector<std::int32_t>& deps);
  std::int32_t alloc(MemCategory c, Bytes bytes, const std::string& name,
                     Stream stream = Stream::Compute, const std::vector<std::int32_t>& deps = {}) {
    return memory_op(OpKind::Alloc, c, bytes, name, stream, deps);
  }
  // An allocation made of several tensors, `tensors` their sizes (any unit: they are scaled to
  // sum to `bytes`), recorded for the caching allocator (Plan::alloc_tensors).
  std::int32_t alloc_tensors(MemCategory c, Bytes bytes, const std::string& name,
                             const std::vector<double>& tensors, Stream stream = Stream::Compute,
                             const std::vector<std::int32_t>& deps = {});
  std::int32_t free_op(MemCategory c, Bytes bytes, const std::string& name,
                       Stream stream = Stream::Compute, const std::vector<std::int32_t>& deps = {}) {
    return memory_op(OpKind::Free, c, bytes, name, stream, deps);
  }
  std::int32_t compute(WorkKind k, Phase phase, const std::string& name,
                       std::vector<std::int32_t> deps = {},
                       BackwardPart part = BackwardPart::Whole);
  std::int32_t collective(Peer peer, CollectiveKind k, Bytes bytes, Stream stream,
                          const std::string& name, const std::vector<std::int32_t>& deps = {});

  void host_wait(std::int32_t op) { host_waits_.push_back(op); }
  // The waits not yet taken by a compute op (the optimizer step takes them itself).
  std::vector<std::int32_t> take_host_waits() { return std::exchange(host_waits_, {}); }

  Template take() { return std::move(t_); }

 private:
  std::int32_t intern(const std::string& n);
  std::int32_t memory_op(OpKind kind, MemCategory c, Bytes bytes, const std::string& name,
                         Stream stream, const std::vector<std::int32_t>& deps);

  PlanTables tables_;
  Template t_;
  std::vector<std::int32_t> host_waits_;
};

}  // namespace zerosim::plan_detail
