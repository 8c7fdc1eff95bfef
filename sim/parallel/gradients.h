#pragma once
// Data-parallel gradient reduction of one pipeline stage: backward hooks hand each unit's
// gradients to buckets, buckets are reduced by the framework's collective on its stream
// (framework_policy.h), by sharding variant (the whole DP group; a MiCS / HYBRID_SHARD shard
// group and its replicas; ZeRO++ qgZ's int4 all-to-alls; DeepSpeed 0.3's per-tensor
// reduce-scatters), and the reduced partitions go to the host when the optimizer is offloaded.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/parallel/framework_policy.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/offload.h"
#include "sim/parallel/stage_template.h"

namespace zerosim::plan_detail {

class GradientReducer {
 public:
  GradientReducer(Emitter& e, const Scenario& s, const GradientPolicy& policy,
                  const StagePlan& info, int dp_subgroup, Offload& offload)
      : e_(e), s_(s), g_(policy), info_(info), dp_subgroup_(dp_subgroup), offload_(offload) {}

  // Every backward pass starts here (DeepSpeed's optimizer.backward() sets up its buckets
  // first); `accumulating`: not the chunk's first backward of the step.
  void begin_backward(bool accumulating, int chunk);
  // A backward hook: `params` gradients, in `tensors` parameter tensors, are ready after op
  // `produced_by`.
  void gradient_ready(std::int64_t params, std::int32_t produced_by, std::int64_t tensors = 1);
  // A unit's backward produced its gradients: handed over as one, or tensor by tensor when the
  // framework hooks every parameter (weights in reverse module order, each followed by its
  // share of the unit's small tensors).
  void unit_gradients_ready(const Unit& u, std::int32_t produced_by);
  // DeepSpeed 0.3.13-0.5 stage 3: one reduce-scatter per parameter tensor of the unit.
  void per_parameter_reduce(const Unit& u, std::int32_t produced_by);
  // The end of a backward whose hooks ran: the pending bucket, replica reductions, buffers.
  void end_backward(std::int32_t last_backward, bool last_of_step);
  // After the pipeline flush: every chunk's gradients, bucket by bucket in model order, on the
  // compute stream (Megatron's finalize_model_grads / DeepSpeed's reduce_gradients); a chunk's
  // buckets hold its own gradients only (each chunk is a DDP module with its own buffer).
  void reduce_after_flush(const std::vector<std::vector<Unit>>& chunks, std::int32_t after);

  // With expert parallelism: the routed experts' gradients, in buckets of their own (Megatron's
  // expert buffers, DeepSpeed-MoE's expert parameter groups) reduced over the
  // expert-data-parallel group with the framework's collective; no throttle.
  void expert_gradients_ready(std::int64_t params, std::int32_t produced_by);

  // The op after which the last reduction of the step is done (-1: none).
  std::int32_t final_reduction() const { return final_reduction_; }

 private:
  void setup_buckets(bool accumulating);
  // The elements the bucket being filled may hold.
  std::int64_t bucket_limit() const;
  void flush(std::int32_t produced_by);
  void flush_experts(std::int32_t produced_by);
  void flush_elements(std::int64_t elements, std::int64_t tensors, std::int32_t produced_by);
  std::int32_t reduce_bucket(std::int64_t elements, const std::string& name,
                             const std::vector<std::int32_t>& deps);

  Emitter& e_;
  const Scenario& s_;
  const GradientPolicy& g_;
  const StagePlan& info_;
  int dp_subgroup_;
  Offload& offload_;

  std::int64_t bucket_elements_ = 0, expert_bucket_elements_ = 0;
  std::int64_t bucket_tensors_ = 0;  // parameter tensors in the bucket being filled
  int bucket_count_ = 0, expert_bucket_count_ = 0;
  int chunk_ = 0;  // the model chunk whose gradients are being bucketed
  std::int32_t last_reduction_ = -1, prev_reduction_ = -1, older_reduction_ = -1;
  std::int32_t final_reduction_ = -1;
  bool accumulating_ = false;
  bool ipg_allocated_ = false, partition_temp_ = false;
  Bytes ipg_bytes_ = 0;
};

}  // namespace zerosim::plan_detail
