#include "sim/parallel/training_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>

#include "sim/memory/memory_constants.h"

namespace zerosim {

const char* group_kind_name(GroupKind k) {
  return k == GroupKind::Dp ? "dp" : k == GroupKind::Tp ? "tp" : "pp";
}

double ring_bytes_sent(CollectiveKind kind, int n, Bytes bytes) {
  if (n <= 1) return 0;
  const double b = static_cast<double>(bytes);
  const double share = static_cast<double>(n - 1) / n;
  switch (kind) {
    case CollectiveKind::AllReduce: return 2 * share * b;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll: return share * b;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce: return b;  // pipelined ring: every rank but one forwards it all
    case CollectiveKind::SendRecv: return b;
  }
  return 0;
}

int dp_subgroup_size(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  if (z.mics_shard_size > 0) return z.mics_shard_size;
  if (z.hpz_partition_size > 1) return z.hpz_partition_size;
  if (z.quantized_gradients) {
    // qgZ's first all-to-all stays inside the node: the DP ranks a node holds.
    const int per_node = std::max(1, s.cluster.gpus_per_node / (s.parallel.tp * s.parallel.cp));
    return std::min(s.parallel.dp, per_node);
  }
  return 1;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Which group a template op's collective runs on, seen from the rank that runs it. Pipeline
// transfers are two-member "collectives" (send first, receive second) on the group of an ordered
// pair of adjacent stages. DpShard and DpReplica split a DP group of dp ranks into dp / k
// groups of k consecutive ranks (a node's share of the DP group, or a MiCS shard group) and k
// groups of the ranks at the same position in each (dp_subgroup_size gives k).
enum class Peer : std::uint8_t { Dp, Tp, SendNext, RecvPrev, SendPrev, RecvNext, DpShard, DpReplica };
constexpr int kNumPeers = 8;

// A template op: what every rank of one pipeline stage runs (all DP and TP ranks of a stage run
// the same sequence). Collectives are matched across ranks by (group, instance).
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

// A parameter unit: what one ZeRO-3 fetch gathers and one backward hook hands to the gradient
// buckets. Units are the embedding, each layer's attention block and MLP block, and the head.
struct Unit {
  WorkKind forward, backward;
  int layer = -1;
  std::int64_t params = 0;
  std::string label;
  // Parameter tensors: weights (and tables) large enough to be partitioned, and the small ones
  // (biases, norms). Only the per-parameter stage-3 schedule of DeepSpeed 0.3-0.5 uses them.
  int big_tensors = 1, small_tensors = 0;
};

// When data-parallel gradient reduction runs, per framework (see the README).
enum class ReduceWhen {
  EveryBackward,   // DeepSpeed ZeRO-2/3 hooks, FSDP: each micro-batch's backward
  LastBackward,    // DDP (stage 0) and DeepSpeed ZeRO-1 with overlap_comm: hooks, last micro-batch
  AfterBackward,   // after the last backward (pipeline flush): Megatron, nanotron, DeepSpeed's
                   // pipeline engine and ZeRO-1 without overlap_comm
};

// Builds the template of one pipeline stage.
class StageBuilder {
 public:
  StageBuilder(const Scenario& s, int stage, std::vector<std::vector<Unit>> chunks,
               std::vector<std::string>& names, std::map<std::string, std::int32_t>& name_ids,
               const std::int32_t* work_of, std::vector<Work>& works)
      : s_(s), stage_(stage), chunks_(std::move(chunks)), names_(names), name_ids_(name_ids),
        work_of_(work_of), works_(works) {}

  Template build(StagePlan& info);

 private:
  // ---- emitting template ops -----------------------------------------------------------------
  std::int32_t intern(const std::string& n) {
    auto [it, inserted] = name_ids_.emplace(n, static_cast<std::int32_t>(names_.size()));
    if (inserted) names_.push_back(n);
    return it->second;
  }
  std::int32_t add(TemplateOp op, const std::string& name, const std::vector<std::int32_t>& d) {
    op.name = intern(name);
    op.dep_begin = static_cast<std::uint32_t>(t_.deps.size());
    for (std::int32_t x : d) {
      if (x >= 0) t_.deps.push_back(x);
    }
    op.dep_count = static_cast<std::uint32_t>(t_.deps.size()) - op.dep_begin;
    t_.ops.push_back(op);
    return static_cast<std::int32_t>(t_.ops.size() - 1);
  }
  // An op priced by a Work of its own (the optimizer step, host copies, host and quantization
  // kernels): appends the Work and the op. A copy's bytes are the Work's.
  std::int32_t work_op(OpKind kind, Work work, Stream stream, Phase phase, const std::string& name,
                       const std::vector<std::int32_t>& deps) {
    TemplateOp op;
    op.kind = kind;
    op.stream = stream;
    op.phase = phase;
    op.work = static_cast<std::int32_t>(works_.size());
    if (kind == OpKind::Copy) op.bytes = work.elements;
    works_.push_back(work);
    return add(op, name, deps);
  }
  std::int32_t alloc(MemCategory c, Bytes bytes, const std::string& name,
                     Stream stream = Stream::Compute, std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Alloc;
    op.stream = stream;
    op.category = c;
    op.bytes = bytes;
    return add(op, "alloc " + name, deps);
  }
  std::int32_t free_op(MemCategory c, Bytes bytes, const std::string& name,
                       Stream stream = Stream::Compute, std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Free;
    op.stream = stream;
    op.category = c;
    op.bytes = bytes;
    return add(op, "free " + name, deps);
  }
  // A compute op also waits for what the host blocked on since the previous one.
  std::int32_t compute(WorkKind k, Phase phase, const std::string& name,
                       std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Compute;
    op.phase = phase;
    op.work = work_of_[static_cast<int>(k)];
    deps.insert(deps.end(), host_waits_.begin(), host_waits_.end());
    host_waits_.clear();
    return add(op, name, deps);
  }
  std::int32_t collective(Peer peer, CollectiveKind k, Bytes bytes, Stream stream,
                          const std::string& name, std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Collective;
    op.stream = stream;
    op.phase = Phase::Communication;
    op.bytes = bytes;
    op.peer = peer;
    auto& list = t_.instances[static_cast<int>(peer)];
    op.instance = static_cast<std::int32_t>(list.size());
    list.push_back({k, bytes});
    return add(op, name, deps);
  }
  static std::string unit_name(const Unit& u, const char* pass) {
    return u.layer >= 0 ? std::string(pass) + " " + u.label + " L" + std::to_string(u.layer)
                        : std::string(pass) + " " + u.label;
  }
  std::string pass_suffix(int mb, int chunk) const {
    std::string s = " mb" + std::to_string(mb);
    if (chunks_.size() > 1) s += " c" + std::to_string(chunk);
    return s;
  }

  // ---- schedule --------------------------------------------------------------------------------
  struct Step {
    bool forward;
    int mb, chunk;
  };
  std::vector<Step> schedule() const;
  void forward_pass(int mb, int chunk);
  void backward_pass(int mb, int chunk, bool last_of_chunk, bool last_of_step);
  void tp_collectives(std::int32_t after, const std::string& what);

  // ---- ZeRO-3 residency ------------------------------------------------------------------------
  void plan_stage3(int chunk);
  void issue_fetches(int chunk, std::size_t use, std::int32_t hook_after);

  // ---- gradients -------------------------------------------------------------------------------
  ReduceWhen reduce_when() const;
  Stream reduction_stream() const;
  std::int64_t bucket_limit() const;
  CollectiveKind reduction_kind(std::string& what) const;
  void hook_setup(bool first_backward);
  void grad_ready(std::int64_t params, std::int32_t produced_by);
  void flush(std::int32_t produced_by);
  void flush_elements(std::int64_t elements, std::int32_t produced_by);
  void epilogue(std::int32_t last_backward, bool last_of_step);
  std::int32_t reduce_bucket(CollectiveKind kind, std::int64_t elements, Stream stream,
                             const std::string& name, std::vector<std::int32_t> deps);
  Bytes grad_bytes_per_element() const;

  void optimizer_step();
  void offloaded_step(std::int64_t elements, const std::vector<std::int32_t>& after);
  void parameter_gather(std::int32_t after, Stream stream);

  const Scenario& s_;
  const int stage_;
  std::vector<std::vector<Unit>> chunks_;
  std::vector<std::string>& names_;
  std::map<std::string, std::int32_t>& name_ids_;
  const std::int32_t* work_of_;
  std::vector<Work>& works_;
  Template t_;
  StagePlan* info_ = nullptr;

  double activation_layer_ = 0, activation_layer_full_ = 0;
  Bytes logits_bytes_ = 0, tp_activation_bytes_ = 0, p2p_bytes_ = 0;
  std::vector<std::int32_t> host_waits_;
  std::int32_t last_compute_ = -1;

  // ZeRO-3, per chunk: the fetch trace of a forward and backward pass of that chunk.
  struct Residency {
    std::vector<bool> persistent, keep_after_forward, needs_fetch;
    std::vector<std::pair<int, bool>> trace;  // (unit, backward)
    std::vector<int> issue_at;
  };
  std::vector<Residency> residency_;
  // Fetches of the current pass; a pass's backward may use gathers its forward prefetched.
  std::vector<std::int32_t> fetch_op_;
  std::map<std::pair<int, int>, std::vector<std::int32_t>> pending_fetches_;  // (mb, chunk)
  std::vector<int> backwards_done_;  // per chunk, in this step

  // Gradient buckets.
  std::int64_t bucket_elements_ = 0;
  int bucket_count_ = 0;
  std::int32_t last_reduction_ = -1, prev_reduction_ = -1, older_reduction_ = -1;
  std::int32_t final_reduction_ = -1;
  bool ipg_allocated_ = false, partition_temp_ = false;
  Bytes ipg_bytes_ = 0;

  // ---- offload (ZeRO-Offload / ZeRO-Infinity) ---------------------------------------------------
  bool offload_optimizer() const { return s_.zero.offload_optimizer != OffloadDevice::None; }
  bool offload_param() const { return s_.zero.offload_param != OffloadDevice::None; }
  std::int32_t host_copy(WorkKind k, Bytes bytes, Stream stream, const std::string& name,
                         std::vector<std::int32_t> deps);
  void offload_gradients(std::int64_t elements, std::int32_t reduction);
  void offload_memory(StagePlan& info) const;
  std::int32_t last_grad_copy_ = -1;

  // ---- DP sub-groups (MiCS / HYBRID_SHARD, ZeRO++ hpZ and qgZ) -----------------------------------
  std::int32_t quantize_op(Bytes bytes, Stream stream, const std::string& name,
                           std::vector<std::int32_t> deps);
  static constexpr std::int64_t kQwzGroup = 8000;  // elements per fp32 scale (CUDAQuantizer)
  int dp_subgroup_ = 1;
  struct ParamBucket {
    std::size_t first_unit;
    std::int64_t elements;
  };
  // Megatron's parameter buckets of a chunk in forward order.
  std::vector<ParamBucket> param_buckets(int chunk) const;
  std::int32_t overlapped_param_gather(int chunk, const std::vector<ParamBucket>& buckets,
                                       std::size_t u, std::int32_t current);
  std::int32_t next_param_gather_ = -1;
  std::int32_t host_list_op(const std::string& name, std::vector<std::int32_t> deps);
  std::int32_t per_parameter_gather(const Unit& u, bool backward, std::int32_t after);
  void per_parameter_reduce(const Unit& u, std::int32_t produced_by);
  bool first_forward_ = false;   // the forward being emitted is its chunk's first in the step
  std::vector<int> forwards_done_;  // per chunk
  bool accumulating_ = false;  // the backward being emitted is not its chunk's first this step
};

class PlanBuilder {
 public:
  PlanBuilder(const Scenario& s, TrainingPlan& out, bool fold)
      : s_(s), out_(out), fold_(fold) {}

  void build() {
    const ParallelConfig& par = s_.parallel;
    const int p = par.pp, v = par.virtual_stages;
    for (auto k : {WorkKind::EmbedForward, WorkKind::EmbedBackward, WorkKind::AttentionForward,
                   WorkKind::AttentionBackward, WorkKind::MlpForward, WorkKind::MlpBackward,
                   WorkKind::HeadForward, WorkKind::HeadBackward}) {
      work_of_[static_cast<int>(k)] = static_cast<std::int32_t>(out_.works.size());
      out_.works.push_back({k, 0});
    }
    // Virtual stage g = chunk * p + stage holds an even share of the layers (the first ones get
    // the remainder); the embedding rides with virtual stage 0 and the head with the last.
    const ModelSpec& m = s_.model;
    const ParamCounts pc = count_params(m);
    const std::int64_t tp = par.tp;
    auto shard = [&](std::int64_t total, std::int64_t replicated) {
      return ceil_div(total - replicated, tp) + replicated;
    };
    // Megatron replicates over TP what it does not split: norms, the biases of row-parallel
    // linears (attention output, MLP down) and the learned position table.
    const std::int64_t row_bias = m.linear_bias ? m.hidden_size : 0;
    const std::int64_t position_table =
        m.position == PositionKind::Learned ? m.max_position_embeddings * m.hidden_size : 0;
    const std::int64_t embedding_norm = pc.embedding - m.vocab_size * m.hidden_size - position_table;
    const int virtual_stages = p * v;
    std::vector<std::vector<Unit>> per_virtual(virtual_stages);
    // Tensor counts: fused QKV and the attention output (Megatron's and GPT-2's layout); two MLP
    // weights, three with SwiGLU; a bias per linear when the model has them; LayerNorm has a
    // weight and a bias, RMSNorm a weight.
    const int norm_tensors = m.norm == NormKind::LayerNorm ? 2 : 1;
    const int biases = m.linear_bias ? 1 : 0;
    const int mlp_weights = m.mlp == MlpKind::Swiglu ? 3 : 2;
    per_virtual[0].push_back({WorkKind::EmbedForward, WorkKind::EmbedBackward, -1,
                              shard(pc.embedding, position_table + embedding_norm), "embedding",
                              position_table > 0 ? 2 : 1, embedding_norm > 0 ? norm_tensors : 0});
    int layer = 0;
    for (int g = 0; g < virtual_stages; ++g) {
      int count = static_cast<int>(m.num_layers / virtual_stages) +
                  (g < m.num_layers % virtual_stages ? 1 : 0);
      for (int i = 0; i < count; ++i, ++layer) {
        per_virtual[g].push_back({WorkKind::AttentionForward, WorkKind::AttentionBackward, layer,
                                  shard(pc.attention_block, pc.attention_norm + row_bias),
                                  "attention", 2, 2 * biases + norm_tensors});
        per_virtual[g].push_back({WorkKind::MlpForward, WorkKind::MlpBackward, layer,
                                  shard(pc.mlp_block, pc.mlp_norm + row_bias), "mlp", mlp_weights,
                                  mlp_weights * biases + norm_tensors});
      }
    }
    // With pipeline parallelism a tied embedding is held twice: the last stage keeps its own
    // copy for the output layer (Megatron's word-embedding copy on the last stage).
    std::int64_t head = shard(pc.output, 0) + pc.final_norm;
    if (m.tied_embeddings && p > 1) head += shard(m.vocab_size * m.hidden_size, 0);
    per_virtual[virtual_stages - 1].push_back(
        {WorkKind::HeadForward, WorkKind::HeadBackward, -1, head, "head",
         head > pc.final_norm ? 1 : 0, norm_tensors});

    out_.stages.resize(p);
    templates_.resize(p);
    for (int st = 0; st < p; ++st) {
      std::vector<std::vector<Unit>> chunks;
      for (int c = 0; c < v; ++c) chunks.push_back(per_virtual[c * p + st]);
      StageBuilder b(s_, st, std::move(chunks), out_.plan.names, name_ids_, work_of_, out_.works);
      templates_[st] = b.build(out_.stages[st]);
    }
    instantiate();
  }

 private:
  int rank_of(int stage, int dp_idx, int tp_idx) const {
    return (stage * dp_ + dp_idx) * s_.parallel.tp + tp_idx;
  }
  // The cluster rank of (stage, dp index, tp index), folded or not.
  int real_rank_of(int stage, int dp_idx, int tp_idx) const {
    return (stage * s_.parallel.dp + dp_idx) * s_.parallel.tp + tp_idx;
  }

  // Megatron's rank order: tensor-parallel ranks adjacent (inside a node), then data, then
  // pipeline. Groups: DP per (stage, tp index), TP per (stage, dp index), and for each ordered
  // pair of adjacent stages and each (dp, tp) index a two-rank pipeline group.
  void instantiate() {
    const int tp = s_.parallel.tp, p = s_.parallel.pp;
    dp_ = fold_ ? 1 : s_.parallel.dp;
    Plan& plan = out_.plan;
    plan.num_ranks = tp * dp_ * p;
    out_.stage_of_rank.resize(plan.num_ranks);
    if (fold_) {
      plan.real_rank.resize(plan.num_ranks);
      for (int st = 0; st < p; ++st) {
        for (int t = 0; t < tp; ++t) plan.real_rank[rank_of(st, 0, t)] = real_rank_of(st, 0, t);
      }
      plan.cost_begin.push_back(0);
    }
    // The cluster ranks a group stands for: with folding, a DP group of one member stands for
    // the DP indices `folded_dp` (all of them for the whole DP group; the first shard or the
    // first replica group for the sub-groups); other groups map member by member.
    const int dp_all = s_.parallel.dp, k = dp_subgroup_size(s_);
    std::vector<int> every_dp, first_shard, first_replica;
    for (int d = 0; d < dp_all; ++d) every_dp.push_back(d);
    for (int d = 0; d < k; ++d) first_shard.push_back(d);
    for (int d = 0; d < dp_all; d += k) first_replica.push_back(d);
    auto add_cost = [&](const std::vector<std::int32_t>& ranks, GroupKind kind,
                        const std::vector<int>& folded_dp) {
      if (!fold_) return;
      if (kind == GroupKind::Dp) {
        const int first = plan.real_rank[ranks[0]];
        const int st = first / (tp * s_.parallel.dp), t = first % tp;
        for (int d : folded_dp) plan.cost_ranks.push_back(real_rank_of(st, d, t));
      } else {
        for (std::int32_t r : ranks) plan.cost_ranks.push_back(plan.real_rank[r]);
      }
      plan.cost_begin.push_back(static_cast<std::uint32_t>(plan.cost_ranks.size()));
    };
    auto add_group = [&](const std::vector<std::int32_t>& ranks, const std::string& name,
                         GroupKind kind, const std::vector<int>& folded_dp = {}) {
      add_cost(ranks, kind, folded_dp.empty() ? every_dp : folded_dp);
      plan.group_ranks.insert(plan.group_ranks.end(), ranks.begin(), ranks.end());
      plan.group_begin.push_back(static_cast<std::uint32_t>(plan.group_ranks.size()));
      plan.group_names.push_back(name);
      out_.group_kind.push_back(kind);
      return plan.num_groups() - 1;
    };
    // group_of[rank][peer]: the group a rank's ops of that peer kind run on; position in it.
    std::vector<std::array<int, kNumPeers>> group_of(plan.num_ranks);
    std::vector<std::array<int, kNumPeers>> position(plan.num_ranks);
    for (auto& g : group_of) g.fill(-1);
    for (int st = 0; st < p; ++st) {
      for (int t = 0; t < tp; ++t) {
        std::vector<std::int32_t> ranks;
        for (int d = 0; d < dp_; ++d) ranks.push_back(rank_of(st, d, t));
        int g = add_group(ranks, "dp s" + std::to_string(st) + " t" + std::to_string(t),
                          GroupKind::Dp);
        for (int d = 0; d < dp_; ++d) {
          group_of[rank_of(st, d, t)][static_cast<int>(Peer::Dp)] = g;
          position[rank_of(st, d, t)][static_cast<int>(Peer::Dp)] = d;
        }
        if (k <= 1) continue;
        // Shard groups: k consecutive DP ranks; replica groups: one rank of each shard group.
        // Folded, the one DP member stands for the first of each.
        const int shard = fold_ ? 1 : k, replicas = fold_ ? 1 : dp_all / k;
        const std::string where = " s" + std::to_string(st) + " t" + std::to_string(t);
        for (int j = 0; j < (fold_ ? 1 : dp_all / k); ++j) {
          std::vector<std::int32_t> members;
          for (int i = 0; i < shard; ++i) members.push_back(rank_of(st, j * k + i, t));
          int sg = add_group(members, "dp-shard" + std::to_string(j) + where, GroupKind::Dp,
                             first_shard);
          for (int i = 0; i < shard; ++i) {
            group_of[members[i]][static_cast<int>(Peer::DpShard)] = sg;
            position[members[i]][static_cast<int>(Peer::DpShard)] = i;
          }
        }
        for (int i = 0; i < shard; ++i) {
          std::vector<std::int32_t> members;
          for (int j = 0; j < replicas; ++j) members.push_back(rank_of(st, j * k + i, t));
          int rg = add_group(members, "dp-replica" + std::to_string(i) + where, GroupKind::Dp,
                             first_replica);
          for (int j = 0; j < replicas; ++j) {
            group_of[members[j]][static_cast<int>(Peer::DpReplica)] = rg;
            position[members[j]][static_cast<int>(Peer::DpReplica)] = j;
          }
        }
      }
      for (int d = 0; d < dp_; ++d) {
        std::vector<std::int32_t> ranks;
        for (int t = 0; t < tp; ++t) ranks.push_back(rank_of(st, d, t));
        int g = add_group(ranks, "tp s" + std::to_string(st) + " d" + std::to_string(d),
                          GroupKind::Tp);
        for (int t = 0; t < tp; ++t) {
          group_of[rank_of(st, d, t)][static_cast<int>(Peer::Tp)] = g;
          position[rank_of(st, d, t)][static_cast<int>(Peer::Tp)] = t;
        }
      }
    }
    const bool wrap = s_.parallel.virtual_stages > 1;
    for (int st = 0; st < p; ++st) {
      const int next = (st + 1) % p;
      if (p == 1 || (next == 0 && !wrap)) continue;
      for (int d = 0; d < dp_; ++d) {
        for (int t = 0; t < tp; ++t) {
          const int a = rank_of(st, d, t), b = rank_of(next, d, t);
          int fwd = add_group({a, b}, "pp s" + std::to_string(st) + "->s" + std::to_string(next),
                              GroupKind::Pp);
          group_of[a][static_cast<int>(Peer::SendNext)] = fwd;
          position[a][static_cast<int>(Peer::SendNext)] = 0;
          group_of[b][static_cast<int>(Peer::RecvPrev)] = fwd;
          position[b][static_cast<int>(Peer::RecvPrev)] = 1;
          int bwd = add_group({b, a}, "pp s" + std::to_string(next) + "->s" + std::to_string(st),
                              GroupKind::Pp);
          group_of[b][static_cast<int>(Peer::SendPrev)] = bwd;
          position[b][static_cast<int>(Peer::SendPrev)] = 0;
          group_of[a][static_cast<int>(Peer::RecvNext)] = bwd;
          position[a][static_cast<int>(Peer::RecvNext)] = 1;
        }
      }
    }
    // One collective per (group, instance); its kind and size come from the template of a
    // member's stage (both members of a pipeline group must agree on the count).
    std::vector<std::uint32_t> coll_base(plan.num_groups(), 0);
    std::vector<bool> created(plan.num_groups(), false);
    for (int r = 0; r < plan.num_ranks; ++r) {
      const Template& t = templates_[r / (tp * dp_)];
      for (int peer = 0; peer < kNumPeers; ++peer) {
        int g = group_of[r][peer];
        if (g < 0) continue;
        const auto& inst = t.instances[peer];
        if (created[g]) continue;
        created[g] = true;
        coll_base[g] = static_cast<std::uint32_t>(plan.collectives.size());
        for (const auto& [kind, bytes] : inst) {
          Collective c;
          c.kind = kind;
          c.bytes = bytes;
          c.group = g;
          c.member_count = static_cast<std::uint32_t>(plan.group_size(g));
          c.member_begin = static_cast<std::uint32_t>(plan.members.size());
          plan.members.resize(plan.members.size() + c.member_count, kNoOp);
          plan.collectives.push_back(c);
        }
      }
    }
    std::vector<std::uint32_t> coll_count(plan.num_groups(), 0);
    for (std::size_t c = 0; c < plan.collectives.size(); ++c) ++coll_count[plan.collectives[c].group];
    std::size_t total = 0;
    for (const Template& t : templates_) total += t.ops.size() * static_cast<std::size_t>(tp * dp_);
    plan.ops.reserve(total);
    for (int r = 0; r < plan.num_ranks; ++r) {
      const int st = r / (tp * dp_);
      out_.stage_of_rank[r] = st;
      const Template& t = templates_[st];
      const OpId base = static_cast<OpId>(plan.ops.size());
      for (const TemplateOp& top : t.ops) {
        Op op;
        op.kind = top.kind;
        op.stream = top.stream;
        op.phase = top.phase;
        op.category = top.category;
        op.rank = r;
        op.name = top.name;
        op.work = top.work;
        op.bytes = top.bytes;
        op.dep_begin = static_cast<std::uint32_t>(plan.deps.size());
        op.dep_count = top.dep_count;
        for (std::uint32_t i = 0; i < top.dep_count; ++i) {
          plan.deps.push_back(base + static_cast<OpId>(t.deps[top.dep_begin + i]));
        }
        if (top.kind == OpKind::Collective) {
          const int peer = static_cast<int>(top.peer);
          const int g = group_of[r][peer];
          if (static_cast<std::uint32_t>(top.instance) >= coll_count[g]) {
            throw std::logic_error("pipeline stages disagree on the transfers of group " +
                                   plan.group_names[g]);
          }
          const std::uint32_t c = coll_base[g] + static_cast<std::uint32_t>(top.instance);
          op.work = static_cast<std::int32_t>(c);
          plan.members[plan.collectives[c].member_begin + position[r][peer]] =
              static_cast<OpId>(plan.ops.size());
        }
        plan.ops.push_back(op);
      }
    }
    for (OpId m : plan.members) {
      if (m == kNoOp) throw std::logic_error("a collective has a member that never joins");
    }
  }

  const Scenario& s_;
  TrainingPlan& out_;
  bool fold_;
  int dp_ = 1;
  std::map<std::string, std::int32_t> name_ids_;
  std::int32_t work_of_[9] = {};
  std::vector<Template> templates_;
};

// ---- StageBuilder -----------------------------------------------------------------------------

Template StageBuilder::build(StagePlan& info) {
  info_ = &info;
  const ModelSpec& m = s_.model;
  const std::int64_t tp = s_.parallel.tp;
  std::int64_t phi = 0;
  for (const auto& chunk : chunks_) {
    for (const Unit& u : chunk) {
      phi += u.params;
      if (u.forward == WorkKind::AttentionForward) ++info.layers;
    }
  }
  info.local_params = phi;
  dp_subgroup_ = dp_subgroup_size(s_);
  // MiCS / HYBRID_SHARD partition the model states over the shard group only.
  info.dp_partition = ceil_div(phi, s_.zero.mics_shard_size > 0 ? dp_subgroup_ : s_.parallel.dp);
  // ZeRO paper, section 5: 2 bytes of 16-bit parameters, 2 of 16-bit gradients and K = 12 of
  // fp32 master weights and Adam moments per parameter, partitioned by stage.
  const int zs = s_.zero.stage;
  info.model_states.params = 2 * (zs == 3 ? info.dp_partition : phi);
  info.model_states.grads = grad_bytes_per_element() * (zs >= 2 ? info.dp_partition : phi);
  info.model_states.optimizer_states = 12 * (zs >= 1 ? info.dp_partition : phi);
  // ZeRO-Offload moves the fp32 master weights, the Adam moments and (stages 2/3) the gradient
  // partition to the host; offload_param moves the stage-3 16-bit partition there too.
  if (offload_optimizer()) {
    info.model_states.optimizer_states = 0;
    if (zs >= 2) info.model_states.grads = 0;
  }
  if (offload_param()) info.model_states.params = 0;
  offload_memory(info);

  activation_layer_ = activation_bytes_per_layer(m, s_.training.micro_batch_size, tp,
                                                 s_.parallel.sequence_parallel,
                                                 s_.parallel.recompute, s_.training.flash_attention);
  activation_layer_full_ = activation_bytes_per_layer(m, s_.training.micro_batch_size, tp,
                                                      s_.parallel.sequence_parallel, Recompute::None,
                                                      s_.training.flash_attention);
  const double sb = static_cast<double>(s_.training.micro_batch_size) * m.seq_length;
  // Logits in 16 bits and their fp32 copy for the cross-entropy (Korthikanti et al. 2022, §4.3
  // counts the fp32 copy as 4sbv/t), vocab-parallel over TP.
  logits_bytes_ = static_cast<Bytes>(6.0 * sb * m.vocab_size / tp);
  tp_activation_bytes_ = static_cast<Bytes>(2.0 * sb * m.hidden_size);
  // Between pipeline stages: the s x b x h activation in 16 bits, split by TP with sequence
  // parallelism (Megatron's scatter-gather optimisation does the same without it).
  p2p_bytes_ = static_cast<Bytes>(2.0 * sb * m.hidden_size /
                                  (s_.parallel.sequence_parallel ? tp : 1));

  alloc(MemCategory::Params, info.model_states.params, "params");
  alloc(MemCategory::Grads, info.model_states.grads, "grads");
  alloc(MemCategory::OptimizerStates, info.model_states.optimizer_states, "optimizer_states");
  alloc(MemCategory::Buffers, kCudaContextBytes, "cuda_context");
  if (zs == 0 && reduce_when() == ReduceWhen::LastBackward) {
    // PyTorch DDP keeps its own bucket buffers beside param.grad (gradient_as_bucket_view
    // defaults to False): a second 16-bit copy of every gradient.
    alloc(MemCategory::Buffers, 2 * phi, "ddp_buckets");
  }
  if (zs == 3 && s_.zero.contiguous_gradients) {
    alloc(MemCategory::Buffers, 2 * s_.zero.reduce_bucket_size, "ipg_buffer");
  }
  backwards_done_.assign(chunks_.size(), 0);
  forwards_done_.assign(chunks_.size(), 0);
  if (zs == 3) {
    residency_.resize(chunks_.size());
    Bytes persistent = 0;
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      plan_stage3(static_cast<int>(c));
      for (std::size_t u = 0; u < chunks_[c].size(); ++u) {
        if (residency_[c].persistent[u]) persistent += 2 * chunks_[c][u].params;
      }
    }
    // Persistent parameters stay gathered: a full 16-bit copy beside the partition.
    if (persistent > 0) alloc(MemCategory::Buffers, persistent, "persistent params");
    if (s_.zero.hpz_partition_size > 1 && s_.zero.mics_shard_size <= 0) {
      // hpZ's secondary partition: 1/k of every partitioned parameter in 16 bits, from its first
      // gather until the optimizer step (ZeRO++ §3.2's memory cost).
      Bytes secondary = 0;
      for (std::size_t c = 0; c < chunks_.size(); ++c) {
        for (std::size_t u = 0; u < chunks_[c].size(); ++u) {
          if (!residency_[c].persistent[u]) secondary += 2 * ceil_div(chunks_[c][u].params, dp_subgroup_);
        }
      }
      alloc(MemCategory::Params, secondary, "hpz secondary partition");
    }
  }

  const std::vector<Step> steps = schedule();
  // The last backward of each chunk (the accumulation boundary of that chunk's gradients).
  std::vector<int> remaining_backward(chunks_.size(), 0);
  for (const Step& st : steps) {
    if (!st.forward) ++remaining_backward[st.chunk];
  }
  int backwards_left = 0;
  for (int r : remaining_backward) backwards_left += r;
  for (const Step& st : steps) {
    if (st.forward) {
      forward_pass(st.mb, st.chunk);
    } else {
      --backwards_left;
      bool last_of_chunk = --remaining_backward[st.chunk] == 0;
      backward_pass(st.mb, st.chunk, last_of_chunk, backwards_left == 0);
    }
  }
  optimizer_step();
  return std::move(t_);
}

// The order in which this stage runs forward and backward passes of (micro-batch, chunk):
// GPipe (all forwards, then all backwards), 1F1B (Narayanan et al. SC21 §2.2.1: p - s - 1 warm-up
// forwards, then one forward one backward, then the cool-down backwards) and interleaved 1F1B
// (SC21 §2.2.2, Megatron's forward_backward_pipelining_with_interleaving order).
std::vector<StageBuilder::Step> StageBuilder::schedule() const {
  const int m = static_cast<int>(s_.training.gradient_accumulation_steps);
  const int p = s_.parallel.pp, v = s_.parallel.virtual_stages;
  std::vector<Step> out;
  if (p == 1) {
    for (int j = 0; j < m; ++j) {
      for (int c = 0; c < v; ++c) out.push_back({true, j, c});
      for (int c = v; c-- > 0;) out.push_back({false, j, c});
    }
    return out;
  }
  const int total = m * v;
  auto fwd = [&](int k) {
    int chunk = (k / p) % v;
    int mb = (k / (p * v)) * p + k % p;
    return Step{true, mb, chunk};
  };
  auto bwd = [&](int k) {
    int chunk = v - 1 - (k / p) % v;
    int mb = (k / (p * v)) * p + k % p;
    return Step{false, mb, chunk};
  };
  int warmup;
  if (s_.parallel.pipeline_schedule == PipelineSchedule::GPipe) {
    warmup = total;
  } else if (v == 1) {
    warmup = std::min(p - stage_ - 1, total);
  } else {
    warmup = std::min((p - stage_ - 1) * 2 + (v - 1) * p, total);
  }
  for (int k = 0; k < warmup; ++k) out.push_back(fwd(k));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(fwd(warmup + k));
    out.push_back(bwd(k));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(bwd(k));
  return out;
}

void StageBuilder::tp_collectives(std::int32_t after, const std::string& what) {
  // Megatron's tensor-parallel collectives after a block (forward: the row-parallel output;
  // backward: the column-parallel input gradient); with sequence parallelism a reduce-scatter
  // after the block and an all-gather before the next, each moving half an all-reduce.
  if (s_.parallel.tp == 1) return;
  std::int32_t last;
  if (s_.parallel.sequence_parallel) {
    std::int32_t rs = collective(Peer::Tp, CollectiveKind::ReduceScatter, tp_activation_bytes_,
                                 Stream::TpComm, "tp reduce_scatter " + what, {after});
    last = collective(Peer::Tp, CollectiveKind::AllGather, tp_activation_bytes_, Stream::TpComm,
                      "tp all_gather " + what, {rs});
  } else {
    last = collective(Peer::Tp, CollectiveKind::AllReduce, tp_activation_bytes_, Stream::TpComm,
                      "tp all_reduce " + what, {after});
  }
  host_waits_.push_back(last);
}

void StageBuilder::forward_pass(int mb, int chunk) {
  const bool first_virtual = stage_ == 0 && chunk == 0;
  const bool last_virtual =
      stage_ == s_.parallel.pp - 1 && chunk == static_cast<int>(chunks_.size()) - 1;
  const std::string suffix = pass_suffix(mb, chunk);
  if (!first_virtual) {
    // Megatron recv_forward: posted when the stage reaches this pass, waited on before compute.
    std::int32_t r = collective(Peer::RecvPrev, CollectiveKind::SendRecv, p2p_bytes_,
                                Stream::PpRecv, "recv activations" + suffix, {last_compute_});
    host_waits_.push_back(r);
  }
  const bool stage3 = s_.zero.stage == 3;
  const std::vector<Unit>& units = chunks_[chunk];
  first_forward_ = forwards_done_[chunk]++ == 0;
  if (stage3) fetch_op_.assign(residency_[chunk].trace.size(), -1);
  std::int32_t prev = last_compute_;
  std::int32_t bucket_gather = -1;
  const bool gather_params = first_forward_ && s_.parallel.overlap_param_gather;
  const std::vector<ParamBucket> buckets =
      gather_params ? param_buckets(chunk) : std::vector<ParamBucket>{};
  for (std::size_t u = 0; u < units.size(); ++u) {
    const Unit& unit = units[u];
    std::vector<std::int32_t> deps;
    if (stage3) {
      issue_fetches(chunk, u, prev);
      if (fetch_op_[u] >= 0) deps.push_back(fetch_op_[u]);
    }
    if (gather_params) {
      bucket_gather = overlapped_param_gather(chunk, buckets, u, bucket_gather);
      deps.push_back(bucket_gather);
    }
    if (unit.forward == WorkKind::AttentionForward) {
      alloc(MemCategory::Activations, static_cast<Bytes>(activation_layer_), "activations");
    }
    if (unit.forward == WorkKind::HeadForward) alloc(MemCategory::Activations, logits_bytes_, "logits");
    prev = compute(unit.forward, Phase::Forward, unit_name(unit, "fwd") + suffix, deps);
    if (unit.forward != WorkKind::HeadForward) tp_collectives(prev, unit_name(unit, "fwd"));
    if (stage3 && fetch_op_[u] >= 0 && !residency_[chunk].keep_after_forward[u]) {
      free_op(MemCategory::Buffers, 2 * unit.params, "gathered " + unit.label);
    }
  }
  last_compute_ = prev;
  if (stage3) pending_fetches_[{mb, chunk}] = fetch_op_;
  if (!last_virtual) {
    // Sends are asynchronous (isend): the stage goes on; the receiver waits for the data.
    collective(Peer::SendNext, CollectiveKind::SendRecv, p2p_bytes_, Stream::PpComm,
               "send activations" + suffix, {prev});
  }
}

void StageBuilder::backward_pass(int mb, int chunk, bool last_of_chunk, bool last_of_step) {
  const int zs = s_.zero.stage;
  const bool stage3 = zs == 3;
  const bool first_virtual = stage_ == 0 && chunk == 0;
  const bool last_virtual =
      stage_ == s_.parallel.pp - 1 && chunk == static_cast<int>(chunks_.size()) - 1;
  const std::string suffix = pass_suffix(mb, chunk);
  if (!last_virtual) {
    std::int32_t r = collective(Peer::RecvNext, CollectiveKind::SendRecv, p2p_bytes_,
                                Stream::PpRecv, "recv gradients" + suffix, {last_compute_});
    host_waits_.push_back(r);
  }
  const ReduceWhen when = reduce_when();
  const bool hooks = when == ReduceWhen::EveryBackward ||
                     (when == ReduceWhen::LastBackward && last_of_chunk);
  bucket_elements_ = 0;
  last_reduction_ = prev_reduction_ = older_reduction_ = -1;
  const std::vector<Unit>& units = chunks_[chunk];
  const std::size_t n_units = units.size();
  if (stage3) {
    auto it = pending_fetches_.find({mb, chunk});
    fetch_op_ = it->second;
    pending_fetches_.erase(it);
  }
  const bool accumulating = backwards_done_[chunk]++ > 0;
  accumulating_ = accumulating;
  hook_setup(accumulating);  // DeepSpeed's optimizer.backward() sets up its buckets first
  std::int32_t prev = last_compute_;
  for (std::size_t i = n_units; i-- > 0;) {
    const Unit& unit = units[i];
    const std::size_t use = 2 * n_units - 1 - i;  // backward position in the fetch trace
    std::vector<std::int32_t> deps;
    if (stage3) {
      issue_fetches(chunk, use, prev);
      if (fetch_op_[use] >= 0) deps.push_back(fetch_op_[use]);
    }
    const bool full = s_.parallel.recompute == Recompute::Full;
    if (full && unit.backward == WorkKind::MlpBackward) {
      alloc(MemCategory::Activations, static_cast<Bytes>(activation_layer_full_),
            "recomputed activations");
    }
    if (zs >= 2) alloc(MemCategory::Buffers, 2 * unit.params, "param.grad " + unit.label);
    prev = compute(unit.backward, Phase::Backward, unit_name(unit, "bwd") + suffix, deps);
    // The input gradient of every column-parallel block (and of the vocab-parallel head) is
    // all-reduced; the embedding's is not needed.
    if (unit.backward != WorkKind::EmbedBackward) tp_collectives(prev, unit_name(unit, "bwd"));
    if (unit.backward == WorkKind::HeadBackward) free_op(MemCategory::Activations, logits_bytes_, "logits");
    if (unit.backward == WorkKind::AttentionBackward) {
      free_op(MemCategory::Activations, static_cast<Bytes>(activation_layer_), "activations");
      if (full) {
        free_op(MemCategory::Activations, static_cast<Bytes>(activation_layer_full_),
                "recomputed activations");
      }
    }
    if (stage3) {
      const Residency& res = residency_[chunk];
      const bool gathered_now = fetch_op_[use] >= 0;
      const bool kept = !gathered_now && res.keep_after_forward[i] && !res.persistent[i];
      if (gathered_now || kept) free_op(MemCategory::Buffers, 2 * unit.params, "gathered " + unit.label);
    }
    if (hooks && s_.zero.per_parameter_stage3) {
      per_parameter_reduce(unit, prev);
    } else if (hooks) {
      grad_ready(unit.params, prev);
    }
    if (zs >= 2) free_op(MemCategory::Buffers, 2 * unit.params, "param.grad " + unit.label);
  }
  last_compute_ = prev;
  if (!first_virtual) {
    collective(Peer::SendPrev, CollectiveKind::SendRecv, p2p_bytes_, Stream::PpComm,
               "send gradients" + suffix, {prev});
  }
  if (hooks) epilogue(prev, last_of_step);
  if (when == ReduceWhen::AfterBackward && last_of_step) {
    // After the flush: every chunk's gradients, bucket by bucket in model order, on the compute
    // stream (Megatron's finalize_model_grads / DeepSpeed's reduce_gradients).
    hook_setup(true);
    for (const auto& chunk_units : chunks_) {
      for (const Unit& unit : chunk_units) grad_ready(unit.params, prev);
    }
    epilogue(prev, true);
  }
}

// ---- ZeRO-3 parameter residency --------------------------------------------------------------
// The fetch trace of one pass over a chunk: forward uses of its units, then backward uses in
// reverse. For each use, whether the unit must be gathered first and whether it is released.
void StageBuilder::plan_stage3(int chunk) {
  const std::vector<Unit>& units = chunks_[chunk];
  const std::size_t n = units.size();
  const ZeroConfig& z = s_.zero;
  Residency& r = residency_[chunk];
  r.persistent.assign(n, false);
  r.keep_after_forward.assign(n, false);
  for (std::size_t u = 0; u < n; ++u) r.persistent[u] = units[u].params <= z.stage3_param_persistence_threshold;
  // A unit stays gathered from its forward to its backward when the parameters used in between
  // (the later units' forward and backward) are within stage3_max_reuse_distance.
  std::int64_t between = 0;
  for (std::size_t i = n; i-- > 0;) {
    // DeepSpeed's __params_to_release stops looking once the parameters traversed reach
    // max_reuse_distance, so only strictly nearer reuses keep a parameter.
    r.keep_after_forward[i] = between < z.stage3_max_reuse_distance;
    between += 2 * units[i].params;
  }
  r.trace.clear();
  for (std::size_t u = 0; u < n; ++u) r.trace.push_back({static_cast<int>(u), false});
  for (std::size_t u = n; u-- > 0;) r.trace.push_back({static_cast<int>(u), true});
  r.needs_fetch.assign(r.trace.size(), false);
  for (std::size_t k = 0; k < r.trace.size(); ++k) {
    auto [u, bwd] = r.trace[k];
    r.needs_fetch[k] = !r.persistent[u] && !(bwd && r.keep_after_forward[u]);
  }
  // The pre-hook of use c fetches c and prefetches the following uses that need a fetch, up to
  // stage3_prefetch_bucket_size elements (the last may overshoot) within
  // stage3_max_live_parameters. issue_at[k]: the first use whose pre-hook issues k's fetch.
  r.issue_at.assign(r.trace.size(), -1);
  std::int64_t budget =
      std::min<std::int64_t>(z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters);
  // DeepSpeed 0.3-0.5 waited for every gather at once (fetch_sub_module synchronizes), so no
  // prefetch was ever in flight beside the compute.
  if (z.per_parameter_stage3) budget = 0;
  for (std::size_t c = 0; c < r.trace.size(); ++c) {
    if (r.needs_fetch[c] && r.issue_at[c] < 0) r.issue_at[c] = static_cast<int>(c);
    std::int64_t taken = 0;
    for (std::size_t k = c + 1; k < r.trace.size() && taken < budget; ++k) {
      if (!r.needs_fetch[k]) continue;
      if (r.issue_at[k] < 0) r.issue_at[k] = static_cast<int>(c);
      taken += units[r.trace[k].first].params;
    }
  }
}

void StageBuilder::issue_fetches(int chunk, std::size_t use, std::int32_t hook_after) {
  const Residency& r = residency_[chunk];
  const Stream stream = s_.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
  const std::int64_t dp = s_.parallel.dp;
  for (std::size_t k = use; k < r.trace.size(); ++k) {
    if (r.issue_at[k] != static_cast<int>(use)) {
      if (k > use && r.issue_at[k] > static_cast<int>(use)) break;
      continue;
    }
    const Unit& u = chunks_[chunk][r.trace[k].first];
    const bool backward = r.trace[k].second;
    if (s_.zero.per_parameter_stage3) {
      fetch_op_[k] = per_parameter_gather(u, backward, hook_after);
      continue;
    }
    std::int32_t a = alloc(MemCategory::Buffers, 2 * u.params, "gathered " + u.label, stream, {hook_after});
    std::vector<std::int32_t> deps = {a};
    if (offload_param()) {
      // The partition comes in from host memory (or NVMe through it) before the all-gather.
      const WorkKind from = s_.zero.offload_param == OffloadDevice::Nvme ? WorkKind::NvmeToDevice
                                                                          : WorkKind::HostToDevice;
      deps.push_back(host_copy(from, 2 * ceil_div(u.params, dp), Stream::H2D,
                               "param partition in " + u.label, {hook_after}));
    }
    // Which ranks hold the pieces: MiCS gathers inside its shard group; with hpZ only the first
    // gather of a parameter in a step (the first forward) reads the primary partition over the
    // whole DP group, every later one the node's secondary copy (DeepSpeed
    // partition_parameters.py: ds_secondary_tensor, dropped after the optimizer step).
    const bool shard_group = s_.zero.mics_shard_size > 0 ||
                             (s_.zero.hpz_partition_size > 1 && (backward || !first_forward_));
    const std::int64_t n = shard_group ? dp_subgroup_ : dp;
    const Peer peer = shard_group ? Peer::DpShard : Peer::Dp;
    const std::string name = unit_name(u, backward ? "gather(bwd)" : "gather(fwd)");
    const std::int64_t piece = ceil_div(u.params, n);
    // qwZ (DeepSpeed's CUDAQuantizer): int8 with one fp32 scale per group of at most ~8,000
    // elements; the codes and the scales are two all-gathers on the same group, and the
    // gathered weights are dequantized before use. MiCS ignores the flag (mics.py).
    if (s_.zero.quantized_weights && s_.zero.mics_shard_size <= 0) {
      const std::int32_t q = quantize_op(3 * piece, stream, "quantize " + name, deps);
      const std::int32_t codes = collective(peer, CollectiveKind::AllGather, piece * n, stream,
                                            name + " int8", {q});
      const std::int32_t scales = collective(peer, CollectiveKind::AllGather,
                                             4 * ceil_div(piece, kQwzGroup) * n, stream,
                                             name + " scales", {codes});
      fetch_op_[k] = quantize_op(3 * u.params, stream, "dequantize " + name, {scales});
    } else {
      fetch_op_[k] = collective(peer, CollectiveKind::AllGather, 2 * piece * n, stream, name, deps);
    }
  }
}

// Megatron --overlap-param-gather: the distributed optimizer's all-gather of the updated
// parameters moves into the next step's forward. A forward pre-hook waits for its bucket's
// gather and then dispatches the next bucket's, so the first bucket is exposed and each later
// one overlaps the forward of the bucket before it (distributed_data_parallel.py forward
// pre-hooks, param_and_grad_buffer.py finish_param_sync). Buckets follow the gradient buckets'
// size, in forward order. In the steady state this step's gathers bring the previous step's
// update. Returns the gather op that unit u's forward waits for.
std::vector<StageBuilder::ParamBucket> StageBuilder::param_buckets(int chunk) const {
  const std::vector<Unit>& units = chunks_[chunk];
  const std::int64_t limit = bucket_limit();
  // A bucket closes once it reaches the limit.
  std::vector<ParamBucket> buckets;
  std::int64_t filled = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < units.size(); ++i) {
    filled += units[i].params;
    if (filled >= limit || i + 1 == units.size()) {
      buckets.push_back({start, filled});
      start = i + 1;
      filled = 0;
    }
  }
  return buckets;
}

