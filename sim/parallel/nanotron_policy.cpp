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
  g.bytes_per_element = s.training.precision == Precision::Bf16 ? 4 : 2;
  g.first_bucket_limit = g.bucket_limit = megatron_bucket_elements(s);
  sharded_reduction(s, g);
  g.stage3_bucket_buffer = zs == 3 && s.zero.contiguous_gradients;
  p.params.gather_after_step = gathers_partitions_after_step(s);
  return p;
}

}  // namespace zerosim::plan_detail
