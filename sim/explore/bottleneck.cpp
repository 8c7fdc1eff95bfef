#include "sim/explore/bottleneck.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace zerosim::explore {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string or_list(const std::vector<std::string>& options) {
  std::string s;
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (i > 0) s += i + 1 == options.size() ? " or " : ", ";
    s += options[i];
  }
  return s;
}

// "3.10 s exposed, 16 % of the step"
// "TP <= 4", or "TP 1" where halving reaches one.
std::string at_most(const char* degree, int n) {
  return std::string(degree) + (n <= 1 ? " 1" : " <= " + std::to_string(n));
}

std::string share_text(double seconds, double share, const char* what = "") {
  return fmt("%.2f s", seconds) + what + fmt(", %.0f %% of the step", 100 * share);
}

std::string dp_advice(const Scenario& s) {
  std::vector<std::string> o;
  // The gradient reduction overlaps the backward only when the framework's key says so
  // (sim/parallel: Megatron's overlap_grad_reduce, the others' zero.overlap_comm).
  const bool megatron = s.parallel.framework == Framework::Megatron;
  const bool overlapped = megatron ? s.parallel.overlap_grad_reduce : s.zero.overlap_comm;
  if (!overlapped) {
    o.push_back(std::string("overlapping it with the backward (") +
                (megatron ? "parallel.overlap_grad_reduce" : "zero.overlap_comm") + "=true)");
  }
  if (s.zero.stage == 3) {
    o.push_back("ZeRO <= 2 if memory allows (stage 3 gathers the parameters in every forward "
                "and backward)");
  }
  o.push_back("more TP or PP (each DP rank then reduces a smaller share of the gradients)");
  return "try " + or_list(o);
}

std::string tp_advice(const Scenario& s) {
  const int tp = s.parallel.tp;
  if (tp > s.cluster.gpus_per_node) {
    return "try TP <= " + std::to_string(s.cluster.gpus_per_node) +
           " (inside a node; across nodes its all-reduces cross the NICs)";
  }
  // Sequence parallelism is no remedy here: its reduce-scatter and all-gather move the bytes
  // of the all-reduce they replace.
  return "try " + at_most("TP", tp / 2) +
         " (each layer's TP all-reduces block the compute stream in the forward and the "
         "backward)";
}

std::string pp_advice(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  std::vector<std::string> o;
  if (p.virtual_stages > 1) o.push_back("no interleaving (virtual stages multiply the sends)");
  if (p.tp > 1 && !p.sequence_parallel) {
    o.push_back("parallel.sequence_parallel=true (each send is split over the TP ranks)");
  }
  o.push_back(at_most("PP", p.pp / 2) + " (fewer stage boundaries)");
  return "try " + or_list(o);
}

// An MoE layer's all-to-alls. An expert-parallel group occupies ep_dp_span() x tp consecutive
// GPUs; past an NVLink domain its exchanges cross the NICs.
std::string ep_advice(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  std::vector<std::string> o;
  const int domain = s.cluster.nvlink_domain_gpus;
  const bool leaves_domain = s.ep_dp_span() * p.tp > domain;
  if (leaves_domain) {
    o.push_back(at_most("EP", std::max(1, domain / p.tp)) +
                " (each expert group inside an NVLink domain, its all-to-alls off the NICs)");
  }
  if (p.framework == Framework::Megatron) {
    // The flex dispatcher needs expert TP 1: as the simulation splits the experts
    // (Scenario::expert_tp; parallel.etp 1 whose EP groups cannot span the TP ranks runs as tp).
    if (leaves_domain && p.moe_token_dispatcher_type != MoeDispatcher::Flex && s.expert_tp() == 1) {
      o.push_back("parallel.moe_token_dispatcher_type=flex (each token crosses the network once "
                  "per node)");
    }
    if (!p.overlap_moe_expert_parallel_comm) {
      o.push_back("parallel.overlap_moe_expert_parallel_comm=true (the all-to-alls behind the "
                  "other micro-batch's compute; with pipeline stages it needs virtual stages)");
    }
  }
  if (!leaves_domain) o.push_back(at_most("EP", p.ep / 2) + " (fewer ranks in each all-to-all)");
  return "try " + or_list(o);
}

// Context parallelism's exchanges of keys and values (or its all-to-alls), which grow with cp.
std::string cp_advice(const Scenario& s) {
  return "try " + at_most("CP", s.parallel.cp / 2) +
         " (each layer exchanges keys and values over the CP group)";
}

std::string bubble_advice(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  std::vector<std::string> o;
  const std::int64_t m = s.training.gradient_accumulation_steps;
  // 1F1B idles (pp - 1) micro-batch times per step, interleaving divides that by the virtual
  // stages: more micro-batches per step or more virtual stages shrink its share.
  if (s.training.micro_batch_size > 1) {
    o.push_back("more micro-batches per step (micro-batch " +
                std::to_string(s.training.micro_batch_size / 2) + ", " + std::to_string(2 * m) +
                " micro-batches)");
  }
  const bool two_chunks_per_stage = s.model.num_layers % (2 * static_cast<std::int64_t>(p.pp)) == 0;
  // (With the zero-bubble schedule two virtual stages make ZB-V, offered below.)
  if (p.virtual_stages == 1 && p.pipeline_schedule != PipelineSchedule::ZeroBubble &&
      two_chunks_per_stage) {
    o.push_back("interleaving (2 virtual stages)");
  }
  // ZB-H1 (Qi et al., ICLR 2024) fills the cool-down with the deferred weight gradients: about a
  // third of 1F1B's bubble at the same memory, where the zero-bubble Megatron fork runs it.
  if (p.pp > 1 && p.virtual_stages == 1 && p.pipeline_schedule != PipelineSchedule::ZeroBubble &&
      s.zero_bubble_runs()) {
    o.push_back("parallel.pipeline_schedule=zero-bubble (weight gradients deferred into the "
                "bubble)");
  }
  // ZB-V, the fork's V schedule, leaves only the pipeline's fill at 1F1B's activation memory,
  // where the layers split into 2 pp chunks.
  if (p.pp > 1 && !s.zero_bubble_v() && s.zero_bubble_runs() && p.pipeline_layout.empty() &&
      two_chunks_per_stage) {
    o.push_back("parallel.pipeline_schedule=zero-bubble with parallel.virtual_stages=2 (ZB-V: "
                "only the pipeline's fill left idle)");
  }
  if (p.pp > 1) o.push_back(at_most("PP", p.pp / 2));
  return o.empty() ? "the bubble is the pipeline's drain" : "try " + or_list(o);
}