std::int32_t StageBuilder::overlapped_param_gather(int chunk, const std::vector<ParamBucket>& buckets,
                                                   std::size_t u, std::int32_t current) {
  std::size_t b = 0;
  while (b + 1 < buckets.size() && buckets[b + 1].first_unit <= u) ++b;
  if (buckets[b].first_unit != u) return current;  // inside a bucket already waited for
  const std::int64_t dp = s_.parallel.dp;
  auto gather = [&](std::size_t i, std::vector<std::int32_t> deps) {
    return collective(Peer::Dp, CollectiveKind::AllGather,
                      2 * ceil_div(buckets[i].elements, dp) * dp, Stream::DpComm,
                      "param all_gather (overlapped) bucket " + std::to_string(i) + " c" +
                          std::to_string(chunk),
                      deps);
  };
  if (b == 0) next_param_gather_ = gather(0, {last_compute_});
  const std::int32_t mine = next_param_gather_;
  if (b + 1 < buckets.size()) next_param_gather_ = gather(b + 1, {mine});
  return mine;
}

// DeepSpeed 0.3.13-0.5 stage 3 (the 2021 code, partition_parameters.py _allgather_param and
// _reduce_scatter_gradient): one collective per parameter tensor, on the main stream after a
// torch.cuda.synchronize(), each with a Python list of world-size tensor views that
// torch.distributed then copies into or out of a flat buffer one rank at a time. That host work
// grows with the number of ranks N; it is a HostOverhead op of N ranks before the collective,
// on the compute stream because the training thread does it and the GPU waits.
std::int32_t StageBuilder::host_list_op(const std::string& name, std::vector<std::int32_t> deps) {
  return work_op(OpKind::Compute, {WorkKind::HostOverhead, s_.parallel.dp, 0}, Stream::Compute,
                 Phase::Communication, name, deps);
}

