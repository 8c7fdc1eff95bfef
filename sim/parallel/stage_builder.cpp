#include "sim/parallel/stage_builder.h"

#include <algorithm>

#include "sim/cluster/gpu_generation.h"
#include "sim/model/moe_routing.h"
#include "sim/parallel/schedules.h"
#include "sim/scenario/expert_layout.h"

namespace zerosim::plan_detail {

void stage_states(const Scenario& s, const std::vector<std::vector<Unit>>& chunks,
                  const GradientPolicy& grads, StagePlan& info) {
  std::int64_t phi = 0, experts = 0, layer_dense = 0;
  for (const auto& chunk : chunks) {
    for (const Unit& u : chunk) {
      phi += u.params;
      experts += u.expert_params;
      if (u.layer >= 0) layer_dense += u.params - u.expert_params;
      if (u.forward == WorkKind::AttentionForward) ++info.layers;
    }
  }
  info.local_params = phi;
  // MiCS / HYBRID_SHARD partition the model states over the shard group only.
  info.dp_partition = ceil_div(phi, s.zero.mics_shard_size > 0 ? dp_subgroup_size(s)
                                                                : s.parallel.dp_cp());
  if (s.parallel.ep > 1) {
    // Experts over the expert-data-parallel group, the rest over the DP group.
    info.expert_partition = ceil_div(experts, s.expert_dp());
    info.dp_partition = ceil_div(phi - experts, s.parallel.dp_cp()) + info.expert_partition;
  }
  if (s.fp8_params_gathered_after_step()) {
    info.fp8_partition = ceil_div(layer_dense, s.parallel.dp_cp());
  }
  // ZeRO paper, section 5: 2 bytes of 16-bit parameters, 2 of 16-bit gradients and K = 12 of
  // fp32 master weights and Adam moments per parameter (fewer with Megatron-core's
  // precision-aware optimizer), partitioned by stage.
  const int zs = s.zero.stage;
  info.model_states.params = 2 * (zs == 3 ? info.dp_partition : phi);
  info.model_states.grads = grads.bytes_per_element * (zs >= 2 ? info.dp_partition : phi);
  info.model_states.optimizer_states =
      s.optimizer_state_bytes_per_param() * (zs >= 1 ? info.dp_partition : phi);
  // ZeRO-Offload moves the fp32 master weights, the Adam moments and (stages 2/3) the gradient
  // partition to the host; offload_param moves the stage-3 16-bit partition there too.
  if (offloads_optimizer(s)) {
    info.model_states.optimizer_states = 0;
    if (zs >= 2) info.model_states.grads = 0;
  }
  if (offloads_params(s)) info.model_states.params = 0;
  offload_memory(s, info);
}

StageBuilder::StageBuilder(const Scenario& s, int stage, std::vector<std::vector<Unit>> chunks,
                           PlanTables tables, StagePlan& info)
    : s_(s),
      stage_(stage),
      chunks_(std::move(chunks)),
      info_(info),
      dp_subgroup_(dp_subgroup_size(s)),
      policy_(framework_policy(s, stage)),
      e_(tables),
      offload_(e_, s, policy_.grads, dp_subgroup_),
      zero3_(e_, s, chunks_, dp_subgroup_, policy_.params, offload_),
      grads_(e_, s, policy_.grads, info, dp_subgroup_, offload_),
      params_(e_, s, policy_, info, dp_subgroup_) {}

Template StageBuilder::build() {
  stage_states(s_, chunks_, policy_.grads, info_);
  const ModelSpec& m = s_.model;
  const std::int64_t tp = s_.parallel.tp;
  const std::int64_t cp = s_.parallel.cp;
  auto tensors = [&](Recompute r, bool moe) {
    return activation_tensors_per_layer(m, s_.training.micro_batch_size, tp,
                                        s_.parallel.sequence_parallel, r,
                                        s_.training.flash_attention, moe, cp, s_.expert_tp(),
                                        s_.parallel.recompute_modules,
                                        s_.fp8_linear_inputs_saved(), policy_.layer.saves);
  };
  layer_tensors_ = tensors(s_.parallel.recompute, false);
  layer_tensors_full_ = tensors(Recompute::None, false);
  if (m.is_moe()) {
    moe_layer_tensors_ = tensors(s_.parallel.recompute, true);
    moe_layer_tensors_full_ = tensors(Recompute::None, true);
  }
  if (s_.parallel.cpu_checkpointing) {
    // The host holds every layer's checkpoint (this rank's share of it, partitioned) of the
    // micro-batch in flight (no pipeline stages).
    for (const auto& chunk : chunks_) {
      for (const Unit& u : chunk) {
        if (u.forward != WorkKind::AttentionForward) continue;
        info_.host_bytes += checkpoint_partition(u.layer);
      }
    }
  }
  if (splits_backward(s_)) {
    // W computes each GEMM's weight gradient from the GEMM's input and its output's gradient
    // (both 16-bit, at the shapes the GEMM runs): 16 s b h elements for a GPT layer without
    // TP, 32 s b h bytes against the 34 s b h its saved activations take (Korthikanti et al.
    // 2022), which is why ZB-H1 stays within 1F1B's memory (Qi et al., ICLR 2024, section 2.1).
    // ASSUMPTION: under sequence parallelism the gathered inputs are kept whole.
    // Under FP8 (a block's GEMMs all run in FP8, work_kernels.cpp run_in_fp8), Transformer
    // Engine's linears defer their weight gradient with the quantized input and output gradient
    // the wgrad GEMM reads (linear.py, grouped_linear.py: wgrad_store holds both), one byte per
    // element; ASSUMPTION: the recipes' scales beside them (one per 32 or 128 elements, 3 %
    // more) are not counted, as for the saved inputs.
    const double element = s_.fp8_linear_inputs_saved() ? 1.0 : 2.0;
    auto held = [element](const LayerWork& w, bool attention) {
      double bytes = 0;
      for (std::size_t g = 0; g < w.gemms.size(); ++g) {
        if ((g < w.attention_gemms) != attention) continue;
        const Gemm& x = w.gemms[g];
        bytes += element * static_cast<double>(x.count) * static_cast<double>(x.m) *
                 static_cast<double>(x.k + x.n);
      }
      return static_cast<Bytes>(bytes);
    };
    const LayerWork dense = layer_work(s_, false);
    weight_grad_attention_ = held(dense, true);
    weight_grad_mlp_ = held(dense, false);
    if (m.is_moe()) weight_grad_moe_ = held(layer_work(s_, true), false);
  }
  const double sb = s_.micro_batch_tokens();
  // The cross-entropy's logits, vocab-parallel over TP: what the framework's loss saves for
  // backward and what lives beside it in its forward and backward (framework_policy.h).
  const double logits = sb * m.vocab_size / tp;
  const MemoryPolicy& mem = policy_.memory;
  // Each MTP module's loss keeps its own logits' share (Megatron-core computes them one after
  // another, each through the fused cross-entropy).
  logits_saved_ = static_cast<Bytes>(mem.logits_saved * logits *
                                     static_cast<double>(1 + m.mtp_num_layers));
  for (int b : mem.logits_forward_temporaries) {
    loss_forward_temporaries_.push_back(static_cast<Bytes>(b * logits));
  }
  for (int b : mem.logits_backward_temporaries) {
    loss_backward_temporaries_.push_back(static_cast<Bytes>(b * logits));
  }
  tp_activation_bytes_ = static_cast<Bytes>(2.0 * sb * m.hidden_size);
  // The same tokens gathered in FP8, with the recipe's scales.
  tp_fp8_gather_bytes_ = static_cast<Bytes>(fp8_bytes_per_element(s_.training.fp8_recipe) * sb *
                                            m.hidden_size);
  // An MTP module's own saved inputs, 16-bit: the next tokens' embedding rows (enorm's input),
  // hnorm's input, eh_proj's [2h] input and the final norm's input, 5 x s b h, each split over
  // TP under sequence parallelism. ASSUMPTION: kept whatever the recompute setting (Megatron
  // recomputes the MTP layer with the decoder's, not these).
  mtp_activations_ = static_cast<Bytes>(
      2.0 * 5.0 * sb * m.hidden_size / (s_.parallel.sequence_parallel ? s_.parallel.tp : 1));
  // Expert parallelism: each rank sends its tokens' top_k copies (16-bit hidden vectors) to the
  // ranks of their experts, and gets as many back; the busiest rank's share scales with the
  // routing imbalance. With TP and sequence parallelism each TP rank dispatches its 1 / tp of
  // the tokens, and the TP group then gathers what its experts received (top_k times a dense
  // block's TP collectives: Megatron-core's all-to-all dispatcher with expert TP = TP). With
  // expert TP 1 and the EP groups across TP the all-to-all alone moves the routed tokens; only
  // the shared experts, split as the dense MLP is, keep a dense block's TP collectives.
  //
  // The flex dispatcher (DeepEP's normal kernels, expert TP 1) sends a token once to each other
  // node its experts are on, to the rank at its own place there (the network half, one rank per
  // node), which forwards it once to each rank of its node that holds one of them (the NVLink
  // half); a rank thus forwards, for each of the nodes (its own included), the tokens that hit
  // each of its node's other ranks. The combine goes back the same way, summed on the way. The
  // chance a token hits a node or a rank follows the routing (moe_routing.h).
  if (s_.parallel.ep > 1) {
    expert_exchanges_ = true;
    const double routed_tokens = sb * m.hidden_size * s_.training.moe_load_imbalance /
                                 (s_.parallel.sequence_parallel ? tp : 1);
    ep_all_to_all_bytes_ =
        static_cast<Bytes>(2.0 * routed_tokens * static_cast<double>(m.moe.top_k));
    flex_ = flex_dispatch(s_);
    if (flex_) {
      const EpNodeSplit split = *ep_node_split(s_);
      const std::int64_t rank_experts = m.moe.num_experts / s_.parallel.ep;
      const double hits_node = unit_hit_probability(m.moe, rank_experts * split.per_node);
      const double hits_rank = unit_hit_probability(m.moe, rank_experts);
      if (split.nodes > 1) ep_rail_per_byte_ = split.nodes * routed_tokens * hits_node;
      if (split.per_node > 1) {
        ep_node_per_byte_ = split.per_node * split.nodes * routed_tokens * hits_rank;
      }
    }
    moe_tp_activation_bytes_ = s_.experts_span_tp()
                                   ? (m.moe.shared_ffn_hidden_size > 0 ? tp_activation_bytes_ : 0)
                                   : tp_activation_bytes_ * m.moe.top_k;
  } else {
    moe_tp_activation_bytes_ = tp_activation_bytes_;
  }
  // Context parallelism: each rank's keys and values (16-bit, its s / cp tokens, its TP share of
  // the KV heads; MLA's decompressed per-head keys and values), gathered from all cp ranks.
  if (cp > 1) {
    const double kv_width =
        m.is_mla() ? static_cast<double>(m.qk_width() + m.v_width()) / tp
                   : 2.0 * static_cast<double>(std::max<std::int64_t>(1, m.num_kv_heads / tp)) *
                         static_cast<double>(m.head_dim());
    // With a2a+p2p the ring runs over the p2p level after the a2a: each rank then holds a2a
    // times the tokens of 1 / a2a of the heads, the same bytes, gathered from cp / a2a ranks.
    cp_kv_bytes_ = static_cast<Bytes>(2.0 * sb * kv_width *
                                      static_cast<double>(cp / s_.parallel.cp_a2a_degree()));
    // a2a (Ulysses): the all-to-alls trade each rank's tokens of all its heads for all tokens of
    // 1 / cp of its heads, a buffer of the rank's own size: its queries, keys and values (the
    // gradients' going back), and its attention output.
    const double q_width = static_cast<double>(m.qk_width()) / tp;
    const double o_width = static_cast<double>(m.v_width()) / tp;
    cp_qkv_bytes_ = static_cast<Bytes>(2.0 * sb * (q_width + kv_width));
    cp_out_bytes_ = static_cast<Bytes>(2.0 * sb * o_width);
  }
  // Between pipeline stages: the s x b x h activation in 16 bits, split by TP with sequence
  // parallelism, or by the scatter-gather of Megatron-LM's and DeepSpeed's pipelines without it
  // (the receiver then all-gathers it, passes.cpp).
  const bool split_over_tp =
      s_.parallel.sequence_parallel || s_.splits_pipeline_tensors_over_tp();
  p2p_bytes_ = static_cast<Bytes>(2.0 * sb * m.hidden_size / (split_over_tp ? tp : 1));
  allocate_states();

  const std::vector<PassStep> steps = pipeline_schedule(s_, stage_);
  // The pass that hands a (micro-batch, chunk)'s gradients to the hooks: its backward, or the W
  // of a split one. The last of each chunk is that chunk's accumulation boundary.
  auto gives_gradients = [](const PassStep& st) {
    return !st.forward && st.part != BackwardPart::Input;
  };
  std::vector<int> remaining_backward(chunks_.size(), 0);
  for (const PassStep& st : steps) {
    if (gives_gradients(st)) ++remaining_backward[st.chunk];
  }
  int backwards_left = 0;
  for (int r : remaining_backward) backwards_left += r;
  // A pass's receive is posted after the pass before it. With overlap_p2p_comm Megatron posts it
  // with the send of the previous pass of its direction: after a forward the next forward's
  // input, after a backward the next backward's gradient, and at the end of the warm-up the first
  // backward's; where the pass before is of the other direction, that is the one before it,
  // whose compute the transfer then overlaps. When every forward precedes the first backward
  // (no steady state), that backward's receive is a blocking one after the last forward.
  std::size_t first_backward = steps.size(), last_forward = 0;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (!steps[k].forward && first_backward == steps.size()) first_backward = k;
    if (steps[k].forward) last_forward = k;
  }
  // A schedule that says where each receive goes (ZB-V) names a pass: the op that ends it.
  const std::int32_t start = last_compute_;
  std::vector<std::int32_t> end_of_step(steps.size(), start);
  std::int32_t end_before_previous = last_compute_;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const PassStep& st = steps[k];
    const std::int32_t end_of_previous = last_compute_;
    const bool early = s_.parallel.overlap_p2p_comm && k >= 2 &&
                       steps[k - 1].forward != st.forward &&
                       !(k == first_backward && last_forward < k);
    recv_after_ = early ? end_before_previous : end_of_previous;
    if (st.receive_after == PassStep::kAtStart) recv_after_ = start;
    if (st.receive_after >= 0) recv_after_ = end_of_step[static_cast<std::size_t>(st.receive_after)];
    if (st.combined_with_next) {
      const PassStep& b = steps[++k];
      --backwards_left;
      const bool last_of_chunk = --remaining_backward[b.chunk] == 0;
      combined_pass(st, b, last_of_chunk, backwards_left == 0);
    } else if (st.forward) {
      forward_pass(st.mb, st.chunk);
    } else if (st.part == BackwardPart::Input) {
      backward_pass(st.mb, st.chunk, BackwardPart::Input, false, false);
    } else {
      --backwards_left;
      bool last_of_chunk = --remaining_backward[st.chunk] == 0;
      if (st.part == BackwardPart::Weight) {
        weight_pass(st.mb, st.chunk, last_of_chunk, backwards_left == 0);
      } else {
        backward_pass(st.mb, st.chunk, BackwardPart::Whole, last_of_chunk, backwards_left == 0);
      }
    }
    end_of_step[k] = last_compute_;
    end_before_previous = end_of_previous;
  }
  optimizer_step();
  return e_.take();
}

