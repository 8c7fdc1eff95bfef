#include "sim/parallel/training_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "sim/memory/memory_constants.h"

namespace zerosim {

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

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A template op: what one rank runs. Every rank of a homogeneous data-parallel / tensor-parallel
// layout runs the same sequence; collectives are matched across ranks by (group kind, instance).
struct TemplateOp {
  OpKind kind = OpKind::Compute;
  Stream stream = Stream::Compute;
  Phase phase = Phase::Other;
  MemCategory category = MemCategory::Buffers;
  std::int32_t name = 0;
  std::int32_t work = -1;
  Bytes bytes = 0;
  std::uint32_t dep_begin = 0, dep_count = 0;
  GroupKind group = GroupKind::Dp;
  CollectiveKind collective = CollectiveKind::AllReduce;
  std::int32_t instance = -1;
};

struct Template {
  std::vector<TemplateOp> ops;
  std::vector<std::int32_t> deps;
  std::vector<std::string> names;
  std::map<std::string, std::int32_t> name_ids;
  std::vector<Work> works;
  std::int32_t instances[3] = {0, 0, 0};
  // Kinds and sizes of each collective instance, per group kind.
  std::vector<std::pair<CollectiveKind, Bytes>> instance_info[3];

  std::int32_t intern(const std::string& n) {
    auto [it, inserted] = name_ids.emplace(n, static_cast<std::int32_t>(names.size()));
    if (inserted) names.push_back(n);
    return it->second;
  }
  std::int32_t add(TemplateOp op, const std::string& name, const std::vector<std::int32_t>& d) {
    op.name = intern(name);
    op.dep_begin = static_cast<std::uint32_t>(deps.size());
    for (std::int32_t x : d) {
      if (x >= 0) deps.push_back(x);
    }
    op.dep_count = static_cast<std::uint32_t>(deps.size()) - op.dep_begin;
    ops.push_back(op);
    return static_cast<std::int32_t>(ops.size() - 1);
  }
};

// A parameter unit: what one ZeRO-3 fetch gathers and one backward hook hands to the gradient
// buckets. Units are the embedding, each layer's attention block and MLP block, and the head.
struct Unit {
  WorkKind forward, backward;
  int layer = -1;
  std::int64_t params = 0;
  std::string label;
};

class StepBuilder {
 public:
  StepBuilder(const Scenario& s, TrainingPlan& out, bool memory_only)
      : s_(s), out_(out), memory_only_(memory_only) {}

  void build() {
    make_units();
    const int m = static_cast<int>(s_.training.gradient_accumulation_steps);
    model_states();
    alloc_persistent();
    if (s_.zero.stage == 3) plan_stage3_residency();
    for (int j = 0; j < m; ++j) {
      forward(j);
      backward(j, j == m - 1);
    }
    optimizer_step();
    instantiate();
  }

 private:
  // ---- units and sizes -------------------------------------------------------------------
  void make_units() {
    const ModelSpec& m = s_.model;
    const ParamCounts pc = count_params(m);
    const std::int64_t tp = s_.parallel.tp;
    // TP shards the weight matrices (vocab-parallel embedding and head, column/row-parallel
    // linears); norms are replicated. Parameters are counted per TP rank.
    auto shard = [&](std::int64_t total, std::int64_t replicated) {
      return (total - replicated + tp - 1) / tp + replicated;
    };
    units_.push_back({WorkKind::EmbedForward, WorkKind::EmbedBackward, -1, shard(pc.embedding, 0),
                      "embedding"});
    for (int l = 0; l < m.num_layers; ++l) {
      units_.push_back({WorkKind::AttentionForward, WorkKind::AttentionBackward, l,
                        shard(pc.attention_block, pc.attention_norm), "attention"});
      units_.push_back({WorkKind::MlpForward, WorkKind::MlpBackward, l,
                        shard(pc.mlp_block, pc.mlp_norm), "mlp"});
    }
    units_.push_back({WorkKind::HeadForward, WorkKind::HeadBackward, -1,
                      shard(pc.output, 0) + pc.final_norm, "head"});
    std::int64_t phi = 0;
    for (const auto& u : units_) phi += u.params;
    out_.local_params = phi;
    const std::int64_t n = s_.parallel.dp;
    out_.dp_partition = (phi + n - 1) / n;
    for (auto k : {WorkKind::EmbedForward, WorkKind::EmbedBackward, WorkKind::AttentionForward,
                   WorkKind::AttentionBackward, WorkKind::MlpForward, WorkKind::MlpBackward,
                   WorkKind::HeadForward, WorkKind::HeadBackward}) {
      work_of_[static_cast<int>(k)] = static_cast<std::int32_t>(t_.works.size());
      t_.works.push_back({k, 0});
    }
    activation_layer_ = activation_bytes_per_layer(m, s_.training.micro_batch_size, tp,
                                                   s_.parallel.sequence_parallel,
                                                   s_.parallel.recompute,
                                                   s_.training.flash_attention);
    activation_layer_full_ = activation_bytes_per_layer(m, s_.training.micro_batch_size, tp,
                                                        s_.parallel.sequence_parallel,
                                                        Recompute::None,
                                                        s_.training.flash_attention);
    const double sb = static_cast<double>(s_.training.micro_batch_size) * m.seq_length;
    // Logits in 16 bits and their fp32 copy for the cross-entropy (Korthikanti et al. 2022,
    // section 4.3 counts the fp32 copy as 4sbv/t), vocab-parallel over TP.
    logits_bytes_ = static_cast<Bytes>(6.0 * sb * m.vocab_size / tp);
    tp_activation_bytes_ = static_cast<Bytes>(2.0 * sb * m.hidden_size);
  }

