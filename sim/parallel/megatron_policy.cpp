// Megatron-LM / Megatron-core: DDP over a contiguous gradient buffer, the distributed optimizer
// (zero.stage 1) and the finalize_model_grads step after the pipeline flush.
#include "sim/parallel/framework_policy.h"

#include <limits>

namespace zerosim::plan_detail {

FrameworkPolicy megatron_policy(const Scenario& s, int stage) {
  const int zs = s.zero.stage;
  const bool overlap = s.parallel.overlap_grad_reduce;
  FrameworkPolicy p;
  GradientPolicy& g = p.grads;
  if (zs < 2 && overlap) {
    // --overlap-grad-reduce: buckets are reduced as their gradients become ready in the last
    // micro-batch's backward (DistributedDataParallel.register_grad_ready).
    g.when = ReduceWhen::LastBackward;
  } else {
    g.when = zs >= 2 ? ReduceWhen::EveryBackward : ReduceWhen::AfterBackward;
  }
  // The overlapped bucket reductions are asynchronous collectives (async_op=True), which PyTorch
  // runs on the process group's own NCCL stream.
  g.stream = overlap && g.when != ReduceWhen::AfterBackward ? Stream::DpComm
                                                            : hook_stream(s, g.when);
  // Megatron accumulates and reduces gradients in fp32 when training in bf16
  // (accumulate_allreduce_grads_in_fp32; parallel.grad_reduce_in_fp32).
  const bool fp32_grads = s.parallel.grad_reduce_in_fp32;
  g.bytes_per_element = fp32_grads ? 4 : 2;
  // Megatron-core (distributed_data_parallel.py and training.py get_model at d98e8a6) keeps
  // one bucket per model chunk without --overlap-grad-reduce (bucket_size None), on pipeline
  // ranks after the first, and for every model chunk after the first (disable_bucketing).
  g.first_bucket_limit = g.bucket_limit = !overlap || stage > 0
                                              ? std::numeric_limits<std::int64_t>::max()
                                              : megatron_bucket_elements(s);
  g.one_bucket_after_first_chunk = true;
  if (zs == 0 && g.when == ReduceWhen::LastBackward) {
    g.rule = BucketRule::CloseAtCap;
    g.bucket_copy = true;
  }
  sharded_reduction(s, g);
  g.stage3_bucket_buffer = zs == 3 && s.zero.contiguous_gradients;
  p.params.gather_after_step = gathers_partitions_after_step(s);
  p.params.gather_in_next_forward = s.parallel.overlap_param_gather;
  // The loss (megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy): the
  // 16-bit logits stay referenced by the caller while the loss casts them to fp32 and subtracts the
  // maximum in place ("In-place subtraction reduces memory pressure"), so the forward holds
  // 2 + 4 bytes per logit; the fp32 softmax is saved (4); the backward turns it into the
  // gradient in place and the cast's backward adds its 16-bit copy (2). The defaults.
  // The step: the main parameters' gradients are the main_grad buffer itself when it is fp32
  // (.float() of an fp32 tensor is no copy); with 16-bit gradients it is an fp32 copy (4 bytes
  // per updated element; the Megatron-LM README counts it: fp16 params and grads take 20 bytes
  // per parameter, 4 + 16/d with the distributed optimizer). Apex/TE FusedAdam keeps no
  // temporaries.
  p.memory.step_bytes_per_element = fp32_grads ? 0 : 4;
  p.layer.saves.activation_input_fp8 = s.parallel.activation_func_fp8_input_store;
  p.host = megatron_gpt_layer_host_ops();
  count_megatron_core_moe_ops(s, p.host);
  return p;
}

}  // namespace zerosim::plan_detail