// What a rank allocates before its first pass: model states, the cuBLAS workspace, the
// framework's gradient buffers, and with stage 3 the parameters that stay gathered. (The CUDA
// context and NCCL's buffers live outside the caching allocator: sim/run adds them.)
void StageBuilder::allocate_states() {
  const GradientPolicy& g = policy_.grads;
  e_.alloc(MemCategory::Params, info_.model_states.params, "params");
  e_.alloc(MemCategory::Grads, info_.model_states.grads, "grads");
  e_.alloc(MemCategory::OptimizerStates, info_.model_states.optimizer_states, "optimizer_states");
  // One workspace for the compute stream, the only stream that runs GEMMs (autograd runs a
  // backward op on its forward op's stream).
  e_.alloc(MemCategory::Buffers,
           generation_constants(s_.cluster.gpu.generation).cublas_workspace_bytes,
           "cublas_workspace");
  if (g.bucket_copy) e_.alloc(MemCategory::Buffers, 2 * info_.local_params, "ddp_buckets");
  if (s_.training.precision == Precision::Fp8 && s_.zero.stage < 3 &&
      !s_.fp8_params_gathered_after_step()) {
    // Transformer Engine caches each layer weight in FP8 and its transpose (for the backward's
    // GEMMs) across the micro-batches of a step: 2 bytes per parameter of the layer blocks.
    // With FP8 parameters (Megatron's --fp8-param-gather) those are the weights themselves, in
    // the 2 bytes per parameter the 16-bit weights would take.
    std::int64_t layer_params = 0;
    for (const auto& chunk : chunks_) {
      for (const Unit& u : chunk) {
        if (u.layer >= 0) layer_params += u.params;
      }
    }
    e_.alloc(MemCategory::Buffers, 2 * layer_params, "fp8 weight copies");
  }
  if (g.stage3_bucket_buffer) {
    e_.alloc(MemCategory::Buffers, 2 * s_.zero.reduce_bucket_size, "ipg_buffer");
  }
  forwards_done_.assign(chunks_.size(), 0);
  backwards_done_.assign(chunks_.size(), 0);
  if (s_.zero.stage != 3) return;
  zero3_.plan();
  // Persistent parameters stay gathered: a full 16-bit copy beside the partition.
  const Bytes persistent = zero3_.persistent_bytes();
  if (persistent > 0) e_.alloc(MemCategory::Buffers, persistent, "persistent params");
  if (s_.zero.hpz_partition_size > 1 && s_.zero.mics_shard_size <= 0) {
    e_.alloc(MemCategory::Params, zero3_.hpz_secondary_bytes(), "hpz secondary partition");
  }
}