  // ZeRO paper, section 5: 2 bytes of 16-bit parameters, 2 of 16-bit gradients and K = 12 of
  // fp32 master weights and Adam moments per parameter, partitioned by stage.
  void model_states() {
    const std::int64_t phi = out_.local_params;
    const std::int64_t part = out_.dp_partition;
    const int stage = s_.zero.stage;
    ModelStateBytes& ms = out_.model_states;
    ms.params = 2 * (stage == 3 ? part : phi);
    ms.grads = 2 * (stage >= 2 ? part : phi);
    ms.optimizer_states = 12 * (stage >= 1 ? part : phi);
  }

  void alloc_persistent() {
    const ModelStateBytes& ms = out_.model_states;
    alloc(MemCategory::Params, ms.params, "params");
    alloc(MemCategory::Grads, ms.grads, "grads");
    alloc(MemCategory::OptimizerStates, ms.optimizer_states, "optimizer_states");
    alloc(MemCategory::Buffers, kCudaContextBytes, "cuda_context");
    if (s_.zero.stage == 0) {
      // PyTorch DDP keeps its own bucket buffers beside param.grad (gradient_as_bucket_view
      // defaults to False): a second 16-bit copy of every gradient.
      alloc(MemCategory::Buffers, 2 * out_.local_params, "ddp_buckets");
    }
    if (s_.zero.stage == 3 && s_.zero.contiguous_gradients) {
      alloc(MemCategory::Buffers, 2 * s_.zero.reduce_bucket_size, "ipg_buffer");
    }
  }

  // ---- helpers for emitting template ops ---------------------------------------------------
  std::int32_t alloc(MemCategory c, Bytes bytes, const std::string& name,
                     Stream stream = Stream::Compute, std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Alloc;
    op.stream = stream;
    op.category = c;
    op.bytes = bytes;
    return t_.add(op, "alloc " + name, deps);
  }
  std::int32_t free_op(MemCategory c, Bytes bytes, const std::string& name,
                       Stream stream = Stream::Compute, std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Free;
    op.stream = stream;
    op.category = c;
    op.bytes = bytes;
    return t_.add(op, "free " + name, deps);
  }
  std::int32_t compute(WorkKind k, Phase phase, const std::string& name,
                       std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Compute;
    op.stream = Stream::Compute;
    op.phase = phase;
    op.work = work_of_[static_cast<int>(k)];
    deps.insert(deps.end(), host_waits_.begin(), host_waits_.end());
    host_waits_.clear();
    return t_.add(op, name, deps);
  }
  std::int32_t collective(GroupKind g, CollectiveKind k, Bytes bytes, Stream stream,
                          const std::string& name, std::vector<std::int32_t> deps = {}) {
    TemplateOp op;
    op.kind = OpKind::Collective;
    op.stream = stream;
    op.phase = Phase::Communication;
    op.bytes = bytes;
    op.group = g;
    op.collective = k;
    int gi = static_cast<int>(g);
    op.instance = t_.instances[gi]++;
    t_.instance_info[gi].push_back({k, bytes});
    return t_.add(op, name, deps);
  }
  static std::string layer_name(const Unit& u, const char* pass) {
    return u.layer >= 0 ? std::string(pass) + " " + u.label + " L" + std::to_string(u.layer)
                        : std::string(pass) + " " + u.label;
  }