std::int32_t StageBuilder::per_parameter_gather(const Unit& u, bool backward,
                                                std::int32_t after) {
  const std::int64_t dp = s_.parallel.dp;
  // A unit of small tensors only (a head that is just the final norm) is gathered tensor by
  // tensor when the persistence threshold lets it be partitioned at all.
  const int tensors = u.big_tensors > 0 ? u.big_tensors : std::max(1, u.small_tensors);
  const std::int64_t each = ceil_div(u.params, tensors);
  std::int32_t prev = alloc(MemCategory::Buffers, 2 * u.params, "gathered " + u.label,
                            Stream::Compute, {after});
  const std::string pass = backward ? "gather(bwd)" : "gather(fwd)";
  for (int t = 0; t < tensors; ++t) {
    const std::string name = unit_name(u, pass.c_str()) + " tensor " + std::to_string(t);
    prev = host_list_op("tensor list " + name, {prev});
    prev = collective(Peer::Dp, CollectiveKind::AllGather, 2 * ceil_div(each, dp) * dp,
                      Stream::Compute, name, {prev});
  }
  return prev;
}

void StageBuilder::per_parameter_reduce(const Unit& u, std::int32_t produced_by) {
  const int big = u.big_tensors;
  const std::int64_t small_each =
      big > 0 ? std::max<std::int64_t>(1, s_.model.hidden_size / s_.parallel.tp)
              : ceil_div(u.params, std::max(1, u.small_tensors));
  const std::int64_t each = big > 0 ? ceil_div(u.params - u.small_tensors * small_each, big) : 0;
  const Stream stream = reduction_stream();
  std::int32_t host = produced_by;
  for (int t = 0; t < big + u.small_tensors; ++t) {
    const std::int64_t elements = t < big ? std::max<std::int64_t>(1, each) : small_each;
    const std::string name =
        unit_name(u, "grad reduce_scatter") + " tensor " + std::to_string(t);
    host = host_list_op("tensor list " + name, {host});
    last_reduction_ = collective(Peer::Dp, CollectiveKind::ReduceScatter,
                                 grad_bytes_per_element() * elements, stream, name, {host});
  }
}

