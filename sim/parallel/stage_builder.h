#pragma once
// Builds the template of one pipeline stage: its model states and buffers, the forward and
// backward passes in the pipeline schedule's order (with the TP collectives, pipeline transfers,
// ZeRO-3 fetches and gradient hooks inside them), and the optimizer step. The framework's
// answers come from its policy (framework_policy.h); each concern has its own part: Zero3Params,
// GradientReducer, Offload, ParamGather.
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <vector>

#include "sim/parallel/framework_policy.h"
#include "sim/parallel/gradients.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/offload.h"
#include "sim/parallel/param_gather.h"
#include "sim/parallel/schedules.h"
#include "sim/parallel/stage_template.h"
#include "sim/parallel/zero3_params.h"

namespace zerosim::plan_detail {

// Model states per rank (ZeRO paper, SC20, section 5) and the offload tiers' bytes of a stage
// holding `chunks`; gradients in the framework's reduction dtype.
void stage_states(const Scenario& s, const std::vector<std::vector<Unit>>& chunks,
                  const GradientPolicy& grads, StagePlan& info);

class StageBuilder {
 public:
  StageBuilder(const Scenario& s, int stage, std::vector<std::vector<Unit>> chunks,
               PlanTables tables, StagePlan& info);

  Template build();

 private:
  // The token exchanges of an MoE layer: forward, the dispatch to the experts and the combine of
  // their outputs; backward, the combine's backward (output gradients to the experts) and the
  // dispatch's (input gradients back).
  enum class Exchange { Dispatch, Combine, CombineBackward, DispatchBackward };
  // An MoE exchange of the combined 1F1B schedule waiting to be issued after op `after` (-1:
  // none), named by `what`.
  struct QueuedExchange {
    std::int32_t after = -1;
    Exchange which = Exchange::Dispatch;
    std::string what;
  };
  // One forward or backward pass in progress: built unit by unit, so that the combined 1F1B
  // schedule can interleave two of them.
  struct ForwardPass {
    int mb = 0, chunk = 0;
    std::string suffix;
    std::int32_t prev = -1;  // the pass's last compute op (or exchange it must wait for)
    // Megatron's --overlap-param-gather: the buckets of the dense parameters and of the routed
    // experts (expert parallelism), and the gather of each that the last unit waited for.
    bool gather_params = false;
    std::vector<ParamGather::Bucket> buckets[2]{};
    std::int32_t bucket_gather[2] = {-1, -1};
    bool combined = false;      // in a combined 1F1B step: all-to-alls on their own stream
    QueuedExchange combine{};   // the last MoE layer's combine, issued when the pass goes on
  };
  struct BackwardPass {
    int mb = 0, chunk = 0;
    std::string suffix;
    std::int32_t prev = -1;
    BackwardPart part = BackwardPart::Whole;
    bool hooks = false, half_grads = false, last_of_step = false;
    bool combined = false;
    QueuedExchange dispatch{};  // the last MoE layer's dispatch backward, issued likewise
    std::int32_t wgrad = -1;    // the last delayed weight gradient (delay_wgrad_compute)
  };

