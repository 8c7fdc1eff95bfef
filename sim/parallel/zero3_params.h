#pragma once
// ZeRO-3 parameter residency in the steady state (the module trace recorded, so prefetch is
// active): for each use of a unit in a pass over a chunk (forward, full recomputation's replay,
// backward), which pre-hook gathers it and whether it is released after use. DeepSpeed >= 0.6 as
// its PartitionedParameterCoordinator queue runs it (ParameterPolicy::coordinator_queue: module
// by module, prefetch within stage3_prefetch_bucket_size and stage3_max_live_parameters, release
// by persistence, stage3_max_reuse_distance and what the prefetcher skipped); FSDP and DeepSpeed
// 0.3.13-0.5 as a window over the units that need a gather (the latter, zero.stage3_implementation
// = per-parameter, tensor by tensor with host-side tensor lists and no prefetch). Gathers follow
// the sharding variant: the whole DP group, a MiCS shard group, ZeRO++'s hpZ secondary copy or
// qwZ's int8 codes.
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

  // The fetch trace of one pass over a chunk: each unit's forward use, then, in reverse, each
  // unit's backward use, with full recomputation replayed before the layer's backward
  // (Scenario::replays_layers_before_backward) the replay's use of each of the layer's units
  // ahead of the layer's backward uses.
  enum class UseKind : std::uint8_t { Forward, Replay, Backward };
  // Positions in the trace: unit u's forward use is u.
  std::size_t backward_use(int chunk, std::size_t unit) const;
  std::size_t replay_use(int chunk, std::size_t unit) const;

  // A pass over `chunk`: its forward uses, then its replay and backward uses, in trace order.
  // `first_forward`: the chunk's first forward of the step (hpZ).
  void begin_forward(int chunk, bool first_forward);
  void end_forward(int mb, int chunk);
  void begin_backward(int mb, int chunk);
  // The pre-hook of a use, run after op `hook_after`: the gathers it issues; returns the gather
  // the use waits for (-1: none). Then whether the unit is released after the use.
  std::int32_t fetch(int chunk, std::size_t use, std::int32_t hook_after);
  bool release_after(int chunk, std::size_t use) const {
    return residency_[chunk].release_after[use];
  }

 private:
  struct Use {
    int unit;
    UseKind kind;
  };
  // A gather a pre-hook issues: call `call` (gather_calls) of the unit of use `use`, in the
  // coordinator's all-gather call `batch` (a module's own parameters, then what its pre-hook
  // prefetches; the issues of one call are consecutive).
  struct Issue {
    int use, call;
    int batch = 0;
  };
  struct Residency {
    std::vector<std::vector<std::int64_t>> calls;  // per unit: gather_calls
    std::vector<bool> persistent;
    std::vector<Use> trace;
    std::vector<bool> release_after;         // per use
    std::vector<std::vector<Issue>> issues;  // per use: what its pre-hook gathers, in order
    std::vector<std::size_t> backward_use, replay_use;  // per unit
  };
  void plan_chunk(int chunk);
  // The release after each use and the gathers of each pre-hook: one unit-level prefetch
  // window (FSDP, DeepSpeed's 2021 stage 3) or DeepSpeed's coordinator queue.
  void plan_window(Residency& r, const std::vector<Unit>& units) const;
  void plan_queue(Residency& r, const std::vector<Unit>& units) const;
  void issue_fetches(int chunk, std::size_t use, std::int32_t hook_after);
  // Calls [first, last] of use k's unit, issued together after `hook_after`; into `flat` (a
  // flat buffer's allocation, -1 for none) and copied out of it when the gather is done.
  std::int32_t gather(int chunk, std::size_t k, std::size_t first, std::size_t last,
                      std::int32_t hook_after, std::int32_t flat);
  // The ranks use k's gathers read their pieces from (MiCS's shard group, hpZ's node copy after
  // the first forward; otherwise the whole DP group).
  bool gathers_in_shard_group(int chunk, std::size_t k) const;
  // The flat buffer of the call made of issues [first, end) of a use's list: the padded pieces of
  // its parameters (0 when it gathers a single one, or when the framework gathers straight into
  // each parameter's own tensor).
  Bytes flat_buffer_bytes(int chunk, const std::vector<Issue>& issues, std::size_t first,
                          std::size_t end) const;
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
  std::vector<Residency> residency_;
  bool first_forward_ = false;
  // Gathers of the current pass per use; a pass's backward may use gathers its forward issued.
  std::vector<std::int32_t> fetch_op_;
  std::map<std::pair<int, int>, std::vector<std::int32_t>> pending_fetches_;  // (mb, chunk)
};

}  // namespace zerosim::plan_detail