// An elementwise (de)quantization kernel moving `bytes` through HBM.
std::int32_t StageBuilder::quantize_op(Bytes bytes, Stream stream, const std::string& name,
                                       std::vector<std::int32_t> deps) {
  return work_op(OpKind::Compute, {WorkKind::Quantize, bytes, 0}, stream, Phase::Communication,
                 name, deps);
}

// ---- gradient buckets -------------------------------------------------------------------------
ReduceWhen StageBuilder::reduce_when() const {
  const int zs = s_.zero.stage;
  switch (s_.parallel.framework) {
    case Framework::Megatron:
      // --overlap-grad-reduce: buckets are reduced as their gradients become ready in the last
      // micro-batch's backward (DistributedDataParallel.register_grad_ready).
      if (zs < 2 && s_.parallel.overlap_grad_reduce) return ReduceWhen::LastBackward;
      return zs >= 2 ? ReduceWhen::EveryBackward : ReduceWhen::AfterBackward;
    case Framework::Nanotron:
      return zs >= 2 ? ReduceWhen::EveryBackward : ReduceWhen::AfterBackward;
    case Framework::Fsdp: return ReduceWhen::EveryBackward;
    case Framework::DeepSpeed: break;
  }
  if (zs >= 2) return ReduceWhen::EveryBackward;
  if (s_.parallel.pp > 1) return ReduceWhen::AfterBackward;  // pipeline engine: ReduceGrads
  if (zs == 0) return ReduceWhen::LastBackward;                // PyTorch DDP
  return s_.zero.overlap_comm ? ReduceWhen::LastBackward : ReduceWhen::AfterBackward;
}

