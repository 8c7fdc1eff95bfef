#pragma once
// Plan builders: turn a resolved Scenario into the per-rank op DAG that DeepSpeed / PyTorch DDP
// would run for one training step (steady state: the stage-3 trace is complete, so prefetch is
// active). Builders never compute a duration; they say what runs, where, after what.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/enum_names.h"
#include "sim/core/plan.h"
#include "sim/scenario/scenario.h"

namespace zerosim {

// Compute work the cost model prices. One layer pass is split into its attention block and its
// MLP block so that ZeRO-3 can fetch and release each block's parameters on its own.
// Offload adds host-side work: the optimizer step on the CPU (DeepSpeed's CPU Adam, with the
// optimizer states swapped from NVMe for ZeRO-Infinity) and copies over PCIe.
enum class WorkKind : std::uint8_t {
  EmbedForward, EmbedBackward, AttentionForward, AttentionBackward, MlpForward, MlpBackward,
  MoeForward, MoeBackward,  // the feed-forward block of an MoE layer
  // An MTP module's own work besides its transformer layer: the next tokens' embedding rows,
  // enorm, hnorm, eh_proj [2h -> h] and its final norm (ModelSpec::mtp_num_layers).
  MtpForward, MtpBackward,
  HeadForward, HeadBackward, OptimizerStep, CpuOptimizerStep, HostToDevice, DeviceToHost,
  NvmeToDevice, Quantize, HostOverhead,
  // A framework's fold of a micro-batch's 16-bit gradients into its own fp32 buffer after the
  // backward (nanotron's FP32GradientAccumulator): one add_ per parameter tensor.
  GradAccumulate
};

// Which share of a layer block's backward a Work stands for: all of it, or, in a schedule that
// splits it (zero-bubble, Qi et al. ICLR 2024 section 2), the pass B that computes the input
// gradient (the dgrad GEMMs, the attention core's and the elementwise kernels' backward, the
// recomputation) or the pass W that computes the weight gradient (the wgrad GEMMs). Where the
// column-parallel linear that opens a dense attention or MLP block reduces its input gradient
// asynchronously (Scenario::async_tp_input_gradient), the block's backward is three Works in a
// row: all but that linear (BeforeInputLinear), its dgrad GEMM (InputLinearDgrad), beside which
// it gathers its sequence-parallel input again, and its wgrad GEMM (InputLinearWgrad), beside
// which the input gradient is reduced.
enum class BackwardPart : std::uint8_t {
  Whole, Input, Weight, BeforeInputLinear, InputLinearDgrad, InputLinearWgrad
};
inline constexpr int kNumBackwardParts = 6;

// A pass of a dense layer's attention or MLP block (not an MoE block's).
inline bool is_dense_layer_block(WorkKind k) {
  return k == WorkKind::AttentionForward || k == WorkKind::AttentionBackward ||
         k == WorkKind::MlpForward || k == WorkKind::MlpBackward;
}

// A backward of an attention, MLP or MoE block: what a zero-bubble schedule splits into B and W.
inline bool is_layer_backward(WorkKind k) {
  return k == WorkKind::AttentionBackward || k == WorkKind::MlpBackward ||
         k == WorkKind::MoeBackward;
}

// Whether the backward of kind `k` starts (in forward order) with a column-parallel linear on
// the block's input: a dense MLP block, or a dense attention block but MLA's, whose
// up-projections follow replicated down-projections.
inline bool opens_with_column_linear(const Scenario& s, WorkKind k) {
  return k == WorkKind::MlpBackward || (k == WorkKind::AttentionBackward && !s.model.is_mla());
}

// Whether the backward of a block of kind `k` is split at its input linear (BackwardPart): where
// it opens with a column-parallel linear and the scenario reduces its input gradient
// asynchronously.
inline bool splits_at_input_linear(const Scenario& s, WorkKind k) {
  return s.async_tp_input_gradient() && opens_with_column_linear(s, k);
}

// The parts of a split backward that are one GEMM of the input linear, its dgrad or its wgrad.
inline bool is_input_linear_gemm(BackwardPart p) {
  return p == BackwardPart::InputLinearDgrad || p == BackwardPart::InputLinearWgrad;
}

struct Work {
  WorkKind kind = WorkKind::AttentionForward;
  // OptimizerStep, CpuOptimizerStep: parameters updated on this rank; copies: bytes moved;
  // Quantize, GradAccumulate: bytes read and written in HBM; HostOverhead: PyTorch ops the host
  // dispatches (a tensor list's views and copies, one or two per rank).
  std::int64_t elements = 0;
  // CpuOptimizerStep: bytes swapped between host memory and NVMe around the step (ZeRO-Infinity).
  std::int64_t nvme_bytes = 0;
  // A layer block's pass: the PyTorch ops the host dispatches for it (recomputation included),
  // whose dispatch the GPU cannot outrun (framework_policy.h, HostPolicy); GradAccumulate: its
  // kernels, one per parameter tensor.
  std::int64_t host_ops = 0;
  // A layer block's backward: whole, or its B or W pass.
  BackwardPart part = BackwardPart::Whole;
};

// Ep: the token all-to-alls of expert parallelism (the expert gradients' reduction over the
// expert-data-parallel group is Dp traffic); Cp: context parallelism's key/value exchanges.
enum class GroupKind : std::uint8_t { Dp, Tp, Pp, Ep, Cp };
inline constexpr int kNumGroupKinds = 5;
inline constexpr EnumName<GroupKind> kGroupKindNames[] = {
    {GroupKind::Dp, "dp"}, {GroupKind::Tp, "tp"}, {GroupKind::Pp, "pp"}, {GroupKind::Ep, "ep"},
    {GroupKind::Cp, "cp"}};
const char* group_kind_name(GroupKind k);

// Model states per rank: the allocations the ZeRO paper counts (SC20, section 5).
struct ModelStateBytes {
  Bytes params = 0, grads = 0, optimizer_states = 0;
};

// What one pipeline stage holds.
struct StagePlan {
  std::int64_t local_params = 0;  // parameters of this stage's model-parallel shard (Phi)
  std::int64_t dp_partition = 0;  // ceil(Phi / shard group): one rank's ZeRO partition
  // With expert parallelism: the routed experts' part of dp_partition, partitioned over the
  // dp / ep ranks holding the same experts (the rest of the partition is the other parameters'
  // over dp).
  std::int64_t expert_partition = 0;
  // Megatron's distributed optimizer under training.fp8_param_gather: the part of the other
  // parameters' partition that is layer weights, held and all-gathered in FP8 (the embedding,
  // output layer and final norm stay 16-bit).
  std::int64_t fp8_partition = 0;
  ModelStateBytes model_states;
  int layers = 0;
  // Offload: what one rank keeps in host memory and on NVMe (allocated at initialisation and
  // held for the whole run, so they are not part of the GPU timeline).
  Bytes host_bytes = 0, nvme_bytes = 0;
};

struct TrainingPlan {
  Plan plan;
  std::vector<Work> works;
  std::vector<GroupKind> group_kind;  // per plan group
  std::vector<StagePlan> stages;      // per pipeline stage
  std::vector<int> stage_of_rank;
};

// With `fold`, only the first data-parallel replica is instantiated (see Plan::real_rank): exact
// whenever replicas cannot interfere, i.e. with the analytical network on a homogeneous cluster.
TrainingPlan build_training_plan(const Scenario& s, bool fold = false);

// The size k of the DP sub-groups (k consecutive DP ranks; dp / k of them, and k groups across
// them): MiCS / HYBRID_SHARD's shard group, ZeRO++ hpZ's secondary partition group, or for qgZ
// the DP ranks of one node. 1 when the scenario needs none.
int dp_subgroup_size(const Scenario& s);

// Whether the step splits each layer block's backward into its B and W passes: the pipeline
// schedule (zero-bubble, dualpipe or dualpipev, with more than one stage) or Megatron-core's
// delay_wgrad_compute.
bool splits_backward(const Scenario& s);

// Bytes one rank sends in a ring collective of `kind` over n ranks with buffer size `bytes`
// (NCCL's convention: all-gather's buffer is the gathered output, reduce-scatter's the input).
double ring_bytes_sent(CollectiveKind kind, int n, Bytes bytes);

}  // namespace zerosim