  // Megatron's tensor-parallel collectives after a block (forward: the row-parallel output;
  // backward: the column-parallel input gradient). With sequence parallelism the all-reduce
  // becomes a reduce-scatter after the block and an all-gather before the next one; both move
  // the same bytes per rank as half an all-reduce each.
  void tp_collectives(std::int32_t after, const std::string& what) {
    if (s_.parallel.tp == 1) return;
    std::int32_t last;
    if (s_.parallel.sequence_parallel) {
      std::int32_t rs = collective(GroupKind::Tp, CollectiveKind::ReduceScatter,
                                   tp_activation_bytes_, Stream::TpComm, "tp reduce_scatter " + what,
                                   {after});
      last = collective(GroupKind::Tp, CollectiveKind::AllGather, tp_activation_bytes_,
                        Stream::TpComm, "tp all_gather " + what, {rs});
    } else {
      last = collective(GroupKind::Tp, CollectiveKind::AllReduce, tp_activation_bytes_,
                        Stream::TpComm, "tp all_reduce " + what, {after});
    }
    host_waits_.push_back(last);
  }

  // ---- ZeRO-3 parameter residency ------------------------------------------------------------
  // The fetch trace of one micro-batch: forward uses of every unit, then backward uses in reverse.
  // For each use, whether the unit must be gathered first and whether it is released after.
  void plan_stage3_residency() {
    const std::size_t u_count = units_.size();
    const ZeroConfig& z = s_.zero;
    persistent_.assign(u_count, false);
    keep_after_forward_.assign(u_count, false);
    for (std::size_t u = 0; u < u_count; ++u) {
      persistent_[u] = units_[u].params <= z.stage3_param_persistence_threshold;
    }
    // A unit is kept gathered from its forward to its backward when the parameters used in
    // between (the later units' forward and backward) stay within stage3_max_reuse_distance.
    std::int64_t between = 0;
    for (std::size_t i = u_count; i-- > 0;) {
      keep_after_forward_[i] = between <= z.stage3_max_reuse_distance;
      between += 2 * units_[i].params;
    }
    // Trace of uses: (unit, is_backward).
    trace_.clear();
    for (std::size_t u = 0; u < u_count; ++u) trace_.push_back({static_cast<int>(u), false});
    for (std::size_t u = u_count; u-- > 0;) trace_.push_back({static_cast<int>(u), true});
    needs_fetch_.assign(trace_.size(), false);
    for (std::size_t k = 0; k < trace_.size(); ++k) {
      auto [u, bwd] = trace_[k];
      needs_fetch_[k] = !persistent_[u] && !(bwd && keep_after_forward_[u]);
    }
    // The pre-hook of use c fetches c and prefetches the following uses that need a fetch, up to
    // stage3_prefetch_bucket_size elements (the last one may overshoot) and within
    // stage3_max_live_parameters. issue_at_[k] is the first use whose pre-hook issues k's fetch.
    issue_at_.assign(trace_.size(), -1);
    for (std::size_t c = 0; c < trace_.size(); ++c) {
      if (needs_fetch_[c] && issue_at_[c] < 0) issue_at_[c] = static_cast<int>(c);
      std::int64_t budget =
          std::min<std::int64_t>(z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters);
      std::int64_t taken = 0;
      for (std::size_t k = c + 1; k < trace_.size() && taken < budget; ++k) {
        if (!needs_fetch_[k]) continue;
        if (issue_at_[k] < 0) issue_at_[k] = static_cast<int>(c);
        taken += units_[trace_[k].first].params;
      }
    }
  }

