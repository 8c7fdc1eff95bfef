// The forward and backward passes of one stage over one (micro-batch, chunk): pipeline receives
// and sends, the compute of each unit with its tensor-parallel collectives, activation
// allocations, ZeRO-3 gathers and releases, and the backward hooks that feed the gradient buckets.
#include "sim/parallel/stage_builder.h"

namespace zerosim::plan_detail {

void StageBuilder::tp_collectives(std::int32_t after, const std::string& what, const Unit& u,
                                  bool backward) {
  // Megatron's tensor-parallel collectives after a block (forward: the row-parallel output;
  // backward: the column-parallel input gradient); with sequence parallelism a reduce-scatter
  // after the block and an all-gather before the next, each moving half an all-reduce. With
  // --tp-comm-overlap the caller passes the op before the block (tp_after), so they run beside
  // it; the next block waits for them either way.
  // (An MoE block whose EP groups span TP has none: bytes 0.)
  if (s_.parallel.tp == 1 || tp_bytes_of(u) == 0) return;
  const bool sp = s_.parallel.sequence_parallel;
  // In backward the block's input linear gathers its saved input shard first, for its wgrad.
  if (sp && backward && regathers_input(u)) after = tp_input_gather(after, what, u);
  std::int32_t last = tp_reduction(after, what, u);
  if (sp) {
    last = e_.collective(Peer::Tp, CollectiveKind::AllGather, tp_gather_bytes_of(u, backward),
                         Stream::TpComm, "tp all_gather " + what, {last});
  }
  e_.host_wait(last);
}

std::int32_t StageBuilder::tp_input_gather(std::int32_t after, const std::string& what,
                                           const Unit& u) {
  return e_.collective(Peer::Tp, CollectiveKind::AllGather, tp_gather_bytes_of(u, false),
                       Stream::TpComm, "tp all_gather input " + what, {after});
}

std::int32_t StageBuilder::tp_reduction(std::int32_t after, const std::string& what,
                                        const Unit& u) {
  const bool sp = s_.parallel.sequence_parallel;
  return e_.collective(Peer::Tp, sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce,
                       tp_bytes_of(u), Stream::TpComm,
                       std::string(sp ? "tp reduce_scatter " : "tp all_reduce ") + what, {after});
}

// Expert parallelism (Megatron-core's all-to-all token dispatcher, DeepSpeed-MoE): around the
// experts, an all-to-all sends each token to its experts' ranks (dispatch) and one brings the
// results back (combine), each waited for on the compute stream. The block's compute op stands
// for router, experts and combine together, so the exchanges follow it: the same time on the
// critical path, as nothing overlaps them. Exchanges in a row (2 per forward, 2 per backward, 4
// in a backward that recomputes the forward) move their bytes between the same ranks one after
// the other, so they are played as one all-to-all of their summed bytes: the same flows on the
// same links, with one NCCL latency instead of several (tens of microseconds per layer) and a
// fraction of the simulation's work.
std::int32_t StageBuilder::expert_all_to_alls(std::int32_t after,
                                              std::initializer_list<Exchange> exchanges,
                                              const std::string& what) {
  return expert_traffic(after, exchanges, Stream::Compute,
                        "ep all_to_all (dispatch + combine" +
                            std::string(exchanges.size() > 2 ? ", twice" : "") + ") " + what);
}

// One exchange of an MoE layer under the combined 1F1B schedule: on the all-to-all stream, after
// `after`; the block that needs it waits for it (combined_pass).
std::int32_t StageBuilder::expert_exchange(std::int32_t after, Exchange which,
                                           const std::string& what) {
  const bool dispatch = which == Exchange::Dispatch || which == Exchange::DispatchBackward;
  return expert_traffic(after, {which}, Stream::EpComm,
                        "ep all_to_all (" + std::string(dispatch ? "dispatch" : "combine") + ") " +
                            what);
}

std::int32_t StageBuilder::expert_traffic(std::int32_t after,
                                          std::initializer_list<Exchange> exchanges,
                                          Stream stream, const std::string& name) {
  if (!flex_) {
    return e_.collective(Peer::Ep, CollectiveKind::AllToAll,
                         static_cast<Bytes>(exchanges.size()) * ep_all_to_all_bytes_, stream,
                         name, {after});
  }
  // The flex dispatcher's bytes per element: its dispatch and its combine's backward in their
  // wire dtypes, the combine and the dispatch's backward in bf16 (DeepEP's combine).
  double width = 0;
  const ParallelConfig& p = s_.parallel;
  for (Exchange x : exchanges) {
    width += x == Exchange::Dispatch          ? wire_bytes_per_element(p.moe_dispatch_fwd_dtype)
             : x == Exchange::CombineBackward ? wire_bytes_per_element(p.moe_combine_bwd_dtype)
                                              : 2.0;
  }
  std::int32_t node = -1, rail = -1;
  if (ep_node_per_byte_ > 0) {
    node = e_.collective(Peer::EpNode, CollectiveKind::AllToAll,
                         static_cast<Bytes>(ep_node_per_byte_ * width), Stream::EpForward,
                         name + " nvlink", {after});
  }
  if (ep_rail_per_byte_ > 0) {
    rail = e_.collective(Peer::EpRail, CollectiveKind::AllToAll,
                         static_cast<Bytes>(ep_rail_per_byte_ * width), stream,
                         name + " network", {after});
  }
  if (rail < 0) return node;
  if (node >= 0) e_.host_wait(node);
  return rail;
}

std::int32_t StageBuilder::flush_exchange(QueuedExchange& q) {
  const std::int32_t op = expert_exchange(q.after, q.which, q.what);
  q.after = -1;
  return op;
}

// Context parallelism (Megatron-core's context_parallel attention). p2p, ring attention: the cp
// ranks pass their key/value chunks around the ring, cp - 1 steps that each send one chunk, the
// traffic of a ring all-gather of all of them, on a stream of its own while the attention
// computes (the block waits for the later of the two); its backward passes the keys and values
// again and reduce-scatters their gradients (dK, dV) the same way. all_gather: the keys and
// values gathered before the attention, waited for, and in backward their gradients
// reduce-scattered after it. A backward that recomputes the forward exchanges the keys and
// values once more. a2a (Ulysses: Transformer Engine's AttnFuncWithCPAndQKVOA2A, DeepSpeed's
// DistributedAttention): all-to-alls on the compute stream, waited for; forward, the queries,
// keys and values before the attention and its output after it; backward, the output's gradient
// (with Transformer Engine the output too) before and the gradients of the queries, keys and
// values after; a backward that recomputes the forward runs the forward's two first. a2a+p2p
// (Transformer Engine's AttnFuncWithCPAndKVP2P given an a2a and a p2p group): the a2a level's
// all-to-alls as a2a's, the output's gradient alone before the backward (the output is saved
// after its all-to-all), around the ring of the p2p level, whose keys and values are the
// all-to-all's (a2a times the tokens of 1 / a2a of the heads); the all-to-alls after the
// attention wait for the ring.
std::int32_t StageBuilder::context_exchange_before(bool backward, std::int32_t prev,
                                                   const std::string& what) {
  const ParallelConfig& p = s_.parallel;
  const bool recompute = backward && p.recompute == Recompute::Full;
  std::int32_t last = prev;
  if (p.cp_a2a_degree() > 1) {
    const auto all_to_all = [&](Bytes bytes, const std::string& name) {
      last = e_.collective(Peer::Cp, CollectiveKind::AllToAll, bytes, Stream::Compute,
                           name + " " + what, {last});
    };
    if (!backward || recompute) all_to_all(cp_qkv_bytes_, "cp qkv all_to_all");
    if (recompute) all_to_all(cp_out_bytes_, "cp out all_to_all");
    // Transformer Engine's Ulysses attention saves the output in sequence order and exchanges it
    // again with its gradient; DeepSpeed's DistributedAttention is autograd over its four
    // all-to-alls, and the a2a+p2p attention saves the exchanged output: their backwards
    // exchange the output's gradient alone.
    if (backward && (s_.deepspeed_ulysses() || p.cp_comm_type == CpCommType::A2aP2p)) {
      all_to_all(cp_out_bytes_, "cp dout all_to_all");
    } else if (backward) {
      all_to_all(2 * cp_out_bytes_, "cp out+dout all_to_all");
    }
    if (p.cp_comm_type == CpCommType::A2a || p.cp_a2a_degree() == p.cp) return last;
  }
  const bool ring = context_ring_overlaps();
  const Stream stream = ring ? Stream::CpComm : Stream::Compute;
  const Peer peer = p.cp_a2a_degree() > 1 ? Peer::CpRing : Peer::Cp;
  const int gathers = recompute ? 2 : 1;
  for (int i = 0; i < gathers; ++i) {
    last = e_.collective(peer, CollectiveKind::AllGather, cp_kv_bytes_, stream,
                         "cp kv all_gather " + what, {last});
  }
  if (ring && backward) {
    last = e_.collective(peer, CollectiveKind::ReduceScatter, cp_kv_bytes_, stream,
                         "cp dkv reduce_scatter " + what, {last});
  }
  return last;
}

void StageBuilder::context_exchange_after(bool backward, std::int32_t compute, std::int32_t before,
                                          const std::string& what) {
  if (s_.parallel.cp_a2a_degree() > 1) {
    e_.host_wait(e_.collective(Peer::Cp, CollectiveKind::AllToAll,
                               backward ? cp_qkv_bytes_ : cp_out_bytes_, Stream::Compute,
                               (backward ? "cp dqkv all_to_all " : "cp out all_to_all ") + what,
                               {compute, before}));
  } else if (context_ring_overlaps()) {
    e_.host_wait(before);
  } else if (backward) {
    e_.host_wait(e_.collective(Peer::Cp, CollectiveKind::ReduceScatter, cp_kv_bytes_,
                               Stream::Compute, "cp dkv reduce_scatter " + what, {compute}));
  }
}

void StageBuilder::receive_pipeline_tensor(Peer from, const std::string& what) {
  std::int32_t received = e_.collective(from, CollectiveKind::SendRecv, p2p_bytes_,
                                        recv_stream(from), "recv " + what, {recv_after_});
  // Megatron-LM's gather_split_1d_tensor and DeepSpeed's PartitionedTensor.full(): an all-gather
  // over TP on the compute stream before the pass uses the tensor.
  if (s_.splits_pipeline_tensors_over_tp()) {
    received = e_.collective(Peer::Tp, CollectiveKind::AllGather, tp_activation_bytes_,
                             Stream::Compute, "gather " + what, {received});
  }
  e_.host_wait(received);
}

StageBuilder::ForwardPass StageBuilder::begin_forward(int mb, int chunk) {
  ForwardPass f{mb, chunk, pass_suffix(mb, chunk)};
  if (const auto from = pipe_links(chunk).recv_activations) {
    // Megatron recv_forward: posted after recv_after_ (build()), waited on before compute.
    receive_pipeline_tensor(*from, "activations" + f.suffix);
  }
  const bool first_forward = forwards_done_[chunk]++ == 0;
  if (s_.zero.stage == 3) zero3_.begin_forward(chunk, first_forward);
  f.prev = last_compute_;
  f.gather_params = first_forward && policy_.params.gather_in_next_forward;
  if (f.gather_params) {
    for (const auto part : {ParamGather::Part::Dense, ParamGather::Part::Experts}) {
      f.buckets[static_cast<int>(part)] = params_.buckets(chunks_[chunk], part, chunk);
    }
  }
  return f;
}

void StageBuilder::forward_unit(ForwardPass& f, std::size_t u) {
  const bool stage3 = s_.zero.stage == 3;
  const Unit& unit = chunks_[f.chunk][u];
  const std::string& suffix = f.suffix;
  std::vector<std::int32_t> deps;
  if (f.combine.after >= 0) deps.push_back(flush_exchange(f.combine));
  if (stage3) {
    deps.push_back(zero3_.fetch(f.chunk, u, f.prev));
  }
  if (f.gather_params) {
    for (const auto part : {ParamGather::Part::Dense, ParamGather::Part::Experts}) {
      const int i = static_cast<int>(part);
      f.bucket_gather[i] =
          params_.in_forward(f.chunk, part, f.buckets[i], u, f.bucket_gather[i], last_compute_);
      deps.push_back(f.bucket_gather[i]);
    }
  }
  if (unit.forward == WorkKind::AttentionForward) {
    // DeepSpeed's CheckpointFunction.forward keeps this rank's share of the layer's checkpointed
    // input (partition_activations: a narrowed clone of 1/tp of it) before running the layer.
    const Bytes kept = checkpoint_partition(unit.layer);
    if (s_.parallel.cpu_checkpointing) {
      // cpu_checkpointing copies that share to the host (copy_to_device or .cpu(), blocking;
      // recent releases' offload engine, on a side stream, is not modelled) and keeps no GPU
      // copy for the backward.
      deps.push_back(offload_.host_copy(WorkKind::DeviceToHost, kept, Stream::Compute,
                                        unit_op_name(unit, "checkpoint d2h") + suffix, {f.prev}));
    } else if (partitioned_checkpoints()) {
      e_.alloc(MemCategory::Activations, kept, "checkpoint partition");
    } else {
      e_.alloc_tensors(MemCategory::Activations, kept, "activations",
                       layer_tensors(unit.layer, false));
    }
  }
  if (unit.forward == WorkKind::MtpForward) {
    e_.alloc(MemCategory::Activations, mtp_activations_, "mtp activations");
  }
  if (unit.forward == WorkKind::HeadForward) {
    for (Bytes b : loss_forward_temporaries_) {
      e_.alloc(MemCategory::Activations, b, "loss forward temporaries");
    }
    e_.alloc(MemCategory::Activations, logits_saved_, "logits");
  }
  const bool context = cp_kv_bytes_ > 0 && unit.forward == WorkKind::AttentionForward;
  std::int32_t exchange = -1;
  if (context) {
    exchange = context_exchange_before(false, f.prev, unit_op_name(unit, "fwd") + suffix);
    if (!context_ring_overlaps()) deps.push_back(exchange);
  }
  const bool experts = expert_exchanges_ && unit.forward == WorkKind::MoeForward;
  if (experts && f.combined) {
    // Combined 1F1B: the dispatch on the all-to-all stream, which the experts wait for.
    deps.push_back(expert_exchange(f.prev, Exchange::Dispatch, unit_op_name(unit, "fwd") + suffix));
  }
  const std::int32_t block_start = f.prev;
  f.prev = e_.compute(unit.forward, Phase::Forward, unit_op_name(unit, "fwd") + suffix, deps);
  if (context) context_exchange_after(false, f.prev, exchange, unit_op_name(unit, "fwd") + suffix);
  if (experts && f.combined) {
    // Queued when the pass goes on, so that the other pass's exchange issued in between goes
    // first on the all-to-all stream, as Megatron-core orders them.
    f.combine = {f.prev, Exchange::Combine, unit_op_name(unit, "fwd") + suffix};
  } else if (experts) {
    f.prev = expert_all_to_alls(f.prev, {Exchange::Dispatch, Exchange::Combine},
                                unit_op_name(unit, "fwd") + suffix);
  }
  if (unit.forward == WorkKind::HeadForward) {
    for (Bytes b : loss_forward_temporaries_) {
      e_.free_op(MemCategory::Activations, b, "loss forward temporaries");
    }
  }
  if (unit.forward != WorkKind::HeadForward) {
    tp_collectives(tp_after(unit, block_start, f.prev), unit_op_name(unit, "fwd"), unit,
                   false);
  }
  if (stage3 && zero3_.release_after(f.chunk, u)) {
    e_.free_op(MemCategory::Buffers, zero3_.gathered_bytes(unit), "gathered " + unit.label);
  }
}

void StageBuilder::end_forward(ForwardPass& f) {
  // A combine still queued goes, and is waited for before the pass's output leaves.
  if (f.combine.after >= 0) f.prev = flush_exchange(f.combine);
  last_compute_ = f.prev;
  if (s_.zero.stage == 3) zero3_.end_forward(f.mb, f.chunk);
  if (const auto to = pipe_links(f.chunk).send_activations) {
    // Sends are asynchronous (isend): the stage goes on; the receiver waits for the data.
    e_.collective(*to, CollectiveKind::SendRecv, p2p_bytes_, send_stream(*to),
                  "send activations" + f.suffix, {f.prev});
  }
}

void StageBuilder::forward_pass(int mb, int chunk) {
  ForwardPass f = begin_forward(mb, chunk);
  for (std::size_t u = 0; u < chunks_[chunk].size(); ++u) forward_unit(f, u);
  end_forward(f);
}

StageBuilder::BackwardPass StageBuilder::begin_backward(int mb, int chunk, BackwardPart part,
                                                        bool last_of_chunk, bool last_of_step) {
  BackwardPass b{mb, chunk, pass_suffix(mb, chunk)};
  b.part = part;
  b.last_of_step = last_of_step;
  const bool input_only = part == BackwardPart::Input;
  if (const auto from = pipe_links(chunk).recv_gradients) {
    receive_pipeline_tensor(*from, "gradients" + b.suffix);
  }
  b.hooks = !input_only && hooks_run(last_of_chunk);
  if (s_.zero.stage == 3) zero3_.begin_backward(mb, chunk);
  if (!input_only) grads_.begin_backward(backwards_done_[chunk]++ > 0, chunk);
  // Autograd's 16-bit param.grad of each unit, from the unit's backward until the pass ends.
  b.half_grads = policy_.memory.half_grads_until_backward_end && !input_only;
  b.prev = last_compute_;
  return b;
}

void StageBuilder::backward_unit(BackwardPass& b, std::size_t i) {
  const int zs = s_.zero.stage;
  // A zero-bubble B: the gradients wait for the W; ZeRO-3 and stage 2 are refused with it.
  const bool input_only = b.part == BackwardPart::Input;
  const bool stage3 = zs == 3;
  const bool full = s_.parallel.recompute == Recompute::Full;
  const std::string& suffix = b.suffix;
  const std::vector<Unit>& units = chunks_[b.chunk];
  const Unit& unit = units[i];
  // The layer's forward replayed by ops of its own, before the backward of its last block.
  const bool replay = s_.replays_layers_before_backward() && ends_layer(units, i);
  std::vector<std::int32_t> deps;
  if (b.dispatch.after >= 0) deps.push_back(flush_exchange(b.dispatch));
  const auto fetch = [&] {
    deps.push_back(zero3_.fetch(b.chunk, zero3_.backward_use(b.chunk, i), b.prev));
  };
  if (stage3 && !replay) fetch();
  const Bytes recomputed =
      is_layer_backward(unit.backward) ? recomputed_activations(unit.layer) : 0;
  if (recomputed > 0 &&
      (unit.backward == WorkKind::MlpBackward || unit.backward == WorkKind::MoeBackward)) {
    if (s_.parallel.cpu_checkpointing || partitioned_checkpoints()) {
      // CheckpointFunction.backward rebuilds the whole checkpoint before the layer's forward
      // runs again: its share back from the host (move_to_device, or saved_data.to), then,
      // partitioned, an all-gather over the TP group into a new whole tensor
      // (gather_partitioned_activations: all_gather_into_tensor, which the recomputation waits
      // for) that replaces the share. The attention's backward frees the whole one as it would
      // the GPU copy.
      const Bytes saved = layer_activations(unit.layer, false);
      const Bytes kept = checkpoint_partition(unit.layer);
      const bool partitioned = partitioned_checkpoints();
      std::int32_t ready = b.prev;
      if (s_.parallel.cpu_checkpointing) {
        if (partitioned) e_.alloc(MemCategory::Activations, kept, "checkpoint partition");
        ready = offload_.host_copy(WorkKind::HostToDevice, kept, Stream::Compute,
                                   unit_op_name(unit, "checkpoint h2d") + suffix, {ready});
      }
      e_.alloc_tensors(MemCategory::Activations, saved, "activations",
                       layer_tensors(unit.layer, false));
      if (partitioned) {
        ready = e_.collective(Peer::Tp, CollectiveKind::AllGather, saved, Stream::TpComm,
                              unit_op_name(unit, "checkpoint all_gather") + suffix, {ready});
        e_.free_op(MemCategory::Activations, kept, "checkpoint partition", Stream::Compute,
                   {ready});
      }
      deps.push_back(ready);
    }
    e_.alloc_tensors(MemCategory::Activations, recomputed, "recomputed activations",
                     layer_tensors(unit.layer, true));
  }
  if (replay) {
    replay_layer(b, i, std::exchange(deps, {}));
    fetch();
  }
  if (zs >= 2 && !input_only) {
    if (policy_.params.allocates_tensor_by_tensor) {
      std::vector<double> tensors(unit.weights.begin(), unit.weights.end());
      tensors.push_back(static_cast<double>(small_tensor_elements(unit)));
      e_.alloc_tensors(MemCategory::Buffers, 2 * unit.params, "param.grad " + unit.label, tensors);
    } else {
      e_.alloc(MemCategory::Buffers, 2 * unit.params, "param.grad " + unit.label);
    }
  }
  const bool head = unit.backward == WorkKind::HeadBackward;
  if (head) {
    for (Bytes t : loss_backward_temporaries_) {
      e_.alloc(MemCategory::Activations, t, "loss backward temporaries");
    }
  }
  if (b.half_grads) e_.alloc(MemCategory::Buffers, 2 * unit.params, "param.grad 16-bit");
  const bool context = cp_kv_bytes_ > 0 && unit.backward == WorkKind::AttentionBackward;
  std::int32_t exchange = -1;
  if (context) {
    exchange = context_exchange_before(true, b.prev, unit_op_name(unit, "bwd") + suffix);
    if (!context_ring_overlaps()) deps.push_back(exchange);
  }
  const bool experts = expert_exchanges_ && unit.backward == WorkKind::MoeBackward;
  if (experts && b.combined) {
    // Combined 1F1B: the combine's backward on the all-to-all stream before the experts'.
    deps.push_back(
        expert_exchange(b.prev, Exchange::CombineBackward, unit_op_name(unit, "bwd") + suffix));
  }
  // Megatron-core's --delay-wgrad-compute in the combined 1F1B: a layer block's weight gradient
  // runs after its input gradient, which the next exchange waits for alone
  // (TransformerLayerSchedulePlan.run: mlp.backward, then mlp.backward_dw after the dispatch is
  // issued; the attention's backward_dw after its backward).
  const bool delayed =
      b.combined && s_.parallel.delay_wgrad_compute && is_layer_backward(unit.backward);
  const bool deferred = input_only && is_layer_backward(unit.backward);  // a zero-bubble B
  const bool split = deferred || delayed;
  const bool at_input_linear =
      !delayed && b.part == BackwardPart::Whole && splits_at_input_linear(s_, unit.backward);
  const std::int32_t block_start = b.prev;
  b.prev = e_.compute(unit.backward, Phase::Backward, unit_op_name(unit, "bwd") + suffix, deps,
                      split             ? BackwardPart::Input
                      : at_input_linear ? BackwardPart::BeforeInputLinear
                                        : BackwardPart::Whole);
  if (deferred && weight_grad_bytes(unit) > 0) {
    e_.alloc(MemCategory::Activations, weight_grad_bytes(unit), "weight-gradient inputs");
  }
  if (context) context_exchange_after(true, b.prev, exchange, unit_op_name(unit, "bwd") + suffix);
  if (experts && b.combined) {
    b.dispatch = {b.prev, Exchange::DispatchBackward, unit_op_name(unit, "bwd") + suffix};
  } else if (experts) {
    const std::string name = unit_op_name(unit, "bwd") + suffix;
    b.prev = full ? expert_all_to_alls(b.prev,
                                       {Exchange::Dispatch, Exchange::Combine,
                                        Exchange::CombineBackward, Exchange::DispatchBackward},
                                       name)
                  : expert_all_to_alls(
                        b.prev, {Exchange::CombineBackward, Exchange::DispatchBackward}, name);
  }
  // Full recomputation replays the block's forward, its TP collectives included: Megatron-core's
  // CheckpointFunction.backward reruns the layer's forward function (tensor_parallel/random.py),
  // whose row-parallel output is all-reduced (or, with sequence parallelism, reduce-scattered
  // and all-gathered) as in the forward. torchtitan's and DeepSpeed's checkpointing rerun the
  // same forward. They run before the backward's own.
  if (full && is_layer_backward(unit.backward) && !s_.replays_layers_before_backward()) {
    tp_collectives(tp_after(unit, block_start, b.prev), unit_op_name(unit, "recompute"), unit,
                   false);
  }
  // The input gradient of every column-parallel block (and of the vocab-parallel head) is
  // all-reduced; the embedding's is not needed.
  if (at_input_linear) {
    input_linear_backward(b, unit);
  } else if (unit.backward != WorkKind::EmbedBackward) {
    tp_collectives(tp_after(unit, block_start, b.prev), unit_op_name(unit, "bwd"), unit,
                   true);
  }
  // The delayed weight gradient: next on the compute stream; the unit's gradients are ready
  // after it, the pass's input gradient (b.prev) before it.
  std::int32_t gradients_ready = b.prev;
  if (delayed) {
    gradients_ready = b.wgrad = e_.compute(unit.backward, Phase::Backward,
                                           unit_op_name(unit, "wgrad") + suffix, {},
                                           BackwardPart::Weight);
  }
  if (head) {
    e_.free_op(MemCategory::Activations, logits_saved_, "logits");
    for (Bytes t : loss_backward_temporaries_) {
      e_.free_op(MemCategory::Activations, t, "loss backward temporaries");
    }
  }
  if (unit.backward == WorkKind::MtpBackward) {
    e_.free_op(MemCategory::Activations, mtp_activations_, "mtp activations");
  }
  if (unit.backward == WorkKind::AttentionBackward) {
    e_.free_op(MemCategory::Activations, layer_activations(unit.layer, false), "activations");
    if (recomputed > 0) {
      e_.free_op(MemCategory::Activations, recomputed, "recomputed activations");
    }
  }
  if (stage3 && zero3_.release_after(b.chunk, zero3_.backward_use(b.chunk, i))) {
    e_.free_op(MemCategory::Buffers, zero3_.gathered_bytes(unit), "gathered " + unit.label);
  }
  if (b.hooks) unit_hooks(unit, gradients_ready);
  if (zs >= 2 && !input_only) {
    e_.free_op(MemCategory::Buffers, 2 * unit.params, "param.grad " + unit.label);
  }
}

// Megatron-core's linear backward (LinearWithGradAccumulationAndAsyncCommunication.backward at
// d98e8a6; Transformer Engine's _Linear and _LayerNormLinear backward at d0067d0; nanotron's
// _ColumnLinearAsyncCommunication): under sequence parallelism the saved input shard is
// all-gathered asynchronously and the dgrad GEMM launched behind it; the input gradient's
// all-reduce (sequence parallelism: reduce-scatter) is launched asynchronously before the wgrad
// GEMM and waited for after it. CUDA_DEVICE_MAX_CONNECTIONS=1, which Megatron requires, keeps
// each collective ahead of the GEMM it hides behind. The host waits for the reduction before the
// layer's next op, as it did before the split.
void StageBuilder::input_linear_backward(BackwardPass& b, const Unit& u) {
  const std::string what = unit_op_name(u, "bwd");
  std::vector<std::int32_t> gathered;
  if (regathers_input(u)) gathered.push_back(tp_input_gather(b.prev, what, u));
  // The dgrad also takes the host's pending waits: the recomputed forward's TP collectives and a
  // context-parallel exchange end before the linear's backward begins.
  const std::int32_t dgrad = e_.compute(u.backward, Phase::Backward, what + " input dgrad" + b.suffix,
                                        {}, BackwardPart::InputLinearDgrad);
  const std::int32_t reduce = tp_reduction(dgrad, what, u);
  b.prev = e_.compute(u.backward, Phase::Backward, what + " input wgrad" + b.suffix, gathered,
                      BackwardPart::InputLinearWgrad);
  std::int32_t last = reduce;
  if (s_.parallel.sequence_parallel) {
    last = e_.collective(Peer::Tp, CollectiveKind::AllGather, tp_gather_bytes_of(u, true),
                         Stream::TpComm, "tp all_gather " + what, {reduce, b.prev});
  }
  e_.host_wait(last);
}

// Full recomputation's replay of the layer whose last block is unit `last`, under DeepSpeed's
// stage 3 (Scenario::replays_layers_before_backward): each of its blocks' forward, in order, after
// its pre-hook's gathers, with its TP collectives; the first waits for `deps` (the checkpoint's
// restore). A Ulysses layer's replayed all-to-alls stay with its attention's backward
// (context_exchange_before), the same bytes a block later.
void StageBuilder::replay_layer(BackwardPass& b, std::size_t last, std::vector<std::int32_t> deps) {
  const std::vector<Unit>& units = chunks_[b.chunk];
  for (std::size_t j = layer_first_unit(units, last); j <= last; ++j) {
    const Unit& unit = units[j];
    const std::size_t use = zero3_.replay_use(b.chunk, j);
    deps.push_back(zero3_.fetch(b.chunk, use, b.prev));
    const std::int32_t block_start = b.prev;
    b.prev = e_.compute(unit.forward, Phase::Backward, unit_op_name(unit, "recompute") + b.suffix,
                        std::exchange(deps, {}));
    tp_collectives(tp_after(unit, block_start, b.prev), unit_op_name(unit, "recompute"), unit,
                   false);
    if (zero3_.release_after(b.chunk, use)) {
      e_.free_op(MemCategory::Buffers, zero3_.gathered_bytes(unit), "gathered " + unit.label);
    }
  }
}

void StageBuilder::end_backward(BackwardPass& b) {
  if (b.dispatch.after >= 0) b.prev = flush_exchange(b.dispatch);
  if (b.half_grads && policy_.memory.fp32_fold_after_backward) {
    // The framework folds them into its fp32 buffer (nanotron's FP32GradientAccumulator.backward:
    // fp32_grad.add_(param.grad) per parameter after loss.backward()): each element's 16-bit
    // gradient read, the accumulator read and written.
    std::int64_t params = 0, tensors = 0;
    for (const Unit& unit : chunks_[b.chunk]) {
      params += unit.params;
      tensors += unit.big_tensors + unit.small_tensors;
    }
    Work fold{WorkKind::GradAccumulate, (2 + 2 * policy_.grads.bytes_per_element) * params};
    fold.host_ops = tensors;
    b.prev = e_.work_op(OpKind::Compute, fold, Stream::Compute, Phase::Backward,
                        "fp32 grad accumulate" + b.suffix, {b.prev});
  }
  if (b.half_grads) {
    for (const Unit& unit : chunks_[b.chunk]) {
      e_.free_op(MemCategory::Buffers, 2 * unit.params, "param.grad 16-bit");
    }
  }
  last_compute_ = b.prev;
  if (const auto to = pipe_links(b.chunk).send_gradients) {
    e_.collective(*to, CollectiveKind::SendRecv, p2p_bytes_, send_stream(*to),
                  "send gradients" + b.suffix, {b.prev});
  }
  // The gradients are complete after the last delayed wgrad, which runs past the send (Megatron
  // delays the first layer's for that).
  end_gradient_pass(b.wgrad >= 0 ? b.wgrad : b.prev, b.hooks, b.last_of_step);
}

void StageBuilder::backward_pass(int mb, int chunk, BackwardPart part, bool last_of_chunk,
                                 bool last_of_step) {
  BackwardPass b = begin_backward(mb, chunk, part, last_of_chunk, last_of_step);
  // Megatron-core runs every pass of its combined schedule through the same layer plan
  // (TransformerModelChunkSchedulePlan.run with no forward): with delayed wgrads a backward that
  // runs alone also issues its exchanges on the all-to-all stream, the dispatch's backward after
  // the experts' input gradient.
  b.combined = s_.parallel.delay_wgrad_compute;
  for (std::size_t i = chunks_[chunk].size(); i-- > 0;) backward_unit(b, i);
  end_backward(b);
}

// Megatron-core's combined 1F1B (--overlap-moe-expert-parallel-comm; combined_1f1b.py and
// TransformerLayerSchedulePlan): a steady-state forward and backward of two micro-batches run
// as one step, layer by layer, the forward's layers in order beside the backward's in reverse,
// their blocks alternating on the compute stream (forward attention, backward experts, forward
// experts, backward attention) while the all-to-alls run on a stream of their own: each
// exchange of one pass hides behind a block of the other. The pre- and post-processing (the
// embedding, the head and loss) and the layers one pass has more of run alone.
void StageBuilder::combined_pass(const PassStep& fwd, const PassStep& bwd, bool last_of_chunk,
                                 bool last_of_step) {
  ForwardPass f = begin_forward(fwd.mb, fwd.chunk);
  BackwardPass b = begin_backward(bwd.mb, bwd.chunk, BackwardPart::Whole, last_of_chunk,
                                  last_of_step);
  f.combined = b.combined = true;
  // Units grouped by layer: forward groups in model order, backward groups in reverse, each
  // group's units in its pass's order.
  auto groups = [&](int chunk, bool backward) {
    const std::vector<Unit>& units = chunks_[chunk];
    std::vector<std::vector<std::size_t>> out;
    for (std::size_t k = 0; k < units.size(); ++k) {
      const std::size_t u = backward ? units.size() - 1 - k : k;
      if (out.empty() || units[u].layer < 0 || units[out.back().back()].layer != units[u].layer) {
        out.emplace_back();
      }
      out.back().push_back(u);
    }
    return out;
  };
  const auto fg = groups(fwd.chunk, false), bg = groups(bwd.chunk, true);
  const std::vector<Unit>& fu = chunks_[fwd.chunk];
  const std::vector<Unit>& bu = chunks_[bwd.chunk];
  std::size_t fi = 0, bi = 0;
  // The backward's post-processing (head and loss, MTP projection) and the forward's
  // pre-processing (embedding) first.
  while (bi < bg.size() && bu[bg[bi].front()].layer < 0) {
    for (std::size_t u : bg[bi++]) backward_unit(b, u);
  }
  while (fi < fg.size() && fu[fg[fi].front()].layer < 0) {
    for (std::size_t u : fg[fi++]) forward_unit(f, u);
  }
  while (fi < fg.size() && bi < bg.size() && fu[fg[fi].front()].layer >= 0 &&
         bu[bg[bi].front()].layer >= 0) {
    const std::vector<std::size_t>& a = fg[fi++];
    const std::vector<std::size_t>& c = bg[bi++];
    for (std::size_t k = 0; k < std::max(a.size(), c.size()); ++k) {
      if (k < a.size()) forward_unit(f, a[k]);
      if (k < c.size()) backward_unit(b, c[k]);
    }
  }
  while (fi < fg.size()) {
    for (std::size_t u : fg[fi++]) forward_unit(f, u);
  }
  while (bi < bg.size()) {
    for (std::size_t u : bg[bi++]) backward_unit(b, u);
  }
  end_forward(f);
  end_backward(b);
}

bool StageBuilder::hooks_run(bool last_of_chunk) const {
  const ReduceWhen when = policy_.grads.when;
  return when == ReduceWhen::EveryBackward || (when == ReduceWhen::LastBackward && last_of_chunk);
}

void StageBuilder::end_gradient_pass(std::int32_t last, bool hooks, bool last_of_step) {
  if (hooks) grads_.end_backward(last, last_of_step);
  if (policy_.grads.when == ReduceWhen::AfterBackward && last_of_step) {
    grads_.reduce_after_flush(chunks_, last);
  }
}

void StageBuilder::unit_hooks(const Unit& unit, std::int32_t produced_by) {
  if (s_.zero.per_parameter_stage3()) {
    grads_.per_parameter_reduce(unit, produced_by);
  } else {
    grads_.unit_gradients_ready(unit, produced_by);
  }
}

// The W of a zero-bubble schedule (the sail-sg Megatron-LM fork defers each linear's wgrad to
// it): the layer blocks' wgrads in backward order, each releasing what its B kept for it. The
// embedding's and the head's gradients came with their whole backward in the B; their hooks run
// here with the rest, as the hooks of a backward run after its compute.
void StageBuilder::weight_pass(int mb, int chunk, bool last_of_chunk, bool last_of_step) {
  const std::string suffix = pass_suffix(mb, chunk);
  const bool hooks = hooks_run(last_of_chunk);
  const std::vector<Unit>& units = chunks_[chunk];
  grads_.begin_backward(backwards_done_[chunk]++ > 0, chunk);
  const bool half_grads = policy_.memory.half_grads_until_backward_end;
  std::int32_t prev = last_compute_;
  for (std::size_t i = units.size(); i-- > 0;) {
    const Unit& unit = units[i];
    if (half_grads) e_.alloc(MemCategory::Buffers, 2 * unit.params, "param.grad 16-bit");
    if (is_layer_backward(unit.backward)) {
      prev = e_.compute(unit.backward, Phase::Backward, unit_op_name(unit, "wgrad") + suffix, {},
                        BackwardPart::Weight);
      if (weight_grad_bytes(unit) > 0) {
        e_.free_op(MemCategory::Activations, weight_grad_bytes(unit), "weight-gradient inputs");
      }
    }
    if (hooks) unit_hooks(unit, prev);
  }
  if (half_grads) {
    for (const Unit& unit : units) e_.free_op(MemCategory::Buffers, 2 * unit.params, "param.grad 16-bit");
  }
  last_compute_ = prev;
  end_gradient_pass(prev, hooks, last_of_step);
}

}  // namespace zerosim::plan_detail