StageBuilder::PipeLinks StageBuilder::pipe_links(int chunk) const {
  const int pp = s_.parallel.pp;
  const bool first = stage_ == 0, last = stage_ == pp - 1;
  if (s_.second_chunk_returns() && chunk == 1) {
    return {last ? std::nullopt : std::optional(Peer::BackRecvNext),
            first ? std::nullopt : std::optional(Peer::BackSendPrev),
            first ? std::nullopt : std::optional(Peer::BackRecvPrev),
            last ? std::nullopt : std::optional(Peer::BackSendNext)};
  }
  // The model's first virtual stage, and its last (with DualPipe's placements, the end of chunk
  // 0: the loss of one copy, or the turn of the V, in place).
  const bool model_start = first && chunk == 0;
  const bool model_end =
      last && (s_.second_chunk_returns() || chunk == static_cast<int>(chunks_.size()) - 1);
  return {model_start ? std::nullopt : std::optional(Peer::RecvPrev),
          model_end ? std::nullopt : std::optional(Peer::SendNext),
          model_end ? std::nullopt : std::optional(Peer::RecvNext),
          model_start ? std::nullopt : std::optional(Peer::SendPrev)};
}

std::string StageBuilder::pass_suffix(int mb, int chunk) const {
  std::string s = " mb" + std::to_string(mb);
  if (chunks_.size() > 1) s += " c" + std::to_string(chunk);
  return s;
}