  void allocate_states();
  ForwardPass begin_forward(int mb, int chunk);
  void forward_unit(ForwardPass& f, std::size_t unit);
  void end_forward(ForwardPass& f);
  BackwardPass begin_backward(int mb, int chunk, BackwardPart part, bool last_of_chunk,
                              bool last_of_step);
  void backward_unit(BackwardPass& b, std::size_t unit);
  void replay_layer(BackwardPass& b, std::size_t last, std::vector<std::int32_t> deps);
  void end_backward(BackwardPass& b);
  // A steady-state forward and backward run as one step (Megatron-core's combined 1F1B,
  // parallel.overlap_moe_expert_parallel_comm), see passes.cpp.
  void combined_pass(const PassStep& fwd, const PassStep& bwd, bool last_of_chunk,
                     bool last_of_step);
  std::int32_t expert_exchange(std::int32_t after, Exchange which, const std::string& what);
  std::int32_t flush_exchange(QueuedExchange& q);
  void forward_pass(int mb, int chunk);
  // A backward: whole, or a zero-bubble schedule's B (Input: the input gradients, sent to the
  // previous stage; no gradient reaches the hooks).
  void backward_pass(int mb, int chunk, BackwardPart part, bool last_of_chunk, bool last_of_step);
  // A zero-bubble schedule's W: the layer blocks' weight gradients of a (micro-batch, chunk)
  // whose B has run, handed to the gradient hooks as a backward's would be.
  void weight_pass(int mb, int chunk, bool last_of_chunk, bool last_of_step);
  // The gradient hooks of one unit whose gradients op `produced_by` completed.
  void unit_hooks(const Unit& unit, std::int32_t produced_by);
  // Whether a pass that hands over gradients runs the framework's hooks (every backward, or the
  // chunk's last), and what ends such a pass: the pending buckets, or the reduction after the
  // flush.
  bool hooks_run(bool last_of_chunk) const;
  void end_gradient_pass(std::int32_t last, bool hooks, bool last_of_step);
  // The TP collectives after a pass of unit `u`'s block (tp_bytes_of, tp_gather_bytes_of).
  void tp_collectives(std::int32_t after, const std::string& what, const Unit& u, bool backward);
  // Whether the column-parallel linear that opens unit `u`'s block (or the vocab-parallel head)
  // gathers its sequence-parallel input again for its weight gradient (Scenario::regathers_tp_input;
  // MLA's and the MoE block's first linears are not simulated doing so), or the replay of an
  // op-level checkpoint gathers it (Scenario::op_checkpoint_regathers_tp_input).
  bool regathers_input(const Unit& u) const {
    if (s_.op_checkpoint_regathers_tp_input()) return opens_with_column_linear(s_, u.backward);
    return s_.regathers_tp_input() && (opens_with_column_linear(s_, u.backward) ||
                                       u.backward == WorkKind::HeadBackward);
  }
  // Unit `u`'s TP collectives as emitted, each after `after`: the gather of its input again
  // (regathers_input), and the reduction of its block's output or input gradient (an all-reduce,
  // or under sequence parallelism a reduce-scatter).
  std::int32_t tp_input_gather(std::int32_t after, const std::string& what, const Unit& u);
  std::int32_t tp_reduction(std::int32_t after, const std::string& what, const Unit& u);
  // The end of a block's backward split at its input linear (splits_at_input_linear), after the
  // part before it (b.prev): the linear's dgrad GEMM beside the gather of its input, its wgrad
  // GEMM beside the input gradient's reduction, then the gather of the next block's output
  // gradient under sequence parallelism.
  void input_linear_backward(BackwardPass& b, const Unit& u);
  std::int32_t expert_all_to_alls(std::int32_t after, std::initializer_list<Exchange> exchanges,
                                  const std::string& what);
  // Exchanges that run as one on `stream`, after `after`: the all-to-all dispatcher's
  // all-to-all, or the flex dispatcher's network and NVLink halves (the op returned is the one
  // to wait for; the other half is waited for by the next compute).
  std::int32_t expert_traffic(std::int32_t after, std::initializer_list<Exchange> exchanges,
                              Stream stream, const std::string& name);
  // Context parallelism around an attention block's pass: the key/value exchange before it
  // (returns the op its compute must wait for, or -1), and after it (the dK/dV reduction of a
  // backward; the wait for an overlapped exchange).
  std::int32_t context_exchange_before(bool backward, std::int32_t prev, const std::string& what);
  // The ring of p2p, and of a2a+p2p's p2p level, runs beside the attention, which does not wait
  // for it (the all-to-alls, on the compute stream, precede it in stream order).
  bool context_ring_overlaps() const {
    return s_.parallel.cp_comm_type == CpCommType::P2p ||
           s_.parallel.cp_comm_type == CpCommType::A2aP2p;
  }
  void context_exchange_after(bool backward, std::int32_t compute, std::int32_t before,
                              const std::string& what);
  void optimizer_step();
  std::string pass_suffix(int mb, int chunk) const;
  // The pipeline transfers of a chunk's passes: where its forward receives activations from and
  // sends them to, and where its backward receives and sends gradients. Absent at the model's
  // ends (with DualPipe's placements, chunk 0's on the last stage: a copy's loss, or the V's turn
  // where the two chunks hand over in place).
  struct PipeLinks {
    std::optional<Peer> recv_activations, send_activations, recv_gradients, send_gradients;
  };
  PipeLinks pipe_links(int chunk) const;
  // A pass's pipeline receive (and, when the stages send it split over TP, its all-gather),
  // waited for by the host before the pass's compute.
  void receive_pipeline_tensor(Peer from, const std::string& what);
  static bool back_leg(Peer p) {
    return p == Peer::BackSendPrev || p == Peer::BackRecvNext || p == Peer::BackSendNext ||
           p == Peer::BackRecvPrev;
  }
  static Stream send_stream(Peer p) { return back_leg(p) ? Stream::PpBackSend : Stream::PpComm; }
  static Stream recv_stream(Peer p) { return back_leg(p) ? Stream::PpBackRecv : Stream::PpRecv; }

