// nanotron: Megatron-style TP/PP with ZeRO-1 optimizer sharding; gradients are accumulated in
// fp32 and reduced after the pipeline flush.
#include "sim/parallel/framework_policy.h"

namespace zerosim::plan_detail {

FrameworkPolicy nanotron_policy(const Scenario& s, int /*stage*/) {
  const int zs = s.zero.stage;
  FrameworkPolicy p;
  GradientPolicy& g = p.grads;
  g.when = zs >= 2 ? ReduceWhen::EveryBackward : ReduceWhen::AfterBackward;
  g.stream = hook_stream(s, g.when);
  // nanotron's fp32 gradient accumulation when training in bf16.
  g.bytes_per_element = sixteen_bit(s.training.precision) == Precision::Bf16 ? 4 : 2;
  g.first_bucket_limit = g.bucket_limit = megatron_bucket_elements(s);
  sharded_reduction(s, g);
  g.stage3_bucket_buffer = zs == 3 && s.zero.contiguous_gradients;
  p.params.gather_after_step = gathers_partitions_after_step(s);
  // nanotron wraps the model in torch DistributedDataParallel whenever DP (or CP) > 1, at any ZeRO
  // stage (trainer.py, init_model: make_ddp), with gradient_as_bucket_view left False: DDP keeps
  // a 16-bit bucket copy of every gradient beside param.grad.
  g.bucket_copy = s.parallel.dp_cp() > 1;
  MemoryPolicy& m = p.memory;
  // The loss (models/llama.py and parallel/tensor_parallel/functional.py): the cast_to_fp32 block
  // turns the bf16 logits (2 bytes per logit, dropped when forward_with_hidden_states returns)
  // into fp32 (4), which LlamaForTraining.forward holds while sharded_cross_entropy runs;
  // `sharded_logits - logits_max` allocates another fp32 tensor (4) that exp and div_ overwrite
  // and the backward saves as the softmax: 8 at most in the forward, 4 saved. The backward edits
  // the softmax in place into the gradient and the cast's backward makes a bf16 copy (2).
  m.logits_saved = 4;
  m.logits_forward_temporaries = {4};
  m.logits_backward_temporaries = {2};
  // The step: the fp32 accumulator is the master weights' gradient (optim/gradient_accumulator.py)
  // and the benchmark configs use fused AdamW (examples/config_tiny_llama_bench.yaml,
  // torch_adam_is_fused: true), so nothing is allocated for it.
  m.step_bytes_per_element = 0;
  // FP32GradientAccumulator.backward runs loss.backward() and only then adds each bf16
  // param.grad into the fp32 buffer and sets it to None (_accumulate_grad). (nanotron has no
  // ZeRO-2/3; zerosim's stages 2/3 free each unit's param.grad after its hook instead.)
  m.half_grads_until_backward_end = zs < 2;
  // In bf16 the fold is fp32_grad.add_(param.grad) per parameter; in fp16 there is no fp32
  // accumulator and autograd accumulates into param.grad itself.
  m.fp32_fold_after_backward = m.half_grads_until_backward_end && g.bytes_per_element == 4;
  // ZeRO-1's gather of the updated parameters (optim/zero.py, _all_gather_params) calls
  // nanotron.distributed.all_gather_coalesced, which flattens the input slices and every rank's
  // output slices (_flatten_dense_tensors) before dist.all_gather and copies them back after.
  m.flat_param_gather = true;
  // The Llama layer (models/llama.py at nanotron 2411b022). What it saves: no dropout modules;
  // GLUActivation is act(gate) * up in eager PyTorch, so the multiply saves SiLU's output beside
  // the gate_up output; with as many key as query heads, QKV is permuted into one contiguous
  // tensor whose query view the flash rotary rotates in place and flash-attn saves, while K and V
  // are concatenated into a new tensor for the rotary (CausalSelfAttention.forward,
  // _forward_training). The norms (TritonRMSNorm) save their input as Megatron's do, the linears
  // their sequence-parallel shard, and the rotary only its cos/sin cache.
  p.layer.saves = {.dropout_masks = false, .eager_gated_activation = true,
                   .mha_qkv_held_whole = true};
  // How its elementwise kernels run: fused norms and rotary, an eager SwiGLU, copies of Q, K and
  // V, no dropout (ElementwiseOps::Nanotron, counted in layer_forward_work).
  p.layer.elementwise = ElementwiseOps::Nanotron;
  return p;
}

}  // namespace zerosim::plan_detail
