// PyTorch FSDP: FULL_SHARD (zero.stage 3) and SHARD_GRAD_OP (zero.stage 2) reduce-scatter each
// micro-batch's gradients from their post-backward hooks; HYBRID_SHARD (zero.mics_shard_size)
// shards inside a group and replicates across groups.
#include "sim/parallel/framework_policy.h"

namespace zerosim::plan_detail {

FrameworkPolicy fsdp_policy(const Scenario& s, int /*stage*/) {
  const int zs = s.zero.stage;
  FrameworkPolicy p;
  GradientPolicy& g = p.grads;
  g.when = ReduceWhen::EveryBackward;
  g.stream = hook_stream(s, g.when);
  g.bytes_per_element = 2;
  g.first_bucket_limit = g.bucket_limit = s.zero.reduce_bucket_size;
  sharded_reduction(s, g);
  g.stage3_bucket_buffer = zs == 3 && s.zero.contiguous_gradients;
  // HYBRID_SHARD all-reduces each reduced shard across the replicas at once
  // (_runtime_utils.py _reduce_grad).
  g.replicas = replica_reduce(s, ReplicaReduce::EachBucket);
  p.params.gather_after_step = gathers_partitions_after_step(s);
  // The FSDP runs zerosim reproduces are torchtitan's. Its loss (train.py, commit 9dec370):
  // cross_entropy(pred.flatten(0, 1).float(), labels) keeps the bf16 logits (2 bytes per logit)
  // and their fp32 copy (4) while log_softmax writes its output (4), which it saves; `del pred`
  // drops the bf16 logits before backward. The backward holds the saved output, nll_loss's
  // gradient (4) and log_softmax's gradient (4) at once.
  MemoryPolicy& m = p.memory;
  m.logits_saved = 4;
  m.logits_forward_temporaries = {2, 4};
  m.logits_backward_temporaries = {4, 4};
  // With TP, torchtitan computes the loss under loss_parallel() (on unless
  // --training.disable_loss_parallel; utils.py get_train_context at 9dec370), whose vocab-sharded
  // log_softmax (torch/distributed/tensor/parallel/loss.py) keeps `shifted = x - x_max` (4)
  // beside the bf16 logits and their fp32 copy while exp(shifted), then its output, is written;
  // its fused nll and log_softmax backward holds zeros_like(x), exp(x) and their sum (4 each)
  // beside the saved output.
  if (s.parallel.tp > 1) {
    m.logits_forward_temporaries = {2, 4, 4};
    m.logits_backward_temporaries = {4, 4, 4};
  }
  // The step: torchtitan builds AdamW with foreach = not fused and --optimizer.fused off by
  // default (optimizer.py, config_manager.py); PyTorch's _multi_tensor_adam takes
  // torch._foreach_sqrt(exp_avg_sqs), an fp32 copy of every second moment of the shard.
  m.step_bytes_per_element = 4;
  // torchtitan's model code runs op by op in eager PyTorch unless torch.compile fuses its
  // elementwise ops (training.compile; ElementwiseOps::Eager, counted in layer_forward_work).
  p.layer.elementwise = s.training.torch_compile ? ElementwiseOps::Fused : ElementwiseOps::Eager;
  // Its MoE multiplies an fp32 copy of the routed tokens by the router's scores, before the
  // experts or after them (score_before_experts; token_dispatcher.py combine at b5bcd76), and
  // autograd keeps that copy for the scores' gradient.
  p.layer.saves.moe_scored_copy_bytes = 4;
  // Its models (models/llama3, deepseek_v3) have no dropout modules: no masks whatever the rate.
  p.layer.saves.dropout_masks = false;
  return p;
}

}  // namespace zerosim::plan_detail
