// build_training_plan: the model cut into units per stage (layout.cpp), one template per
// pipeline stage (stage_builder.cpp and its parts), copied to every rank (rank_groups.cpp).
#include "sim/parallel/training_plan.h"

#include <map>

#include "sim/parallel/framework_policy.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/rank_groups.h"
#include "sim/parallel/stage_builder.h"

namespace zerosim {

double ring_bytes_sent(CollectiveKind kind, int n, Bytes bytes) {
  if (n <= 1) return 0;
  const double b = static_cast<double>(bytes);
  const double share = static_cast<double>(n - 1) / n;
  switch (kind) {
    case CollectiveKind::AllReduce: return 2 * share * b;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll: return share * b;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce: return b;  // pipelined ring: every rank but one forwards it all
    case CollectiveKind::SendRecv: return b;
  }
  return 0;
}

bool splits_backward(const Scenario& s) {
  if (s.parallel.delay_wgrad_compute) return true;  // with the combined 1F1B (resolve.cpp)
  return s.parallel.pp > 1 && (s.parallel.pipeline_schedule == PipelineSchedule::ZeroBubble ||
                               s.second_chunk_returns());
}

namespace {

// The host's ops for one pass over a block of kind k. Full recomputation replays the forward
// inside the backward, after the checkpoint's own ops (Megatron checkpoints a whole layer; its
// backward starts with the MLP block's); so does torchtitan's op-level checkpointing, whose
// replay dispatches every forward op and returns the saved ones' outputs. Selective
// recomputation replays only the attention core, whose ops are not counted apart: it adds none.
std::int64_t block_host_ops(const Scenario& s, const plan_detail::HostPolicy& h, WorkKind k) {
  const bool checkpointed = s.parallel.recompute == Recompute::Full ||
                            s.parallel.recompute == Recompute::SelectiveOp;
  // The replay's forward ops are the backward's, unless the plan emits it as forward ops.
  const bool replays_forward = checkpointed && !s.replays_layers_before_backward();
  // An MoE block's ops where the policy counts them (Megatron-core); elsewhere, ASSUMPTION, the
  // dense MLP's (its router, top-k and token permutation not counted).
  const int moe_forward = h.moe_forward_ops ? h.moe_forward_ops : h.mlp_forward_ops;
  const int moe_backward = h.moe_backward_ops ? h.moe_backward_ops : h.mlp_backward_ops;
  switch (k) {
    case WorkKind::AttentionForward: return h.attention_forward_ops;
    case WorkKind::MlpForward: return h.mlp_forward_ops;
    case WorkKind::MoeForward: return moe_forward;
    case WorkKind::AttentionBackward:
      return h.attention_backward_ops + (replays_forward ? h.attention_forward_ops : 0);
    case WorkKind::MlpBackward:
      return h.mlp_backward_ops + (replays_forward ? h.mlp_forward_ops : 0) +
             (checkpointed ? h.checkpoint_ops_per_layer : 0);
    case WorkKind::MoeBackward:
      return moe_backward + (replays_forward ? moe_forward : 0) +
             (checkpointed ? h.checkpoint_ops_per_layer : 0);
    default: return 0;
  }
}

}  // namespace

TrainingPlan build_training_plan(const Scenario& s, bool fold) {
  using namespace plan_detail;
  TrainingPlan out;
  // One Work per layer-block kind (and, for a layer block's backward that a zero-bubble
  // schedule splits, per part), shared by every op of that kind.
  std::int32_t work_of[(static_cast<int>(WorkKind::HeadBackward) + 1) * kNumBackwardParts] = {};
  const HostPolicy host = framework_policy(s, 0).host;
  const bool split = splits_backward(s);
  for (auto k : {WorkKind::EmbedForward, WorkKind::EmbedBackward, WorkKind::AttentionForward,
                 WorkKind::AttentionBackward, WorkKind::MlpForward, WorkKind::MlpBackward,
                 WorkKind::MoeForward, WorkKind::MoeBackward, WorkKind::MtpForward,
                 WorkKind::MtpBackward, WorkKind::HeadForward, WorkKind::HeadBackward}) {
    const bool moe_kind = k == WorkKind::MoeForward || k == WorkKind::MoeBackward;
    if (moe_kind && !s.model.is_moe()) continue;  // a dense model's plan has no MoE work
    const bool mtp_kind = k == WorkKind::MtpForward || k == WorkKind::MtpBackward;
    if (mtp_kind && s.model.mtp_num_layers == 0) continue;
    for (BackwardPart part : {BackwardPart::Whole, BackwardPart::Input, BackwardPart::Weight,
                              BackwardPart::BeforeInputLinear, BackwardPart::InputLinearDgrad,
                              BackwardPart::InputLinearWgrad}) {
      const bool zero_bubble_part = part == BackwardPart::Input || part == BackwardPart::Weight;
      if (zero_bubble_part && !(split && is_layer_backward(k))) continue;
      const bool input_linear_part = part == BackwardPart::BeforeInputLinear || is_input_linear_gemm(part);
      if (input_linear_part && !splits_at_input_linear(s, k)) continue;
      work_of[work_index(k, part)] = static_cast<std::int32_t>(out.works.size());
      Work w{k, 0};
      w.part = part;
      // The host dispatches the block's ops in B; W only launches its wgrad GEMMs (ASSUMPTION:
      // counted as none, a few launches against the block's tens of ops). Split at the input
      // linear, its dgrad and wgrad GEMMs are one dispatched op each of the block's, the last
      // ones the host dispatches.
      const std::int64_t ops = block_host_ops(s, host, k);
      if (part == BackwardPart::Weight) {
        w.host_ops = 0;
      } else if (part == BackwardPart::BeforeInputLinear) {
        w.host_ops = std::max<std::int64_t>(0, ops - 2);
      } else if (is_input_linear_gemm(part)) {
        w.host_ops = ops >= 2 ? 1 : 0;
      } else {
        w.host_ops = ops;
      }
      out.works.push_back(w);
    }
  }
  std::map<std::string, std::int32_t> name_ids;
  const PlanTables tables{out.plan.names, name_ids, out.works, work_of, out.plan.alloc_tensors};
  const std::vector<std::vector<Unit>> per_virtual = virtual_stage_units(s);
  const int p = s.parallel.pp;
  out.stages.resize(p);
  std::vector<Template> templates(p);
  for (int st = 0; st < p; ++st) {
    templates[st] =
        StageBuilder(s, st, stage_chunks(s, per_virtual, st), tables, out.stages[st]).build();
  }
  instantiate_ranks(s, templates, fold, out);
  return out;
}

}  // namespace zerosim
