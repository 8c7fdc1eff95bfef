#pragma once
// ZeRO-3 parameter residency as DeepSpeed's partitioned_param_coordinator runs it in the steady
// state (the module trace is recorded, so prefetch is active): for each use of a unit in a pass
// over a chunk, whether it must be gathered first, which pre-hook issues that gather (fetch and
// prefetch up to stage3_prefetch_bucket_size within stage3_max_live_parameters), and whether it
// is released after use (persistence threshold, stage3_max_reuse_distance). Gathers follow the
// sharding variant: the whole DP group, a MiCS shard group, ZeRO++'s hpZ secondary copy or qwZ's
// int8 codes; DeepSpeed 0.3.13-0.5 (zero.stage3_implementation = per-parameter) gathers tensor by
// tensor with host-side tensor lists and no prefetch.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "sim/parallel/framework_policy.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/offload.h"
#include "sim/parallel/stage_template.h"

namespace zerosim::plan_detail {

// DeepSpeed 0.3.13-0.5 built a Python list of world-size tensor views for each collective and
// torch.distributed copied it into or out of a flat buffer one rank at a time: host work of dp
// ranks on the compute stream (the training thread does it and the GPU waits).
std::int32_t tensor_list_op(Emitter& e, const Scenario& s, const std::string& name,
                            const std::vector<std::int32_t>& deps);

// ZeRO++ qwZ (DeepSpeed's CUDAQuantizer): elements per fp32 scale.
inline constexpr std::int64_t kQwzGroup = 8000;
// An elementwise (de)quantization kernel moving `bytes` through HBM.
std::int32_t quantize_op(Emitter& e, Bytes bytes, Stream stream, const std::string& name,
                         const std::vector<std::int32_t>& deps);

class Zero3Params {
 public:
  Zero3Params(Emitter& e, const Scenario& s, const std::vector<std::vector<Unit>>& chunks,
              int dp_subgroup, const ParameterPolicy& policy, Offload& offload)
      : e_(e), s_(s), chunks_(chunks), dp_subgroup_(dp_subgroup), policy_(policy),
        offload_(offload) {}

  // Plans every chunk's residency; then the memory it holds for the whole step.
  void plan();
  Bytes persistent_bytes() const;            // gathered once, never released (16-bit)
  // The buffer a unit's gather fills (gathered_param_bytes per element).
  Bytes gathered_bytes(const Unit& u) const { return gathered_param_bytes(s_, u) * fetched(u); }
  // The size of every persistent tensor, which the step's end gathers again.
  std::vector<std::int64_t> persistent_tensors() const;
  Bytes hpz_secondary_bytes() const;         // hpZ's secondary partition (16-bit)
  // Under persistent_per_tensor, whether a unit's small tensors (biases, norms) persist while its
  // weights do not. ASSUMPTION: they are of one size, the mean (biases and norms of the hidden
  // size or a small multiple of it), judged against the threshold together.
  bool smalls_persist(const Unit& u) const;
  // The elements a fetch of the unit gathers: all of them, or its weights when its small tensors
  // persist.
  std::int64_t fetched(const Unit& u) const {
    return smalls_persist(u) ? u.params - small_tensor_elements(u) : u.params;
  }

  // Forward over `chunk`: the gathers unit u waits for (-1: none), and whether it is released
  // after its forward. `first_forward`: the chunk's first forward of the step (hpZ).
  void begin_forward(int chunk, bool first_forward);
  std::int32_t fetch_forward(int chunk, std::size_t u, std::int32_t hook_after);
  bool release_after_forward(int chunk, std::size_t u) const;
  void end_forward(int mb, int chunk);
  // Backward over the chunk's units in reverse: unit i is use 2n - 1 - i of the trace.
  void begin_backward(int mb, int chunk);
  std::int32_t fetch_backward(int chunk, std::size_t use, std::int32_t hook_after);
  bool release_after_backward(int chunk, std::size_t unit, std::size_t use) const;
  // The last gather issued before the most recent pre-hook (-1: none): what a compute op waits
  // for besides its own gather when the framework waits for the whole gather stream.
  std::int32_t gathers_before_hook() const { return issued_before_hook_; }

 private:
  // The fetch trace of one pass over a chunk: forward uses of its units, then backward uses in
  // reverse. For each use, whether the unit must be gathered first and whether it is released.
  struct Residency {
    std::vector<bool> persistent, keep_after_forward, needs_fetch;
    std::vector<std::pair<int, bool>> trace;  // (unit, backward)
    std::vector<int> issue_at;
  };
  void plan_chunk(int chunk);
  void issue_fetches(int chunk, std::size_t use, std::int32_t hook_after);
  std::int32_t per_parameter_gather(const Unit& u, bool backward, std::int32_t after);
  // The elements of each all-gather over the DP group that fetches a unit (its routed experts
  // apart, expert_group_params).
  std::vector<std::int64_t> gather_calls(const Unit& u) const;

  Emitter& e_;
  const Scenario& s_;
  const std::vector<std::vector<Unit>>& chunks_;
  int dp_subgroup_;
  const ParameterPolicy& policy_;
  Offload& offload_;
  std::int32_t last_issued_ = -1, issued_before_hook_ = -1;
  std::vector<Residency> residency_;
  bool first_forward_ = false;
  // Fetches of the current pass; a pass's backward may use gathers its forward prefetched.
  std::vector<std::int32_t> fetch_op_;
  std::map<std::pair<int, int>, std::vector<std::int32_t>> pending_fetches_;  // (mb, chunk)
};

}  // namespace zerosim::plan_detail