// What the framework itself runs for its collectives (breakdown comm_overhead): DeepSpeed's
// tensor lists and per-rank slices, which grow with the data-parallel ranks, and ZeRO++'s
// quantization kernels.
std::string comm_overhead_advice(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  std::vector<std::string> o;
  if (z.stage == 3 && z.per_parameter_stage3()) {
    o.push_back("DeepSpeed >= 0.6's stage 3 (zero.stage3_implementation coalesced): one "
                "collective per module, not a tensor list per parameter");
  }
  if (z.stage == 3 && s.parallel.framework == Framework::DeepSpeed && z.mics_shard_size <= 0) {
    o.push_back("fewer ranks per collective: MiCS shard groups (zero.mics_shard_size), or ZeRO "
                "<= 2 if memory allows (stage 3 slices every gradient tensor once per "
                "data-parallel rank on the host)");
  }
  if (z.quantized_weights || z.quantized_gradients) {
    o.push_back("ZeRO++'s quantization off (zero.zero_quantized_weights, "
                "zero.zero_quantized_gradients) where the network is fast enough");
  }
  if (o.empty()) o.push_back("fewer data-parallel ranks per collective");
  return "try " + or_list(o);
}

std::string offload_advice(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  std::vector<std::string> o;
  if (z.offload_optimizer == OffloadDevice::Nvme || z.offload_param == OffloadDevice::Nvme) {
    o.push_back("offloading to cpu instead of nvme");
  }
  if (z.offload_optimizer != OffloadDevice::None) {
    o.push_back("keeping the optimizer on the GPU (zero.offload_optimizer.device=none) with a "
                "higher ZeRO stage or more GPUs");
  }
  if (z.offload_param != OffloadDevice::None) {
    o.push_back("keeping the parameters on the GPU (zero.offload_param.device=none)");
  }
  return o.empty() ? "the host work is the step's tail" : "try " + or_list(o);
}

std::string compute_advice(const Scenario& s, const StepReport& r) {
  if (!s.training.flash_attention) return "try training.flash_attention=true";
  if (s.parallel.recompute == Recompute::Full) {
    return "try selective recomputation if memory allows (full recomputation re-runs each "
           "layer's forward in the backward)";
  }
  if (s.parallel.recompute == Recompute::Selective) {
    return "try no recomputation if memory allows";
  }
  if (s.parallel.recompute == Recompute::SelectiveOp) {
    return "try no recomputation if memory allows (op-level checkpointing re-runs every second "
           "matmul and the elementwise ops in the backward)";
  }
  return "the layout leaves little to gain (MFU " + fmt("%.0f %%", 100 * r.mfu) + ")";
}

}  // namespace

Bottleneck find_bottleneck(const Scenario& s, const StepReport& r) {
  const StepBreakdown& b = r.breakdown;
  const double step = r.step_time_s;
  struct Part {
    const char* component;
    const char* label;  // how the summary names it
    const char* what;   // after its seconds
    double seconds;
    std::string (*advice)(const Scenario&);
  };
  const Part parts[] = {
      {"dp_communication", "DP communication ", " exposed", b.exposed_by_group[0], dp_advice},
      {"tp_communication", "TP communication ", " exposed", b.exposed_by_group[1], tp_advice},
      {"pp_communication", "pipeline sends ", " exposed", b.exposed_by_group[2], pp_advice},
      {"ep_communication", "expert all-to-alls ", " exposed", b.exposed_by_group[3], ep_advice},
      {"cp_communication", "context-parallel exchanges ", " exposed", b.exposed_by_group[4],
       cp_advice},
      {"pipeline_bubble", "pipeline bubble ", "", b.bubble_s, bubble_advice},
      {"offload", "waits for offloaded host work (CPU optimizer step, copies) ", "", b.offload_s,
       offload_advice},
      {"comm_overhead", "the framework's work for its collectives (tensor slices and copies, "
       "quantization) ", "", b.comm_overhead_s, comm_overhead_advice}};
  const Part* top = &parts[0];
  for (const Part& p : parts) {
    if (p.seconds > top->seconds) top = &p;  // ties: the first listed
  }
  Bottleneck out;
  if (step <= 0 || top->seconds < kComputeBoundShare * step) {
    out.component = "compute";
    out.seconds = b.forward_s + b.backward_s + b.optimizer_s;
    out.share = step > 0 ? out.seconds / step : 0;
    out.summary = "compute-bound: forward, backward and optimizer " +
                  share_text(out.seconds, out.share) + " (each overhead < " +
                  fmt("%.0f %%)", 100 * kComputeBoundShare);
    out.advice = compute_advice(s, r);
    return out;
  }
  out.component = top->component;
  out.seconds = top->seconds;
  out.share = out.seconds / step;
  out.summary = top->label + share_text(out.seconds, out.share, top->what);
  out.advice = top->advice(s);
  return out;
}

}  // namespace zerosim::explore