  // Emits the all-gathers whose fetch is issued at use c's pre-hook; returns nothing, records
  // fetch_op_[k] for each.
  void issue_fetches(std::size_t c, std::int32_t hook_after) {
    const Stream stream = s_.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
    for (std::size_t k = c; k < trace_.size(); ++k) {
      if (issue_at_[k] != static_cast<int>(c)) {
        if (k > c && issue_at_[k] > static_cast<int>(c)) break;
        continue;
      }
      const Unit& u = units_[trace_[k].first];
      const Bytes bytes = 2 * ceil_div(u.params, s_.parallel.dp) * s_.parallel.dp;
      std::int32_t a = alloc(MemCategory::Buffers, 2 * u.params, "gathered " + u.label, stream,
                             {hook_after});
      fetch_op_[k] = collective(GroupKind::Dp, CollectiveKind::AllGather, bytes, stream,
                                layer_name(u, trace_[k].second ? "gather(bwd)" : "gather(fwd)"),
                                {a});
    }
  }

  // ---- forward and backward ----------------------------------------------------------------
  void forward(int j) {
    const bool stage3 = s_.zero.stage == 3;
    if (stage3) fetch_op_.assign(trace_.size(), -1);
    std::int32_t prev = -1;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const Unit& unit = units_[u];
      std::vector<std::int32_t> deps;
      if (stage3) {
        issue_fetches(u, prev);
        if (fetch_op_[u] >= 0) deps.push_back(fetch_op_[u]);
      }
      if (unit.forward == WorkKind::AttentionForward) {
        alloc(MemCategory::Activations, static_cast<Bytes>(activation_layer_), "activations");
      }
      if (unit.forward == WorkKind::HeadForward) {
        alloc(MemCategory::Activations, logits_bytes_, "logits");
      }
      prev = compute(unit.forward, Phase::Forward,
                     layer_name(unit, "fwd") + " mb" + std::to_string(j), deps);
      if (unit.forward != WorkKind::HeadForward) tp_collectives(prev, layer_name(unit, "fwd"));
      if (stage3 && fetch_op_[u] >= 0 && !keep_after_forward_[u]) {
        free_op(MemCategory::Buffers, 2 * unit.params, "gathered " + unit.label);
      }
    }
    last_forward_ = prev;
  }

  void backward(int j, bool boundary) {
    const int stage = s_.zero.stage;
    const bool stage3 = stage == 3;
    const bool hooks_reduce = stage == 2 || stage == 3 ||
                              (stage == 1 && s_.zero.overlap_comm && boundary) ||
                              (stage == 0 && boundary);
    bucket_elements_ = 0;
    bucket_count_ = 0;
    last_reduction_ = -1;
    prev_reduction_ = -1;
    older_reduction_ = -1;
    std::int32_t prev = last_forward_;
    const std::size_t n_units = units_.size();
    bool first_hook = true;
    for (std::size_t i = n_units; i-- > 0;) {
      const Unit& unit = units_[i];
      const std::size_t use = 2 * n_units - 1 - i;  // backward position in the fetch trace
      std::vector<std::int32_t> deps;
      if (stage3) {
        issue_fetches(use, prev);
        if (fetch_op_[use] >= 0) deps.push_back(fetch_op_[use]);
      }
      const bool recompute_full = s_.parallel.recompute == Recompute::Full;
      if (recompute_full && unit.backward == WorkKind::MlpBackward) {
        alloc(MemCategory::Activations, static_cast<Bytes>(activation_layer_full_),
              "recomputed activations");
      }
      if (stage >= 2) {
        // param.grad of this unit exists until the hook copies it into the bucket.
        alloc(MemCategory::Buffers, 2 * unit.params, "param.grad " + unit.label);
      }
      prev = compute(unit.backward, Phase::Backward,
                     layer_name(unit, "bwd") + " mb" + std::to_string(j), deps);
      if (unit.backward != WorkKind::HeadBackward) tp_collectives(prev, layer_name(unit, "bwd"));
      if (unit.backward == WorkKind::HeadBackward) {
        free_op(MemCategory::Activations, logits_bytes_, "logits");
      }
      if (unit.backward == WorkKind::AttentionBackward) {
        free_op(MemCategory::Activations, static_cast<Bytes>(activation_layer_), "activations");
        if (recompute_full) {
          free_op(MemCategory::Activations, static_cast<Bytes>(activation_layer_full_),
                  "recomputed activations");
        }
      }
      if (stage3 && fetch_op_[use] >= 0) {
        free_op(MemCategory::Buffers, 2 * unit.params, "gathered " + unit.label);
      }
      if (stage3 && fetch_op_[use] < 0 && keep_after_forward_[i] && !persistent_[i]) {
        free_op(MemCategory::Buffers, 2 * unit.params, "gathered " + unit.label);
      }
      if (hooks_reduce) {
        if (first_hook) {
          first_hook = false;
          hook_setup(j);
        }
        grad_ready(unit, prev);
      }
      if (stage >= 2) free_op(MemCategory::Buffers, 2 * unit.params, "param.grad " + unit.label);
    }
    if (hooks_reduce) epilogue(j, boundary);
    if (stage == 1 && !s_.zero.overlap_comm && boundary) {
      // Stage 1 without overlap_comm: engine.allreduce_gradients -> reduce_gradients after the
      // backward, bucket by bucket in model order, on the compute stream.
      hook_setup(j);
      for (const Unit& unit : units_) grad_ready(unit, -1);
      epilogue(j, boundary);
    }
    last_backward_ = prev;
  }