Stream StageBuilder::reduction_stream() const {
  const ReduceWhen when = reduce_when();
  if (when == ReduceWhen::AfterBackward) return Stream::Compute;
  if (s_.zero.stage == 0) return Stream::DpComm;  // DDP's reducer has its own NCCL stream
  // Megatron's overlapped bucket reductions are asynchronous collectives (async_op=True), which
  // PyTorch runs on the process group's own NCCL stream.
  if (s_.parallel.framework == Framework::Megatron && s_.parallel.overlap_grad_reduce) {
    return Stream::DpComm;
  }
  return s_.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
}

// Megatron and nanotron accumulate and reduce gradients in fp32 when training in bf16
// (Megatron sets accumulate_allreduce_grads_in_fp32 for bf16; nanotron's fp32 gradient
// accumulation); DeepSpeed and DDP reduce the 16-bit gradients.
Bytes StageBuilder::grad_bytes_per_element() const {
  const bool fp32 = (s_.parallel.framework == Framework::Megatron ||
                     s_.parallel.framework == Framework::Nanotron) &&
                    s_.training.precision == Precision::Bf16;
  return fp32 ? 4 : 2;
}

// Bucket limit in elements: DeepSpeed's reduce_bucket_size; PyTorch DDP's bucket_cap_mb = 25 MiB
// (first bucket 1 MiB) of 16-bit gradients; Megatron-core's max(40M, 1M x dp) elements.
std::int64_t StageBuilder::bucket_limit() const {
  const Framework f = s_.parallel.framework;
  if (f == Framework::Megatron || f == Framework::Nanotron) {
    // Megatron-core gives pipeline ranks after the first one a single bucket
    // (distributed_data_parallel.py: bucket_size None when pp_rank > 0).
    if (f == Framework::Megatron && s_.parallel.overlap_grad_reduce && stage_ > 0) {
      return std::numeric_limits<std::int64_t>::max();
    }
    return std::max<std::int64_t>(40'000'000, 1'000'000LL * s_.parallel.dp);
  }
  if (s_.zero.stage == 0 && reduce_when() == ReduceWhen::LastBackward) {
    return (bucket_count_ == 0 ? (1 << 20) : 25 * (1 << 20)) / 2;
  }
  return s_.zero.reduce_bucket_size;
}

