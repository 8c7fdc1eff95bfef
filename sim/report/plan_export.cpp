#include "sim/report/plan_export.h"

#include <string>

#include "sim/core/error.h"
#include "sim/cost/work_kernels.h"
#include "sim/parallel/framework_policy.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

const char* work_name(WorkKind k) {
  switch (k) {
    case WorkKind::EmbedForward: return "embed_forward";
    case WorkKind::EmbedBackward: return "embed_backward";
    case WorkKind::AttentionForward: return "attention_forward";
    case WorkKind::AttentionBackward: return "attention_backward";
    case WorkKind::MlpForward: return "mlp_forward";
    case WorkKind::MlpBackward: return "mlp_backward";
    case WorkKind::MoeForward: return "moe_forward";
    case WorkKind::MoeBackward: return "moe_backward";
    case WorkKind::MtpForward: return "mtp_forward";
    case WorkKind::MtpBackward: return "mtp_backward";
    case WorkKind::HeadForward: return "head_forward";
    case WorkKind::HeadBackward: return "head_backward";
    case WorkKind::OptimizerStep: return "optimizer_step";
    case WorkKind::CpuOptimizerStep: return "cpu_optimizer_step";
    case WorkKind::HostToDevice: return "host_to_device";
    case WorkKind::DeviceToHost: return "device_to_host";
    case WorkKind::NvmeToDevice: return "nvme_to_device";
    case WorkKind::Quantize: return "quantize";
    case WorkKind::HostOverhead: return "host_overhead";
    case WorkKind::GradAccumulate: return "grad_accumulate";
  }
  return "?";
}

const char* backward_part_name(BackwardPart p) {
  switch (p) {
    case BackwardPart::Whole: return "whole";
    case BackwardPart::Input: return "input_grad";
    case BackwardPart::Weight: return "weight_grad";
    case BackwardPart::BeforeInputLinear: return "before_input_linear";
    case BackwardPart::InputLinearDgrad: return "input_linear_dgrad";
    case BackwardPart::InputLinearWgrad: return "input_linear_wgrad";
  }
  return "?";
}

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Compute: return "compute";
    case OpKind::Collective: return "collective";
    case OpKind::Copy: return "copy";
    case OpKind::Alloc: return "alloc";
    case OpKind::Free: return "free";
  }
  return "?";
}

json gemms_json(const std::vector<Gemm>& gemms) {
  json out = json::array();
  for (const Gemm& g : gemms) {
    out.push_back({{"name", g.name}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"count", g.count}});
  }
  return out;
}

}  // namespace

json export_plan(const Scenario& s, const Simulation& sim, int rank) {
  const Plan& plan = sim.plan.plan;
  if (rank >= plan.num_ranks) {
    throw InputError("--rank", "must be below the " + std::to_string(plan.num_ranks) +
                                   " ranks of the plan, got " + std::to_string(rank));
  }
  const LayerWork layer = layer_work(s, false);
  const LayerWork moe_layer = s.model.is_moe() ? layer_work(s, true) : LayerWork{};
  json doc;
  doc["format"] = "zerosim-plan/1";
  doc["scenario"] = s.resolved;
  doc["num_ranks"] = plan.num_ranks;
  json groups = json::array();
  for (int g = 0; g < plan.num_groups(); ++g) {
    std::vector<std::int32_t> ranks(plan.group_members(g), plan.group_members(g) + plan.group_size(g));
    json group = {{"id", g}, {"name", plan.group_names[g]},
                  {"kind", group_kind_name(sim.plan.group_kind[g])}, {"ranks", ranks}};
    if (plan.folded()) {
      group["cluster_ranks"] = std::vector<std::int32_t>(plan.cost_members(g),
                                                         plan.cost_members(g) + plan.cost_size(g));
    }
    groups.push_back(std::move(group));
  }
  doc["groups"] = std::move(groups);
  json ranks = json::array();
  OpId first = 0;
  for (int r = 0; r < plan.num_ranks; ++r) {
    OpId end = first;
    while (end < plan.ops.size() && plan.ops[end].rank == r) ++end;
    if (rank < 0 || rank == r) {
      json ops = json::array();
      for (OpId id = first; id < end; ++id) {
        const Op& op = plan.ops[id];
        json o = {{"id", id - first},
                  {"kind", op_kind_name(op.kind)},
                  {"stream", stream_name(op.stream)},
                  {"name", plan.names[op.name]},
                  {"phase", phase_name(op.phase)}};
        json deps = json::array();
        for (std::uint32_t i = 0; i < op.dep_count; ++i) deps.push_back(plan.deps[op.dep_begin + i] - first);
        o["deps"] = std::move(deps);
        if (op.kind == OpKind::Compute) {
          const Work& w = sim.plan.works[op.work];
          o["work"] = work_name(w.kind);
          const WorkKernels k =
              work_kernels(w.kind, s, is_moe_kind(w.kind) ? moe_layer : layer, w.part);
          // A zero-bubble schedule's B (input gradient) or W (weight gradient) pass, or a
          // block's backward split at its input linear.
          if (w.part != BackwardPart::Whole) o["part"] = backward_part_name(w.part);
          o["gemms"] = gemms_json(gemm_launches(k));
          // Backward moves the block's elementwise traffic twice; fp8 adds this pass's casts.
          if (k.elementwise_bytes) {
            o["elementwise_bytes"] = *k.elementwise_bytes * k.passes + k.fp8_cast_bytes;
          }
          if (k.attention_flops) o["attention_flops"] = *k.attention_flops;
          if (w.kind == WorkKind::OptimizerStep) o["elements"] = w.elements;
          // Memory-bound work priced by its HBM bytes: the replay moves as many.
          if (w.kind == WorkKind::GradAccumulate || w.kind == WorkKind::Quantize) {
            o["elementwise_bytes"] = static_cast<double>(w.elements);
          }
        } else if (op.kind == OpKind::Collective) {
          const Collective& c = plan.collectives[op.work];
          o["collective"] = collective_name(c.kind);
          o["group"] = c.group;
          o["bytes"] = c.bytes;
        } else if (op.kind == OpKind::Alloc || op.kind == OpKind::Free) {
          o["category"] = mem_category_name(op.category);
          o["bytes"] = op.bytes;
        }
        o["predicted_start_s"] = ps_to_seconds(sim.result.start[id]);
        o["predicted_duration_s"] = ps_to_seconds(sim.result.end[id] - sim.result.start[id]);
        ops.push_back(std::move(o));
      }
      ranks.push_back({{"rank", r}, {"ops", std::move(ops)}});
    }
    first = end;
  }
  doc["ranks"] = std::move(ranks);
  return doc;
}

}  // namespace zerosim
