// DeepSpeed's ZeRO engine (runtime/zero/stage_1_and_2.py, stage3.py) and, at stage 0, the
// PyTorch DDP that DeepSpeed wraps; with pipeline parallelism, DeepSpeed's pipeline engine.
#include "sim/parallel/framework_policy.h"

namespace zerosim::plan_detail {

FrameworkPolicy deepspeed_policy(const Scenario& s, int /*stage*/) {
  const ZeroConfig& z = s.zero;
  const int zs = z.stage;
  FrameworkPolicy p;
  GradientPolicy& g = p.grads;
  if (zs >= 2) {
    g.when = ReduceWhen::EveryBackward;  // reduce into the owner's partition every micro-batch
  } else if (s.parallel.pp > 1) {
    g.when = ReduceWhen::AfterBackward;  // the pipeline engine's ReduceGrads after the flush
  } else if (zs == 0) {
    g.when = ReduceWhen::LastBackward;   // PyTorch DDP under no_sync() until the last
  } else {
    g.when = z.overlap_comm ? ReduceWhen::LastBackward : ReduceWhen::AfterBackward;
  }
  g.stream = hook_stream(s, g.when);
  g.bytes_per_element = 2;  // DeepSpeed and DDP reduce the 16-bit gradients
  if (zs == 0 && g.when == ReduceWhen::LastBackward) {
    // PyTorch DDP: bucket_cap_mb = 25 MiB of 16-bit gradients, the first bucket 1 MiB; DDP keeps
    // its own bucket buffers beside param.grad (gradient_as_bucket_view defaults to False).
    g.rule = BucketRule::CloseAtCap;
    g.first_bucket_limit = (1 << 20) / 2;
    g.bucket_limit = 25 * (1 << 20) / 2;
    g.bucket_copy = true;
  } else {
    g.first_bucket_limit = g.bucket_limit = z.reduce_bucket_size;
  }
  if (zs == 1 || zs == 2) {
    // average_tensor: with reduce_scatter and use_multi_rank_bucket_allreduce (defaults since
    // DeepSpeed 0.12) one all-reduce of the whole bucket; without it one reduce per owning
    // rank, which moves what a reduce-scatter moves.
    const bool all_reduce = !z.reduce_scatter || z.use_multi_rank_bucket_allreduce;
    g.collective = all_reduce ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter;
    g.collective_name = all_reduce ? "grad all_reduce" : "grad reduce (to owners)";
  } else {
    sharded_reduction(s, g);
  }
  g.stage3_bucket_buffer = zs == 3 && z.contiguous_gradients;
  // setup_buckets: reduce_bucket_size 16-bit elements, two of them with overlap_comm.
  g.ipg_buffer = (zs == 1 || zs == 2) && z.contiguous_gradients;
  // Stage 2 reduces a later micro-batch's partition into a temporary and adds it to the first.
  g.accumulate_in_temporary = zs == 2;
  if (zs != 0 && g.stream == Stream::DpComm) {
    // Before filling a bucket the compute stream waits for the reduction of the bucket before the
    // previous one (two IPG buffers); stage 3 keeps at most two reductions in flight
    // (max_param_reduce_events). The epilogue synchronizes the accelerator.
    g.throttle_depth = zs == 3 ? 2 : 1;
    g.sync_at_end = true;
  }
  // MiCS (mics.py): the reduced shard is all-reduced across the replication group once, at the
  // accumulation boundary (all_reduce_coalesced over param_repli_group).
  g.replicas = replica_reduce(s, ReplicaReduce::OncePerStep);
  p.params.gather_after_step = gathers_partitions_after_step(s);
  if (zs == 3 && !z.per_parameter_stage3()) {
    // Stage 3 as DeepSpeed >= 0.6 runs it (partitioned_param_coordinator.py, stage3.py,
    // runtime/comm/coalesced_collectives.py): module hooks, a gradient hook per parameter with
    // the bucket flushed before a gradient that would overflow it
    // (reduce_independent_p_g_buckets_and_remove_grads), reduce_scatter_coalesced's per-rank
    // slices on the host, and the persistent tensors (v0.6.2 to the newest release) gathered
    // one by one after the step. Each module's compute waits for its own gathers (and, the
    // process group's NCCL stream being in order, for what was issued before them): the gather
    // stream it waits on holds only the waits on those handles, the collectives running on
    // ProcessGroupNCCL's stream.
    p.params.gather_per_module = true;
    p.params.persistent_per_tensor = true;
    p.params.coordinator_queue = true;
    // partition_parameters.py all_gather_coalesced and AllGatherCoalescedHandle.wait, the same
    // from v0.6.0 to the newest release: the flat buffer and the torch.cat copies both on the
    // coordinator's all-gather stream (partitioned_param_coordinator.py fetch_sub_module waits
    // inside that stream's context).
    p.params.allocates_tensor_by_tensor = true;
    g.per_tensor_hooks = true;
    g.reduce_host_ops_per_rank = 1;
  }
  // fp32 gradients handed to the optimizer: stage 0 upcasts every gradient; stages 1/2 flatten
  // the averaged 16-bit partition (2 bytes) and upcast it (4 bytes); stage 3 the same per
  // sub-group of at most sub_group_size (1e9) elements. DeepSpeed's FusedAdam is one
  // multi-tensor kernel with no temporaries of its own.
  p.memory.step_bytes_per_element = zs == 0 ? 4 : 6;
  p.memory.step_per_subgroup = zs == 3;
  // The models DeepSpeed runs here are Megatron-DeepSpeed's: its loss is Megatron's vocab-parallel
  // cross-entropy (the MemoryPolicy defaults, megatron_policy.cpp) and its layer dispatches what
  // Megatron's does.
  p.host = megatron_gpt_layer_host_ops();
  return p;
}

}  // namespace zerosim::plan_detail