CollectiveKind StageBuilder::reduction_kind(std::string& what) const {
  const ZeroConfig& z = s_.zero;
  const Framework f = s_.parallel.framework;
  if (z.stage == 0) {
    what = "grad all_reduce";
    return CollectiveKind::AllReduce;
  }
  if (z.stage == 3 || f == Framework::Fsdp || f == Framework::Megatron || f == Framework::Nanotron) {
    // ZeRO-3 / FSDP reduce-scatter; Megatron's distributed optimizer and nanotron's ZeRO-1
    // reduce-scatter into the owners' shards.
    what = z.reduce_scatter ? "grad reduce_scatter" : "grad all_reduce";
    return z.reduce_scatter ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  }
  // DeepSpeed stages 1/2 (average_tensor): with reduce_scatter and use_multi_rank_bucket_allreduce
  // (defaults since DeepSpeed 0.12) one all-reduce of the whole bucket; without it one reduce per
  // owning rank, which moves what a reduce-scatter moves.
  const bool all_reduce = !z.reduce_scatter || z.use_multi_rank_bucket_allreduce;
  what = all_reduce ? "grad all_reduce" : "grad reduce (to owners)";
  return all_reduce ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
}

void StageBuilder::hook_setup(bool accumulating) {
  const int zs = s_.zero.stage;
  const bool deepspeed = s_.parallel.framework == Framework::DeepSpeed;
  if (deepspeed && (zs == 1 || zs == 2) && s_.zero.contiguous_gradients && !ipg_allocated_) {
    // DeepSpeed's IPG buffer (setup_buckets): reduce_bucket_size 16-bit elements, two of them
    // with overlap_comm (double-buffered).
    ipg_bytes_ = 2 * s_.zero.reduce_bucket_size * (s_.zero.overlap_comm ? 2 : 1);
    alloc(MemCategory::Buffers, ipg_bytes_, "ipg_buffer");
    ipg_allocated_ = true;
  }
  if (deepspeed && zs == 2 && accumulating && !partition_temp_) {
    // A later micro-batch's partition is reduced into a temporary and added to the first one.
    alloc(MemCategory::Buffers, 2 * info_->dp_partition, "grads_in_partition (accumulate)");
    partition_temp_ = true;
  }
}