void StageBuilder::optimizer_step() {
  const int zs = s_.zero.stage;
  const std::int64_t elements = zs == 0 ? info_.local_params : info_.dp_partition;
  const std::vector<std::int64_t> persistent =
      zs == 3 ? zero3_.persistent_tensors() : std::vector<std::int64_t>{};
  std::vector<std::int32_t> deps;
  if (grads_.final_reduction() >= 0) deps.push_back(grads_.final_reduction());
  if (offloads_optimizer(s_)) {
    const Offload::StepEnd end = offload_.step(elements, deps);
    params_.after_step(end.ready, end.gather_stream, persistent);
    return;
  }
  // What the framework's step allocates (framework_policy.h: fp32 gradients, Adam temporaries).
  const MemoryPolicy& mem = policy_.memory;
  const Bytes temp =
      mem.step_bytes_per_element *
      (mem.step_per_subgroup ? std::min<std::int64_t>(elements, 1'000'000'000) : elements);
  std::vector<std::int32_t> step_deps = deps;
  if (temp > 0) {
    step_deps = {e_.alloc(MemCategory::Buffers, temp, "fp32 step gradients", Stream::Compute, deps)};
  }
  for (std::int32_t w : e_.take_host_waits()) step_deps.push_back(w);
  const std::int32_t step = e_.work_op(OpKind::Compute, {WorkKind::OptimizerStep, elements, 0},
                                       Stream::Compute, Phase::Optimizer, "optimizer step", step_deps);
  if (temp > 0) e_.free_op(MemCategory::Buffers, temp, "fp32 step gradients");
  params_.after_step(step, Stream::Compute, persistent);
}

}  // namespace zerosim::plan_detail
