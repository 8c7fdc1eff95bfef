#pragma once
// The updated 16-bit parameters back to every rank after the optimizer step: the partitions
// all-gathered at once (stages 1/2), stage 3's persistent parameters, or Megatron's
// --overlap-param-gather buckets dispatched one ahead during the next forward.
#include <cstdint>
#include <vector>

#include "sim/parallel/framework_policy.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/stage_template.h"

namespace zerosim::plan_detail {

class ParamGather {
 public:
  ParamGather(Emitter& e, const Scenario& s, const FrameworkPolicy& policy, const StagePlan& info,
              int dp_subgroup)
      : e_(e), s_(s), policy_(policy), info_(info), dp_subgroup_(dp_subgroup) {}

  // After the step (op `after`), on `stream`; `persistent`: the sizes of stage 3's
  // never-released tensors, which are gathered again (in one call, or one each under
  // persistent_per_tensor).
  void after_step(std::int32_t after, Stream stream, const std::vector<std::int64_t>& persistent);

  // Megatron --overlap-param-gather: the distributed optimizer's all-gather of the updated
  // parameters moves into the next step's forward. A forward pre-hook waits for its bucket's
  // gather and then dispatches the next bucket's, so the first bucket is exposed and each later
  // one overlaps the forward of the bucket before it (distributed_data_parallel.py forward
  // pre-hooks, param_and_grad_buffer.py finish_param_sync). Buckets follow the gradient buckets'
  // size, in forward order. In the steady state this step's gathers bring the previous step's
  // update.
  // With expert parallelism the routed experts have buffers and buckets of their own, gathered
  // over the expert-data-parallel group, in a chain of their own (Megatron-core's
  // expert_parallel_bucket_groups, each list chained by next_param_gather_bucket_group).
  struct Bucket {
    std::size_t first_unit;
    Bytes bytes;  // gathered_param_bytes per element
  };
  enum class Part : std::uint8_t { Dense, Experts };
  // The buckets of one part, over the units holding some of it.
  std::vector<Bucket> buckets(const std::vector<Unit>& units, Part part, int chunk) const;
  // The gather of `part` unit u's forward waits for; `current` is the one the previous unit
  // waited for, `start` what the first gather of the chunk follows.
  std::int32_t in_forward(int chunk, Part part, const std::vector<Bucket>& buckets, std::size_t u,
                          std::int32_t current, std::int32_t start);

 private:
  // A unit's elements of one part: its routed experts (with ep > 1), or the others.
  std::int64_t elements_of(const Unit& u, Part part) const;

  Emitter& e_;
  const Scenario& s_;
  const FrameworkPolicy& policy_;
  const StagePlan& info_;
  int dp_subgroup_;
  std::int32_t next_gather_[2] = {-1, -1};  // the next bucket's gather of each part
};

}  // namespace zerosim::plan_detail