void StageBuilder::grad_ready(std::int64_t params, std::int32_t produced_by) {
  const std::int64_t limit = bucket_limit();
  if (s_.zero.stage == 0 && reduce_when() == ReduceWhen::LastBackward) {
    // DDP: a bucket closes once it holds at least its cap; it is reduced when all its gradients
    // are ready, i.e. after the last unit that filled it.
    bucket_elements_ += params;
    if (bucket_elements_ >= limit) flush(produced_by);
    return;
  }
  if (params > limit) {
    flush(produced_by);                   // the pending bucket first, as DeepSpeed does
    flush_elements(params, produced_by);  // then the parameter too large for the bucket alone
    return;
  }
  if (bucket_elements_ + params > limit && bucket_elements_ > 0) flush(produced_by);
  bucket_elements_ += params;
}

void StageBuilder::flush(std::int32_t produced_by) {
  if (bucket_elements_ == 0) return;
  flush_elements(bucket_elements_, produced_by);
  bucket_elements_ = 0;
}

void StageBuilder::flush_elements(std::int64_t elements, std::int32_t produced_by) {
  const ZeroConfig& z = s_.zero;
  const Stream stream = reduction_stream();
  std::string what;
  const CollectiveKind kind = reduction_kind(what);
  std::vector<std::int32_t> deps;
  if (produced_by >= 0) deps.push_back(produced_by);
  std::int32_t red = reduce_bucket(kind, elements, stream, what + " #" + std::to_string(bucket_count_), deps);
  ++bucket_count_;
  if (offload_optimizer()) offload_gradients(elements, red);
  if (stream == Stream::DpComm && z.stage != 0 && s_.parallel.framework == Framework::DeepSpeed) {
    // The compute stream waits before filling the bucket that is being reduced: with two IPG
    // buffers (stages 1/2) on the reduction before this one; stage 3 keeps at most two
    // reductions in flight (max_param_reduce_events).
    std::int32_t wait = z.stage == 3 ? older_reduction_ : prev_reduction_;
    if (wait >= 0) host_waits_.push_back(wait);
  }
  older_reduction_ = prev_reduction_;
  prev_reduction_ = red;
  last_reduction_ = red;
}

// One gradient bucket's reduction, by sharding variant. Returns the op after which this rank's
// partition of the bucket is reduced.
std::int32_t StageBuilder::reduce_bucket(CollectiveKind kind, std::int64_t elements, Stream stream,
                                         const std::string& name, std::vector<std::int32_t> deps) {
  const ZeroConfig& z = s_.zero;
  const Bytes g = grad_bytes_per_element();
  const std::int64_t k = dp_subgroup_, dp = s_.parallel.dp;
  if (z.mics_shard_size > 0) {
    // Reduce-scatter inside the shard group; PyTorch FSDP HYBRID_SHARD then all-reduces the
    // shard across the replicas at once (_runtime_utils.py _reduce_grad); DeepSpeed MiCS does it
    // once per step, at the accumulation boundary (mics.py), see epilogue().
    std::int32_t rs = collective(Peer::DpShard, kind, g * elements, stream, name, deps);
    if (s_.parallel.framework != Framework::Fsdp || k == dp) return rs;
    return collective(Peer::DpReplica, CollectiveKind::AllReduce, g * ceil_div(elements, k),
                      stream, name + " (replicas)", {rs});
  }
  if (z.quantized_gradients && z.stage == 3 && k < dp) {
    // qgZ (DeepSpeed all_to_all_quant_reduce): int4 codes with fp32 scales (a group per row,
    // ~hidden elements); an all-to-all inside the node, a dequantize-reduce-requantize leaving
    // 1/k of the bucket, an all-to-all across nodes, and a final dequantize and sum. Used only
    // across nodes; the result is this rank's reduce-scatter partition.
    const std::int64_t h = std::max<std::int64_t>(1, s_.model.hidden_size);
    const Bytes codes = ceil_div(elements, 2), scales = 4 * ceil_div(elements, h);
    std::int32_t q = quantize_op(g * elements + codes, stream, "quantize " + name, deps);
    std::int32_t intra = collective(Peer::DpShard, CollectiveKind::AllToAll, codes + scales, stream,
                                    name + " int4 all_to_all (node)", {q});
    std::int32_t r = quantize_op(codes + scales + ceil_div(codes, k), stream,
                                 "reduce-requantize " + name, {intra});
    std::int32_t inter = collective(Peer::DpReplica, CollectiveKind::AllToAll,
                                    ceil_div(codes + scales, k), stream,
                                    name + " int4 all_to_all (nodes)", {r});
    return quantize_op(ceil_div(codes, k) + g * ceil_div(elements, dp), stream,
                       "dequantize " + name, {inter});
  }
  return collective(Peer::Dp, kind, g * elements, stream, name, deps);
}

