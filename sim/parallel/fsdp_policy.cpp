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
  return p;
}

}  // namespace zerosim::plan_detail