  const Scenario& s_;
  const int stage_;
  const std::vector<std::vector<Unit>> chunks_;
  StagePlan& info_;
  const int dp_subgroup_;
  const FrameworkPolicy policy_;
  Emitter e_;
  Offload offload_;
  Zero3Params zero3_;
  GradientReducer grads_;
  ParamGather params_;

  // Activation bytes of one layer kept for backward (with the scenario's recomputation) and
  // recomputed in a full-recompute backward; the loss's logits (saved for backward, and the extra
  // during its forward and its backward); a TP collective's and a pipeline transfer's buffer.
  // Each layer's saved activations as tensors (activation_tensors_per_layer): with the
  // scenario's recomputation, and without (full); an MoE layer's apart. The allocator places them.
  std::vector<double> layer_tensors_, layer_tensors_full_;
  std::vector<double> moe_layer_tensors_, moe_layer_tensors_full_;
  const std::vector<double>& layer_tensors(int layer, bool full) const {
    const bool moe = s_.model.is_moe_layer(layer);
    return full ? (moe ? moe_layer_tensors_full_ : layer_tensors_full_)
                : (moe ? moe_layer_tensors_ : layer_tensors_);
  }
  // A layer's saved activations (full: without recomputation), the sum of its tensors in
  // order, as activation_bytes_per_layer sums them.
  Bytes layer_activations(int layer, bool full) const {
    const std::vector<double>& t = layer_tensors(layer, full);
    return static_cast<Bytes>(std::accumulate(t.begin(), t.end(), 0.0));
  }
  // DeepSpeed's partition_activations: each TP rank keeps 1/tp of a layer's checkpoint
  // (checkpointing.py, get_partition_size: numel / mp_size) and the backward all-gathers it.
  bool partitioned_checkpoints() const {
    return s_.parallel.partition_activations && s_.parallel.tp > 1;
  }
  // What this rank keeps of a layer's checkpoint between its forward and its backward.
  Bytes checkpoint_partition(int layer) const {
    const Bytes saved = layer_activations(layer, false);
    return partitioned_checkpoints() ? saved / s_.parallel.tp : saved;
  }
  // What a layer's backward recomputes and holds until its backward ends: the whole forward's
  // activations (full recomputation), or those torchtitan's op-level policy did not save.
  Bytes recomputed_activations(int layer) const {
    switch (s_.parallel.recompute) {
      case Recompute::Full: return layer_activations(layer, true);
      case Recompute::SelectiveOp:
        return layer_activations(layer, true) - layer_activations(layer, false);
      case Recompute::None:
      case Recompute::Selective: break;
    }
    return 0;
  }
  Bytes logits_saved_ = 0;
  std::vector<Bytes> loss_forward_temporaries_, loss_backward_temporaries_;
  Bytes tp_activation_bytes_ = 0, p2p_bytes_ = 0;
  // Expert parallelism: one token dispatch (or combine) of an MoE layer per rank, as the
  // all-to-all dispatcher's all-to-all; or, with the flex dispatcher, the bytes of its network
  // and NVLink all-to-alls per byte of element width (0: that half is absent).
  bool expert_exchanges_ = false;
  bool flex_ = false;
  Bytes ep_all_to_all_bytes_ = 0;
  double ep_rail_per_byte_ = 0, ep_node_per_byte_ = 0;
  Bytes moe_tp_activation_bytes_ = 0;  // an MoE block's TP collective
  Bytes tp_fp8_gather_bytes_ = 0;       // a dense block's TP all-gather in FP8
  Bytes mtp_activations_ = 0;  // what an MTP module's own ops save for backward (not its layer's)
  // The TP collective's buffer after a block of unit `u`.
  Bytes tp_bytes_of(const Unit& u) const {
    // An MTP module under sequence parallelism: its embedding rows reduce-scattered, eh_proj's
    // [s, 2h] input all-gathered and its output gathered over TP, s x (h + 2h + h) in all: a
    // block's reduce-scatter and all-gather of twice a block's bytes move as much (and
    // backward mirrors them).
    if (u.forward == WorkKind::MtpForward) return 2 * tp_activation_bytes_;
    return u.forward == WorkKind::MoeForward ? moe_tp_activation_bytes_ : tp_activation_bytes_;
  }
  // The TP all-gather after a block of unit `u`: the next block's input, or in backward the
  // gradient of the previous block's output. FP8 runs gather a dense block's linear input in FP8
  // (Transformer Engine quantizes it before the gather, module/linear.py at d0067d0; torchao's
  // Float8ColwiseParallel at 36027d8 too) and Transformer Engine a row-parallel linear's output
  // gradient (module/base.py grad_output_preprocess); the reductions stay 16-bit. ASSUMPTION:
  // the gather after a dense block stands for its neighbour's, so a stage's gather into the
  // head, and after its first block's backward, count as FP8 too.
  Bytes tp_gather_bytes_of(const Unit& u, bool backward) const {
    const Framework f = s_.parallel.framework;
    const bool fp8 = s_.training.precision == Precision::Fp8 &&
                     (f == Framework::Megatron || (f == Framework::Fsdp && !backward));
    return is_dense_layer_block(u.forward) && fp8 ? tp_fp8_gather_bytes_ : tp_bytes_of(u);
  }
  // The op a block's TP collectives follow: the block's compute op, or with --tp-comm-overlap
  // the op before it for the attention and MLP blocks, whose Transformer Engine linears pipeline
  // the all-gather and reduce-scatter with their GEMMs (the router's dispatch, the vocab-parallel
  // head and the embedding are not TE userbuffers layers).
  std::int32_t tp_after(const Unit& u, std::int32_t block_start, std::int32_t block) const {
    const bool te_linears = u.forward == WorkKind::AttentionForward || u.forward == WorkKind::MlpForward;
    return s_.parallel.tp_comm_overlap && te_linears ? block_start : block;
  }
  Bytes cp_kv_bytes_ = 0;  // context parallelism: all cp ranks' keys and values of one layer
  Bytes cp_qkv_bytes_ = 0;  // a2a: one rank's queries, keys and values of one layer
  Bytes cp_out_bytes_ = 0;  // a2a: one rank's attention output of one layer
  // A zero-bubble schedule: what a layer block's W needs from its B until it runs, the inputs and
  // output gradients of the block's GEMMs (16-bit); dense and MoE layers' attention and
  // feed-forward blocks.
  Bytes weight_grad_attention_ = 0, weight_grad_mlp_ = 0, weight_grad_moe_ = 0;
  Bytes weight_grad_bytes(const Unit& u) const {
    switch (u.backward) {
      case WorkKind::AttentionBackward: return weight_grad_attention_;
      case WorkKind::MlpBackward: return weight_grad_mlp_;
      case WorkKind::MoeBackward: return weight_grad_moe_;
      default: return 0;
    }
  }
  std::int32_t last_compute_ = -1;
  // The compute after which the next pass's receive is posted (Megatron's recv_forward /
  // recv_backward): the last one, or with overlapped p2p an earlier one (build()).
  std::int32_t recv_after_ = -1;
  std::vector<int> forwards_done_, backwards_done_;  // per chunk, in this step
};

}  // namespace zerosim::plan_detail