void StageBuilder::epilogue(std::int32_t last_backward, bool last_of_step) {
  flush(last_backward);
  const int zs = s_.zero.stage;
  const Stream stream = reduction_stream();
  if (last_of_step && s_.zero.mics_shard_size > 0 && s_.parallel.framework != Framework::Fsdp &&
      dp_subgroup_ < s_.parallel.dp && last_reduction_ >= 0) {
    // DeepSpeed MiCS: the reduced shard is all-reduced across the replication group once, at
    // the accumulation boundary (all_reduce_coalesced over param_repli_group).
    last_reduction_ = collective(Peer::DpReplica, CollectiveKind::AllReduce,
                                 grad_bytes_per_element() * info_->dp_partition, stream,
                                 "grad all_reduce (replicas)", {last_reduction_});
  }
  if (last_reduction_ >= 0 && stream == Stream::DpComm && zs != 0 &&
      s_.parallel.framework == Framework::DeepSpeed) {
    host_waits_.push_back(last_reduction_);  // accelerator synchronize in the epilogue
  }
  if (ipg_allocated_ && (zs == 2 || last_of_step)) {
    free_op(MemCategory::Buffers, ipg_bytes_, "ipg_buffer", stream);
    ipg_allocated_ = false;
  }
  if (partition_temp_) {
    free_op(MemCategory::Buffers, 2 * info_->dp_partition, "grads_in_partition (accumulate)", stream);
    partition_temp_ = false;
  }
  if (last_of_step && last_reduction_ >= 0) final_reduction_ = last_reduction_;
}

// ---- optimizer step ---------------------------------------------------------------------------
void StageBuilder::optimizer_step() {
  const int zs = s_.zero.stage;
  const std::int64_t elements = zs == 0 ? info_->local_params : info_->dp_partition;
  std::vector<std::int32_t> deps;
  if (final_reduction_ >= 0) deps.push_back(final_reduction_);
  if (offload_optimizer()) {
    offloaded_step(elements, deps);
    return;
  }
  // fp32 gradients handed to the optimizer: stage 0 upcasts every gradient; stages 1/2 flatten
  // the averaged 16-bit partition (2 bytes) and upcast it (4 bytes); stage 3 the same per
  // sub-group of at most sub_group_size (1e9) elements.
  const Bytes temp = zs == 0 ? 4 * elements
                             : 6 * (zs == 3 ? std::min<std::int64_t>(elements, 1'000'000'000) : elements);
  std::int32_t a = alloc(MemCategory::Buffers, temp, "fp32 step gradients", Stream::Compute, deps);
  std::vector<std::int32_t> step_deps = {a};
  step_deps.insert(step_deps.end(), host_waits_.begin(), host_waits_.end());
  host_waits_.clear();
  const std::int32_t step = work_op(OpKind::Compute, {WorkKind::OptimizerStep, elements, 0},
                                    Stream::Compute, Phase::Optimizer, "optimizer step", step_deps);
  free_op(MemCategory::Buffers, temp, "fp32 step gradients");
  parameter_gather(step, Stream::Compute);
}

// The updated 16-bit parameters back to every rank: stages 1/2 all-gather the partitions,
// stage 3 only its persistent (never released) parameters.
void StageBuilder::parameter_gather(std::int32_t after, Stream stream) {
  const int zs = s_.zero.stage;
  const bool shards = s_.zero.mics_shard_size > 0;
  const std::int64_t dp = shards ? dp_subgroup_ : s_.parallel.dp;
  const Peer peer = shards ? Peer::DpShard : Peer::Dp;
  const std::int32_t step = after;
  if ((zs == 1 || zs == 2) && !s_.parallel.overlap_param_gather) {
    // DeepSpeed's all_gather_dp_groups: one all_gather_into_tensor of the whole 16-bit flat
    // buffer (allgather_bucket_size is unused with current PyTorch), synchronous. Megatron's
    // distributed optimizer gathers the updated parameters the same way.
    collective(peer, CollectiveKind::AllGather, 2 * info_->dp_partition * dp, stream,
               "param all_gather", {step});
  }
  if (zs == 3) {
    std::int64_t persistent = 0;
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      for (std::size_t u = 0; u < chunks_[c].size(); ++u) {
        if (residency_[c].persistent[u]) persistent += chunks_[c][u].params;
      }
    }
    if (persistent > 0) {
      collective(peer, CollectiveKind::AllGather, 2 * ceil_div(persistent, dp) * dp,
                 stream, "persistent param all_gather", {step});
    }
  }
}

// ---- offload ------------------------------------------------------------------------------------
// ZeRO-Offload (Ren et al., USENIX ATC 2021, §4) as DeepSpeed runs it: each reduced gradient
// bucket's partition goes to the host in 16 bits as soon as it is reduced (on the reduction's
// stream: DeepSpeed's non-blocking copy into the pinned fp32 buffer is queued behind the
// reduction), the step runs on the CPU (DeepSpeed's CPU Adam), and the updated 16-bit partition
// comes back over PCIe before the parameter all-gather. ZeRO-Infinity (Rajbhandari et al., SC21)
// keeps the optimizer states on NVMe and swaps them around the CPU step; with offload_param the
// stage-3 partition lives on the host (or NVMe) and is copied in before each gather.
std::int32_t StageBuilder::host_copy(WorkKind k, Bytes bytes, Stream stream,
                                     const std::string& name, std::vector<std::int32_t> deps) {
  return work_op(OpKind::Copy, {k, bytes, 0}, stream, Phase::Communication, name, deps);
}

void StageBuilder::offload_gradients(std::int64_t elements, std::int32_t reduction) {
  const Bytes share =
      2 * ceil_div(elements, s_.zero.mics_shard_size > 0 ? dp_subgroup_ : s_.parallel.dp);
  const Stream stream = reduction_stream();
  std::int32_t after = reduction;
  if (s_.zero.stage <= 2 && accumulating_ && reduce_when() == ReduceWhen::EveryBackward) {
    // Stage 2 accumulates a later micro-batch's gradients through the GPU: the host's running
    // sum comes back, is added on the GPU and goes out again
    // (DeepSpeed stage_1_and_2.py, async_accumulate_grad_in_cpu_via_gpu).
    after = host_copy(WorkKind::HostToDevice, share, stream, "grad accumulate h2d", {after});
  }
  last_grad_copy_ = host_copy(WorkKind::DeviceToHost, share, stream, "grad d2h", {after});
}

void StageBuilder::offloaded_step(std::int64_t elements, const std::vector<std::int32_t>& after) {
  const ZeroConfig& z = s_.zero;
  const bool nvme = z.offload_optimizer == OffloadDevice::Nvme;
  const bool dpu = z.delayed_param_update;
  // ZeRO-Infinity swaps the fp32 master weights and both Adam moments in before the step and
  // out after it (12 bytes each way per parameter); a parameter partition on NVMe is written too.
  Bytes swapped = nvme ? 2 * 12 * elements : 0;
  if (z.offload_param == OffloadDevice::Nvme) swapped += 2 * elements;
  // Without DPU the CPU waits for this step's last gradient copy. With DPU (ZeRO-Offload §4.2)
  // it updates with the previous step's gradients, already on the host when this step begins,
  // so it runs beside this step's forward and backward; the steady-state step is then as long
  // as the longer of the two.
  std::vector<std::int32_t> deps;
  if (!dpu) {
    deps = after;
    if (last_grad_copy_ >= 0) deps.push_back(last_grad_copy_);
  }
  const std::int32_t step =
      work_op(OpKind::Compute, {WorkKind::CpuOptimizerStep, elements, swapped}, Stream::Cpu,
              Phase::Optimizer,
              dpu ? "cpu optimizer step (previous step's gradients)" : "cpu optimizer step", deps);
  std::int32_t ready = step;
  if (!offload_param()) {
    // The updated 16-bit partition back into the GPU's parameters.
    ready = host_copy(WorkKind::HostToDevice, 2 * elements, Stream::H2D, "param h2d", {step});
  }
  // With DPU the next forward does not wait for these parameters, so the gather is issued on the
  // side stream instead of blocking the compute stream.
  parameter_gather(ready, dpu ? Stream::DpComm : Stream::Compute);
}

// Host and NVMe bytes of one rank. Host, with the optimizer offloaded to the CPU: the fp32
// master weights, Adam's two moments and the fp32 gradient partition (16 B per parameter,
// ZeRO-Offload §4.1). On NVMe: the master weights and moments (12 B); the host keeps the fp32
// gradients and the sub-group being stepped (DeepSpeed's sub_group_size, 1e9 by default). A
// stage-3 parameter partition offloaded to the host is 2 B per parameter; on NVMe the host keeps
// DeepSpeed's parameter swap buffers (offload_param buffer_count 5 x buffer_size 1e8 elements).
void StageBuilder::offload_memory(StagePlan& info) const {
  const std::int64_t part = info.dp_partition;
  const ZeroConfig& z = s_.zero;
  if (z.offload_optimizer == OffloadDevice::Cpu) info.host_bytes += 16 * part;
  if (z.offload_optimizer == OffloadDevice::Nvme) {
    info.nvme_bytes += 12 * part;
    info.host_bytes += 4 * part + 12 * std::min<std::int64_t>(part, 1'000'000'000);
  }
  if (z.offload_param == OffloadDevice::Cpu) info.host_bytes += 2 * part;
  if (z.offload_param == OffloadDevice::Nvme) {
    info.nvme_bytes += 2 * part;
    info.host_bytes += 2 * std::min<std::int64_t>(part, 5 * 100'000'000LL);
  }
}

}  // namespace

TrainingPlan build_training_plan(const Scenario& s, bool fold) {
  TrainingPlan out;
  PlanBuilder(s, out, fold).build();
  return out;
}

}  // namespace zerosim