  // ---- gradient buckets ----------------------------------------------------------------------
  Stream reduction_stream() const {
    if (s_.zero.stage == 0) return Stream::DpComm;  // DDP's reducer runs on its own NCCL stream
    return s_.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
  }

  void hook_setup(int j) {
    const int stage = s_.zero.stage;
    if ((stage == 1 || stage == 2) && s_.zero.contiguous_gradients) {
      // DeepSpeed's IPG buffer (setup_buckets): reduce_bucket_size 16-bit elements, two of them
      // with overlap_comm (double-buffered).
      if (!(stage == 1 && ipg_allocated_)) {
        ipg_bytes_ = 2 * s_.zero.reduce_bucket_size * (s_.zero.overlap_comm ? 2 : 1);
        alloc(MemCategory::Buffers, ipg_bytes_, "ipg_buffer");
        ipg_allocated_ = true;
      }
    }
    if (stage == 2 && j > 0) {
      // A later micro-batch's partition is reduced into a temporary and added to the first one.
      alloc(MemCategory::Buffers, 2 * out_.dp_partition, "grads_in_partition (accumulate)");
      partition_temp_ = true;
    }
  }

  // Bucket limit in elements: DeepSpeed's reduce_bucket_size; PyTorch DDP's bucket_cap_mb = 25
  // MiB (first bucket 1 MiB) of 16-bit gradients.
  std::int64_t bucket_limit() const {
    if (s_.zero.stage == 0) {
      return (bucket_count_ == 0 ? (1 << 20) : 25 * (1 << 20)) / 2;
    }
    return s_.zero.reduce_bucket_size;
  }

  void grad_ready(const Unit& unit, std::int32_t produced_by) {
    const std::int64_t limit = bucket_limit();
    if (s_.zero.stage == 0) {
      // DDP: a bucket closes once it holds at least its cap; it is reduced when all its
      // gradients are ready, i.e. after the last unit that filled it.
      bucket_elements_ += unit.params;
      if (bucket_elements_ >= limit) flush(produced_by);
      return;
    }
    if (unit.params > limit) {
      flush_elements(unit.params, produced_by);  // too large for the bucket: reduced on its own
      return;
    }
    if (bucket_elements_ + unit.params > limit && bucket_elements_ > 0) flush(produced_by);
    bucket_elements_ += unit.params;
  }

  void flush(std::int32_t produced_by) {
    if (bucket_elements_ == 0) return;
    flush_elements(bucket_elements_, produced_by);
    bucket_elements_ = 0;
  }

