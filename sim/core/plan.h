#pragma once
// The plan: what happens on every rank, in which order, on which stream, after what. It holds no
// durations; the engine asks the cost models for those while it plays the plan.
//
// Storage is plain contiguous arrays indexed by 32-bit ids (ops, dependencies, collectives,
// groups) so that plans of millions of ops stay compact and the engine's hot loop touches no
// heap-allocated per-op objects.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/units.h"

namespace zerosim {

enum class OpKind : std::uint8_t { Compute, Collective, Copy, Alloc, Free };

// CUDA streams of one rank (plus the host CPU). Ops on one stream run one after another in plan
// order; ops on different streams of a rank run concurrently.
// Pipeline sends and receives get a stream each so that a send waiting for its peer never holds
// up a receive (Megatron batches them with batch_isend_irecv for the same reason).
// CpComm: context parallelism's ring exchange of keys and values, beside the attention it feeds.
// EpComm: Megatron-core's all-to-all stream of the combined 1F1B schedule (MoE exchanges).
// PpBackSend, PpBackRecv: the transfers of DualPipe's second chunk (which runs back), apart
// from the first chunk's: DualPipe posts each step's sends and receives as one batch, which one
// queue per direction for both chunks would serialise into a wait cycle.
// EpForward: the flex dispatcher's NVLink half (DeepEP forwards what arrives over the network to
// the node's ranks while more arrives), beside the network half on the exchange's own stream.
enum class Stream : std::uint8_t {
  Compute, DpComm, TpComm, PpComm, PpRecv, H2D, D2H, Cpu, CpComm, EpComm, PpBackSend, PpBackRecv,
  EpForward
};
inline constexpr int kNumStreams = 13;
const char* stream_name(Stream s);

// Collective kinds as NCCL names them; SendRecv is a point-to-point transfer whose two member ops
// are the send (first member) and the receive.
enum class CollectiveKind : std::uint8_t {
  AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv
};
const char* collective_name(CollectiveKind k);

// What part of the step an op belongs to, for the report's breakdown.
enum class Phase : std::uint8_t { Forward, Backward, Optimizer, Communication, Other };
const char* phase_name(Phase p);

// Memory categories of the report.
enum class MemCategory : std::uint8_t { Params, Grads, OptimizerStates, Activations, Buffers };
inline constexpr int kNumMemCategories = 5;
const char* mem_category_name(MemCategory c);

using OpId = std::uint32_t;
inline constexpr OpId kNoOp = 0xFFFFFFFFu;

struct Op {
  OpKind kind = OpKind::Compute;
  Stream stream = Stream::Compute;
  Phase phase = Phase::Other;
  MemCategory category = MemCategory::Buffers;  // Alloc / Free only
  std::int32_t rank = 0;
  std::int32_t name = 0;      // index into Plan::names
  std::int32_t work = -1;     // Compute/Copy: the cost model's work id; Collective: collective id
  Bytes bytes = 0;            // Alloc/Free: size; Collective: this rank's buffer; Copy: bytes
  std::uint32_t dep_begin = 0;  // explicit dependencies in Plan::deps[dep_begin, +dep_count)
  std::uint32_t dep_count = 0;
};

// One collective (or send/recv) across the ranks of a group: it starts when every member op has
// been reached (all its dependencies done), and all member ops finish together.
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::int32_t group = 0;          // index into the plan's groups
  Bytes bytes = 0;                 // NCCL's count x element size (the per-rank buffer size)
  std::uint32_t member_begin = 0;  // member op ids in Plan::members[member_begin, +member_count)
  std::uint32_t member_count = 0;
};

struct Plan {
  int num_ranks = 0;
  std::vector<Op> ops;
  std::vector<OpId> deps;
  std::vector<Collective> collectives;
  std::vector<OpId> members;
  // Groups of ranks as CSR: group g holds group_ranks[group_begin[g], group_begin[g+1]).
  std::vector<std::uint32_t> group_begin{0};
  std::vector<std::int32_t> group_ranks;
  std::vector<std::string> group_names;
  std::vector<std::string> names;  // op names, interned
  // Allocations of several tensors (a layer's activations), by the Alloc op's name and bytes:
  // the tensors' sizes, which the caching allocator places one by one (sim/memory); an Alloc
  // not listed is one tensor.
  std::map<std::pair<std::int32_t, Bytes>, std::vector<Bytes>> alloc_tensors;

  // Symmetry folding: a plan may hold only one data-parallel replica when the others would run
  // exactly the same (homogeneous cluster, no contention). Then real_rank maps a plan rank to
  // the cluster rank it stands for, and a group's cost_ranks are the cluster ranks its
  // collectives really span (CSR like the groups). Both are empty for an unfolded plan.
  std::vector<std::int32_t> real_rank;
  std::vector<std::uint32_t> cost_begin;
  std::vector<std::int32_t> cost_ranks;

  int num_groups() const { return static_cast<int>(group_names.size()); }
  int group_size(int g) const { return static_cast<int>(group_begin[g + 1] - group_begin[g]); }
  const std::int32_t* group_members(int g) const { return group_ranks.data() + group_begin[g]; }
  bool folded() const { return !cost_begin.empty(); }
  // The cluster ranks a collective of group g spans (its members unless folded).
  int cost_size(int g) const {
    return folded() ? static_cast<int>(cost_begin[g + 1] - cost_begin[g]) : group_size(g);
  }
  const std::int32_t* cost_members(int g) const {
    return folded() ? cost_ranks.data() + cost_begin[g] : group_members(g);
  }
};

}  // namespace zerosim
