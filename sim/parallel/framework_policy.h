#pragma once
// What a training framework decides about gradients and parameters, answered once per pipeline
// stage: when the data-parallel gradient reduction runs, on which stream, in what buckets, in what
// dtype and with which collective, which buffers it keeps, and how updated parameters come back.
// The plan builder reads these answers and never asks which framework it is building for.
//
// One function per framework, each in its own file (deepspeed_policy.cpp, megatron_policy.cpp,
// fsdp_policy.cpp, nanotron_policy.cpp; CMake picks up every *_policy.cpp), each citing the code
// it mirrors. A new framework is one such file, its name in sim/scenario/scenario.h (Framework,
// kFrameworkNames) and its declaration and case in framework_policy.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/plan.h"
#include "sim/parallel/training_plan.h"
#include "sim/scenario/scenario.h"

namespace zerosim::plan_detail {

// When data-parallel gradient reduction runs.
enum class ReduceWhen {
  EveryBackward,  // hooks in each micro-batch's backward (DeepSpeed ZeRO-2/3, FSDP)
  LastBackward,   // hooks in the last micro-batch's backward (DDP, DeepSpeed ZeRO-1 with
                  // overlap_comm, Megatron --overlap-grad-reduce)
  AfterBackward,  // after the last backward (pipeline flush): Megatron, nanotron, DeepSpeed's
                  // pipeline engine and ZeRO-1 without overlap_comm
};

// How a bucket fills: PyTorch DDP closes a bucket once it holds at least its cap; DeepSpeed
// reduces the pending bucket before a gradient would overflow it, and a gradient larger than the
// cap alone.
enum class BucketRule { CloseAtCap, FlushBeforeOverflow };

// With hybrid sharding (zero.mics_shard_size), how the shard group's reduced gradients are
// combined across the replica groups.
enum class ReplicaReduce {
  None,        // no replicas (the shard group is the whole DP group)
  EachBucket,  // PyTorch FSDP HYBRID_SHARD: all-reduce of each bucket's shard right away
  OncePerStep  // DeepSpeed MiCS: one all-reduce of the partition at the accumulation boundary
};

struct GradientPolicy {
  ReduceWhen when = ReduceWhen::EveryBackward;
  Stream stream = Stream::Compute;
  Bytes bytes_per_element = 2;  // the dtype gradients are accumulated and kept in
  Bytes reduce_bytes_per_element = 2;  // the dtype they are reduced in
  BucketRule rule = BucketRule::FlushBeforeOverflow;
  // Elements per bucket: the first one, and every later one.
  std::int64_t first_bucket_limit = 0, bucket_limit = 0;
  // Model chunks after the first (interleaved pipeline stages) keep one bucket each, for the
  // gradients and the parameter gathers that follow them (Megatron-core's disable_bucketing).
  bool one_bucket_after_first_chunk = false;
  CollectiveKind collective = CollectiveKind::AllReduce;
  std::string collective_name;  // how the op is named, e.g. "grad reduce_scatter"
  // Buffers: a second copy of every gradient (DDP's bucket views); a reduce_bucket_size buffer
  // held for the whole step (stage 3's contiguous gradients); the IPG buffer, allocated at the
  // first hook setup and double-buffered with overlap_comm (DeepSpeed stages 1/2); a partition
  // temporary for the micro-batches after the first (DeepSpeed stage 2).
  bool bucket_copy = false;
  bool stage3_bucket_buffer = false;
  bool ipg_buffer = false;
  bool accumulate_in_temporary = false;
  // The compute stream waits before filling a bucket while the reduction `throttle_depth`
  // buckets back is in flight (1: the previous one, two IPG buffers; 2: stage 3's two reductions
  // in flight); 0 = never. sync_at_end: the backward ends with a wait for the last reduction.
  int throttle_depth = 0;
  bool sync_at_end = false;
  ReplicaReduce replicas = ReplicaReduce::None;
  // Hooks see every parameter tensor on its own (DeepSpeed registers one per parameter), so the
  // bucket rule applies tensor by tensor: a weight larger than the bucket is reduced alone and
  // the biases and norms between weights go in small buckets of their own.
  bool per_tensor_hooks = false;
  // Host ops per rank and per tensor before each bucket's collective (DeepSpeed's
  // reduce_scatter_coalesced slices every tensor of the bucket once per rank in Python); on the
  // training thread, so compute waits.
  int reduce_host_ops_per_rank = 0;
};

struct ParameterPolicy {
  // After the optimizer step, the updated 16-bit partitions are all-gathered (stages 1/2)...
  bool gather_after_step = false;
  // ...or, with Megatron's --overlap-param-gather, bucket by bucket during the next forward.
  bool gather_in_next_forward = false;
  // Stage 3 gathers each module's parameters with a collective of its own (DeepSpeed's hooks are
  // per nn.Module: fused QKV, output projection, each MLP linear), not one per unit.
  bool gather_per_module = false;
  // Stage 3 decides persistence tensor by tensor (DeepSpeed's ds_persist: ds_numel against
  // stage3_param_persistence_threshold), so a large module's biases and norms stay gathered, and
  // after the step gathers every persistent tensor again with an all-gather of its own
  // (stage3.py _post_step -> partition_parameters.py _allgather_params_coalesced).
  bool persistent_per_tensor = false;
  // Stage 3 fetches as DeepSpeed's PartitionedParameterCoordinator (>= 0.6) does: a queue of the
  // traced modules' parameters that each module's pre-hook pops, its own first, then, to prefetch,
  // until stage3_prefetch_bucket_size elements are being gathered (0.6.0-0.6.3: until that many
  // were popped, gathered already or not) within stage3_max_live_parameters of gathered ones.
  // Otherwise a window over the units that need a gather (FSDP).
  bool coordinator_queue = false;
  // Stage 3 allocates a gather tensor by tensor: a call of several parameters all-gathers into one
  // flat buffer and, waited on, copies each parameter out of it into a tensor of its own (then
  // drops the flat buffer); a call of one parameter gathers into that parameter's own buffer. Its
  // 16-bit gradients are autograd's, one tensor per parameter. Otherwise a unit's gather and its
  // gradients are one block each (FSDP's flat parameters).
  bool allocates_tensor_by_tensor = false;
};

// What the framework allocates beyond model states and activations around the loss and the
// optimizer step, and the gradient copies autograd leaves while it accumulates.
struct MemoryPolicy {
  // The cross-entropy over the s x b x V/tp logits of a micro-batch, in bytes per logit element:
  // the tensor its backward needs (the fp32 softmax or log-softmax), held from the head's forward
  // to its backward, and the tensors that live beside it while the loss's forward and backward
  // run (the 16-bit logits, fp32 copies, gradients of the loss chain), one entry per tensor in
  // the order they are allocated: the caching allocator places each on its own
  // (sim/memory/caching_allocator.h), so how a loss splits its bytes decides what it reserves.
  int logits_saved = 4;
  std::vector<int> logits_forward_temporaries = {2}, logits_backward_temporaries = {2};
  // fp32 gradients (and optimizer temporaries) of the step, bytes per updated element, allocated
  // before the step and freed after it; per_subgroup: once per DeepSpeed stage-3 sub-group of at
  // most sub_group_size (1e9) elements instead of for the whole partition.
  int step_bytes_per_element = 0;
  bool step_per_subgroup = false;
  // The 16-bit param.grad autograd leaves on every parameter of the stage stays until the
  // micro-batch's backward has ended (a framework that folds gradients into its own buffer after
  // loss.backward() rather than from per-parameter hooks).
  bool half_grads_until_backward_end = false;
  // ...and the fold is a pass of its own over them: one add_ per parameter tensor into an fp32
  // accumulator (nanotron's FP32GradientAccumulator), a GradAccumulate work after the backward.
  bool fp32_fold_after_backward = false;
  // The all-gather of the updated partitions after the step goes through flat copies: the
  // rank's partition and the whole gathered stage, 16 bits each, for the length of the gather.
  bool flat_param_gather = false;
};

// How the framework's model code runs a transformer layer where it differs from Megatron-core's
// fused layer: what its autograd saves for backward (the activation memory) and how its
// elementwise kernels run (their HBM traffic, sim/model/model.cpp layer_forward_work).
struct LayerCodePolicy {
  LayerSaves saves;
  ElementwiseOps elementwise = ElementwiseOps::Fused;
};

// What the host dispatches in eager PyTorch for one pass over a layer block: every op the
// framework's Python issues (a kernel launch, a view, an allocation, a collective call), each a
// trip through PyTorch's dispatcher that the GPU cannot run ahead of. A block pass then takes at
// least its ops x the host time per counted op (fitted.layer_host_op_time). 0: not counted for
// the framework's model code, the GPU time stands alone.
struct HostPolicy {
  int attention_forward_ops = 0, mlp_forward_ops = 0;
  int attention_backward_ops = 0, mlp_backward_ops = 0;
  // Activation checkpointing's own ops per checkpointed layer (saving and restoring the RNG
  // states, detaching the inputs), dispatched in the backward before the recomputed forward.
  int checkpoint_ops_per_layer = 0;
  // An MoE layer's MLP half (router, dispatch, experts, combine), where counted; 0: the dense
  // MLP half's counts stand for it.
  int moe_forward_ops = 0, moe_backward_ops = 0;
};

struct FrameworkPolicy {
  GradientPolicy grads;
  ParameterPolicy params;
  MemoryPolicy memory;
  LayerCodePolicy layer;
  HostPolicy host;
};

// The policy of the scenario's framework for pipeline stage `stage`.
FrameworkPolicy framework_policy(const Scenario& s, int stage);

// Pieces the policies share.
// The stream of reductions issued from backward hooks: overlap_comm's side stream or the
// compute stream; after the backward they run on the compute stream.
Stream hook_stream(const Scenario& s, ReduceWhen when);
// ZeRO-3 and sharded optimizers reduce-scatter into the owners' shards (zero.reduce_scatter
// false: all-reduce); stage 0 all-reduces.
void sharded_reduction(const Scenario& s, GradientPolicy& g);
// Megatron-core's bucket size: max(40M, 1M x dp) elements (distributed_data_parallel.py).
std::int64_t megatron_bucket_elements(const Scenario& s);
// A model chunk's bucket limit: `limit`, or none where the framework keeps that chunk in one
// bucket.
std::int64_t chunk_bucket_limit(const GradientPolicy& g, int chunk, std::int64_t limit);
// Stages 1/2 all-gather the updated partitions after the step.
bool gathers_partitions_after_step(const Scenario& s);
// With hybrid sharding, how replicas combine (None without replica groups).
ReplicaReduce replica_reduce(const Scenario& s, ReplicaReduce with_replicas);
// The ops Megatron-DeepSpeed's GPT layer dispatches in eager PyTorch (the model code Megatron
// and DeepSpeed runs share here).
HostPolicy megatron_gpt_layer_host_ops();
// The MoE MLP half of Megatron-core's layer into `h` (framework_policy.cpp says how counted).
void count_megatron_core_moe_ops(const Scenario& s, HostPolicy& h);

}  // namespace zerosim::plan_detail

namespace zerosim {

// The forward work of one layer of the scenario (at its micro-batch, TP, attention, expert
// parallelism, routing imbalance and CP) as its framework's layer code runs it: an MoE layer's
// with `moe`, else a dense layer's.
LayerWork layer_work(const Scenario& s, bool moe);

}  // namespace zerosim