  void flush_elements(std::int64_t elements, std::int32_t produced_by) {
    const ZeroConfig& z = s_.zero;
    const Stream stream = reduction_stream();
    CollectiveKind kind;
    std::string what;
    if (z.stage == 0) {
      kind = CollectiveKind::AllReduce;
      what = "ddp all_reduce";
    } else if (z.stage == 3) {
      kind = z.reduce_scatter ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
      what = z.reduce_scatter ? "grad reduce_scatter" : "grad all_reduce";
    } else {
      // Stages 1/2 (average_tensor): with reduce_scatter and use_multi_rank_bucket_allreduce
      // (DeepSpeed >= 0.12 defaults) one all-reduce of the whole bucket; without it one reduce
      // per owning rank, which moves what a reduce-scatter moves.
      bool all_reduce = !z.reduce_scatter || z.use_multi_rank_bucket_allreduce;
      kind = all_reduce ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
      what = all_reduce ? "grad all_reduce" : "grad reduce (to owners)";
    }
    std::vector<std::int32_t> deps;
    if (produced_by >= 0) deps.push_back(produced_by);
    std::int32_t red = collective(GroupKind::Dp, kind, 2 * elements, stream,
                                  what + " #" + std::to_string(bucket_count_), deps);
    ++bucket_count_;
    if (stream == Stream::DpComm && z.stage != 0) {
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

  void epilogue(int j, bool boundary) {
    flush(-1);
    const int stage = s_.zero.stage;
    (void)j;
    if (last_reduction_ >= 0 && reduction_stream() == Stream::DpComm && stage != 0) {
      host_waits_.push_back(last_reduction_);  // accelerator synchronize in the epilogue
    }
    if ((stage == 1 && boundary) || stage == 2) {
      if (ipg_allocated_) {
        free_op(MemCategory::Buffers, ipg_bytes_, "ipg_buffer", reduction_stream());
        ipg_allocated_ = false;
      }
    }
    if (partition_temp_) {
      free_op(MemCategory::Buffers, 2 * out_.dp_partition, "grads_in_partition (accumulate)",
              reduction_stream());
      partition_temp_ = false;
    }
    if (stage == 0) final_ddp_reduction_ = last_reduction_;
  }

  // ---- optimizer step ----------------------------------------------------------------------
  void optimizer_step() {
    const int stage = s_.zero.stage;
    const std::int64_t elements = stage == 0 ? out_.local_params : out_.dp_partition;
    std::vector<std::int32_t> deps;
    if (final_ddp_reduction_ >= 0) deps.push_back(final_ddp_reduction_);
    // fp32 gradients handed to the optimizer for the step: stage 0 upcasts every gradient;
    // stages 1/2 flatten the averaged 16-bit partition (2 bytes) and upcast it (4 bytes); stage
    // 3 does the same per sub-group of at most sub_group_size (1e9) elements.
    Bytes temp = stage == 0 ? 4 * elements
                            : 6 * (stage == 3 ? std::min<std::int64_t>(elements, 1'000'000'000)
                                              : elements);
    std::int32_t a = alloc(MemCategory::Buffers, temp, "fp32 step gradients", Stream::Compute, deps);
    std::int32_t w = static_cast<std::int32_t>(t_.works.size());
    t_.works.push_back({WorkKind::OptimizerStep, elements});
    TemplateOp op;
    op.kind = OpKind::Compute;
    op.phase = Phase::Optimizer;
    op.work = w;
    std::vector<std::int32_t> step_deps = {a};
    step_deps.insert(step_deps.end(), host_waits_.begin(), host_waits_.end());
    host_waits_.clear();
    std::int32_t step = t_.add(op, "optimizer step", step_deps);
    free_op(MemCategory::Buffers, temp, "fp32 step gradients");
    if (stage == 1 || stage == 2) {
      // all_gather_dp_groups: one all_gather_into_tensor of the whole 16-bit flat buffer
      // (allgather_bucket_size is unused with current PyTorch), synchronous.
      collective(GroupKind::Dp, CollectiveKind::AllGather, 2 * out_.dp_partition * s_.parallel.dp,
                 Stream::Compute, "param all_gather", {step});
    }
    if (stage == 3) {
      std::int64_t persistent = 0;
      for (std::size_t u = 0; u < units_.size(); ++u) {
        if (persistent_[u]) persistent += units_[u].params;
      }
      if (persistent > 0) {
        collective(GroupKind::Dp, CollectiveKind::AllGather,
                   2 * ceil_div(persistent, s_.parallel.dp) * s_.parallel.dp,
                   Stream::Compute, "persistent param all_gather", {step});
      }
    }
  }

  // ---- instantiation over ranks ------------------------------------------------------------
  void instantiate() {
    const int tp = s_.parallel.tp, dp = memory_only_ ? 1 : s_.parallel.dp;
    const int ranks = tp * dp;
    Plan& plan = out_.plan;
    plan.num_ranks = ranks;
    plan.names = t_.names;
    out_.works = t_.works;
    // Megatron's rank order: tensor-parallel ranks are adjacent (inside a node), then data.
    // DP group g (one per TP index) holds ranks g, g + tp, ...; TP group d holds d*tp .. d*tp+tp-1.
    std::int32_t group_base[3] = {0, 0, 0};
    group_base[0] = 0;
    for (int g = 0; g < tp; ++g) {
      for (int d = 0; d < dp; ++d) plan.group_ranks.push_back(d * tp + g);
      plan.group_begin.push_back(static_cast<std::uint32_t>(plan.group_ranks.size()));
      plan.group_names.push_back("dp" + std::to_string(g));
      out_.group_kind.push_back(GroupKind::Dp);
    }
    group_base[1] = tp;
    for (int d = 0; d < dp; ++d) {
      for (int g = 0; g < tp; ++g) plan.group_ranks.push_back(d * tp + g);
      plan.group_begin.push_back(static_cast<std::uint32_t>(plan.group_ranks.size()));
      plan.group_names.push_back("tp" + std::to_string(d));
      out_.group_kind.push_back(GroupKind::Tp);
    }
    // Collectives: for each group of each kind, one per template instance of that kind.
    std::vector<std::uint32_t> coll_base(plan.num_groups());
    for (int g = 0; g < plan.num_groups(); ++g) {
      int gk = static_cast<int>(out_.group_kind[g]);
      coll_base[g] = static_cast<std::uint32_t>(plan.collectives.size());
      for (int i = 0; i < t_.instances[gk]; ++i) {
        Collective c;
        c.kind = t_.instance_info[gk][i].first;
        c.bytes = t_.instance_info[gk][i].second;
        c.group = g;
        c.member_count = static_cast<std::uint32_t>(plan.group_size(g));
        c.member_begin = static_cast<std::uint32_t>(plan.members.size());
        plan.members.resize(plan.members.size() + c.member_count, kNoOp);
        plan.collectives.push_back(c);
      }
    }
    const std::size_t per_rank = t_.ops.size();
    plan.ops.reserve(per_rank * ranks);
    plan.deps.reserve(t_.deps.size() * ranks);
    for (int r = 0; r < ranks; ++r) {
      const OpId base = static_cast<OpId>(plan.ops.size());
      const int tp_idx = r % tp, dp_idx = r / tp;
      const int group_of[2] = {group_base[0] + tp_idx, group_base[1] + dp_idx};
      const int position[2] = {dp_idx, tp_idx};
      for (const TemplateOp& top : t_.ops) {
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
          plan.deps.push_back(base + static_cast<OpId>(t_.deps[top.dep_begin + i]));
        }
        if (top.kind == OpKind::Collective) {
          int gk = static_cast<int>(top.group);
          int g = group_of[gk];
          std::uint32_t c = coll_base[g] + static_cast<std::uint32_t>(top.instance);
          op.work = static_cast<std::int32_t>(c);
          plan.members[plan.collectives[c].member_begin + position[gk]] =
              static_cast<OpId>(plan.ops.size());
        }
        plan.ops.push_back(op);
      }
    }
  }

  const Scenario& s_;
  TrainingPlan& out_;
  bool memory_only_ = false;
  Template t_;
  std::vector<Unit> units_;
  std::int32_t work_of_[9] = {};
  double activation_layer_ = 0, activation_layer_full_ = 0;
  Bytes logits_bytes_ = 0, tp_activation_bytes_ = 0;
  std::vector<std::int32_t> host_waits_;
  std::int32_t last_forward_ = -1, last_backward_ = -1;
  // stage 3
  std::vector<bool> persistent_, keep_after_forward_, needs_fetch_;
  std::vector<std::pair<int, bool>> trace_;
  std::vector<int> issue_at_;
  std::vector<std::int32_t> fetch_op_;
  // buckets
  std::int64_t bucket_elements_ = 0;
  int bucket_count_ = 0;
  std::int32_t last_reduction_ = -1, prev_reduction_ = -1, older_reduction_ = -1;
  std::int32_t final_ddp_reduction_ = -1;
  bool ipg_allocated_ = false, partition_temp_ = false;
  Bytes ipg_bytes_ = 0;
};

}  // namespace

TrainingPlan build_training_plan(const Scenario& s, bool memory_only) {
  TrainingPlan out;
  StepBuilder(s, out, memory_only).build();
  return out;
}

}  // namespace zerosim
