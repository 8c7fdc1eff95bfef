#include "sim/parallel/framework_policy.h"

#include <algorithm>
#include <limits>

namespace zerosim::plan_detail {

// The frameworks, one file each.
FrameworkPolicy deepspeed_policy(const Scenario& s, int stage);
FrameworkPolicy megatron_policy(const Scenario& s, int stage);
FrameworkPolicy fsdp_policy(const Scenario& s, int stage);
FrameworkPolicy nanotron_policy(const Scenario& s, int stage);

namespace {

FrameworkPolicy framework_choice(const Scenario& s, int stage) {
  switch (s.parallel.framework) {
    case Framework::DeepSpeed: return deepspeed_policy(s, stage);
    case Framework::Megatron: return megatron_policy(s, stage);
    case Framework::Fsdp: return fsdp_policy(s, stage);
    case Framework::Nanotron: return nanotron_policy(s, stage);
  }
  return deepspeed_policy(s, stage);
}

}  // namespace

FrameworkPolicy framework_policy(const Scenario& s, int stage) {
  FrameworkPolicy p = framework_choice(s, stage);
  // Gradients are reduced in the dtype they are kept in, unless the scenario names another
  // (DeepSpeed's communication_data_type casts each bucket before the collective:
  // stage_1_and_2.py gradient_reduction_w_predivide). With sequence parallelism DeepSpeed's
  // engine takes seq_parallel_communication_data_type instead (fp32 unless set).
  switch (s.deepspeed_ulysses() ? s.zero.seq_parallel_communication_dtype : s.zero.communication_dtype) {
    case CommDtype::Default: p.grads.reduce_bytes_per_element = p.grads.bytes_per_element; break;
    case CommDtype::Fp16:
    case CommDtype::Bf16: p.grads.reduce_bytes_per_element = 2; break;
    case CommDtype::Fp32: p.grads.reduce_bytes_per_element = 4; break;
  }
  return p;
}

Stream hook_stream(const Scenario& s, ReduceWhen when) {
  if (when == ReduceWhen::AfterBackward) return Stream::Compute;
  if (s.zero.stage == 0) return Stream::DpComm;  // DDP's reducer has its own NCCL stream
  return s.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
}

void sharded_reduction(const Scenario& s, GradientPolicy& g) {
  if (s.zero.stage == 0) {
    g.collective = CollectiveKind::AllReduce;
    g.collective_name = "grad all_reduce";
    return;
  }
  const bool rs = s.zero.reduce_scatter;
  g.collective = rs ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  g.collective_name = rs ? "grad reduce_scatter" : "grad all_reduce";
}

// Megatron-core's DistributedDataParallel (distributed_data_parallel.py at d98e8a6): bucket_size
// as given (--ddp-bucket-size), else max(40M, 1M x the data-parallel group's size).
std::int64_t megatron_bucket_elements(const Scenario& s) {
  if (s.parallel.ddp_bucket_size > 0) return s.parallel.ddp_bucket_size;
  return std::max<std::int64_t>(40'000'000, 1'000'000LL * s.parallel.dp_cp());
}

std::int64_t chunk_bucket_limit(const GradientPolicy& g, int chunk, std::int64_t limit) {
  return g.one_bucket_after_first_chunk && chunk > 0 ? std::numeric_limits<std::int64_t>::max()
                                                     : limit;
}

bool gathers_partitions_after_step(const Scenario& s) {
  // DeepSpeed's all_gather_dp_groups: one all_gather_into_tensor of the whole 16-bit flat buffer
  // (allgather_bucket_size is unused with current PyTorch), synchronous. Megatron's distributed
  // optimizer gathers the updated parameters the same way unless --overlap-param-gather.
  return (s.zero.stage == 1 || s.zero.stage == 2) && !s.parallel.overlap_param_gather;
}

ReplicaReduce replica_reduce(const Scenario& s, ReplicaReduce with_replicas) {
  if (s.zero.mics_shard_size <= 0 || dp_subgroup_size(s) >= s.parallel.dp_cp()) {
    return ReplicaReduce::None;
  }
  return with_replicas;
}

// Counted from microsoft/Megatron-DeepSpeed f01c9e6e (2023-06-30, the last commit before its
// rebase onto Megatron-LM; megatron/model/transformer.py ParallelTransformerLayer and
// ParallelAttention, mpu/layers.py, mpu/mappings.py, fused_layer_norm.py, fused_softmax.py,
// fused_bias_gelu.py) with DeepSpeed 0.9.5's CheckpointFunction, for a GPT layer with fused
// kernels, no flash attention and no sequence parallelism: the ops that reach PyTorch's
// dispatcher (views included, as each is a dispatch) per pass. Forward: attention half 41 (layer
// norm, QKV linear, split and views, baddbmm, fused masked softmax, RNG fork, dropout, bmm,
// permute and copy, dense linear, bias-dropout-add), MLP half 25 (layer norm, two
// torch.tensor(0.0, device=...) that synchronize the stream, two linears, bias-GeLU,
// bias-dropout-add); backward, the autograd nodes' ops and the AccumulateGrad nodes: attention
// 65, MLP 36; a checkpointed layer adds 8 (detach, RNG state reads and writes) and its
// recomputed forward. Counted at TP 1; TP > 1 adds one all-reduce per half and pass, which is a
// collective of its own. Uncertain by about 15 % (how a PyTorch version splits F.linear, the
// TorchScript fusions): docs/SOURCES.md#host-dispatch. Other layer types (RMSNorm, SwiGLU,
// rotary) get the same counts: ASSUMPTION, not counted.
HostPolicy megatron_gpt_layer_host_ops() {
  HostPolicy h;
  h.attention_forward_ops = 41;
  h.mlp_forward_ops = 25;
  h.attention_backward_ops = 65;
  h.mlp_backward_ops = 36;
  h.checkpoint_ops_per_layer = 8;
  return h;
}

// Counted from Megatron-LM d98e8a6 (megatron/core/transformer/moe/: moe_layer.py, router.py,
// token_dispatcher.py, experts.py, moe_utils.py, fused_a2a.py) with Transformer Engine d0067d0's
// GroupedLinear (the grouped GEMM, one GEMM per local expert) and DeepEP dd758ca, the same way
// as the dense layer above (every op that reaches the dispatcher, views included, a
// torch.tensor(...) as one; backward: each autograd node's ops and one AccumulateGrad per
// parameter), for one MoE layer's MLP half from its norm to the residual add, TP 1, BF16, no
// bias, a top-k softmax router with its aux loss, no router fusion, no shared experts, no CUDA
// graphs; E = the rank's local experts. Forward / backward:
//   alltoall dispatcher, unfused permutation      145 / 72 + 28 E (the backward of the three
//                                                 chunk sorts cats EP x E chunks each)
//   alltoall, --moe-permute-fusion                123 / 78 + 4 E
//   flex (DeepEP), unfused                        166 / 116 + 4 E
//   flex, --moe-permute-fusion                    156 / 116 + 4 E
// A gated activation (SwiGLU, GeGLU) adds 3 / 3; biases on the linears 7 + 2 E / 8 + 9 E; FP8 with a
// scale per tensor (delayed, tensorwise) 6 E / 6 E (Transformer Engine quantizes each expert's
// GEMM operands apart; mxfp8 and blockwise allocate them in bulk). The flex rows run the
// dispatch's preprocessing eagerly (Megatron compiles it with torch.compile where it can: about
// 7 / 3 ops fewer). Uncertain by about 8 % (alltoall) and 15 % (flex: DeepEP's allocations and
// record_stream calls vary by version). The alltoall forward synchronizes the host once (the
// all-to-all's splits and the grouped GEMM's sizes, token_dispatcher.py), the flex forward four
// times; the host cannot run ahead of the layer, as every block's floor assumes. The allgather
// dispatcher is not counted: the dense MLP half stands for it (ASSUMPTION).
void count_megatron_core_moe_ops(const Scenario& s, HostPolicy& h) {
  if (!s.model.is_moe() ||
      s.parallel.moe_token_dispatcher_type == MoeDispatcher::AllGather)
    return;
  const int e = static_cast<int>(s.model.moe.num_experts / s.parallel.ep);
  const bool fused = s.parallel.moe_permute_fusion;
  if (s.parallel.moe_token_dispatcher_type == MoeDispatcher::Flex) {
    h.moe_forward_ops = fused ? 156 : 166;
    h.moe_backward_ops = 116 + 4 * e;
  } else {
    h.moe_forward_ops = fused ? 123 : 145;
    h.moe_backward_ops = fused ? 78 + 4 * e : 72 + 28 * e;
  }
  if (s.model.mlp == MlpKind::Swiglu || s.model.mlp == MlpKind::Geglu) {
    h.moe_forward_ops += 3;
    h.moe_backward_ops += 3;
  }
  if (s.model.mlp_bias) {
    h.moe_forward_ops += 7 + 2 * e;
    h.moe_backward_ops += 8 + 9 * e;
  }
  const bool per_tensor_fp8 = s.training.precision == Precision::Fp8 &&
                              (s.training.fp8_recipe == Fp8Recipe::Delayed ||
                               s.training.fp8_recipe == Fp8Recipe::Tensorwise);
  if (per_tensor_fp8) {
    h.moe_forward_ops += 6 * e;
    h.moe_backward_ops += 6 * e;
  }
}

}  // namespace zerosim::plan_detail

namespace zerosim {

LayerWork layer_work(const Scenario& s, bool moe) {
  return layer_forward_work(s.model, s.training.micro_batch_size, s.parallel.tp,
                            s.parallel.sequence_parallel, s.training.flash_attention, moe,
                            s.parallel.ep, s.training.moe_load_imbalance, s.parallel.cp,
                            plan_detail::framework_policy(s, 0).layer.elementwise, s.expert_tp());
}

}  // namespace zerosim
