#include "sim/cost/compute_cost.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "sim/cluster/gpu_generation.h"
#include "sim/cost/work_kernels.h"
#include "sim/parallel/framework_policy.h"

namespace zerosim {

// Sources of the defaults in ComputeConstants:
//  - GEMM ceiling: the cluster preset's gemm_efficiency, the maximum achievable matmul FLOPS
//    measured by Bekman's mamf-finder (ML Engineering Open Book; docs/SOURCES.md#gemm-rates).
//  - Sustained GEMM rate: MAMF is the best shape over 100 runs of an idle GPU; in a training
//    step clocks settle lower under sustained power draw and shapes are not the best. A fitted
//    constant (scenario key fitted.gemm_sustained; sim/fitted/fitted_constants.h says on what).
//  - Shapes: wave quantization over 128 x 128 output tiles, and no factor for a small dimension:
//    zerosim's H200 sweep of GPT layer GEMMs (docs/SOURCES.md#gemm-rates) ran the 407 that last
//    50 us or more 4.0 % faster than modelled here at the median, 9.7 % with the d / (d + 128)
//    it replaced (an ASSUMPTION with no source); work_kernels_test GemmTimesAreTheH200Sweeps.
//  - FlashAttention-2 reaches 50-73 % of A100 peak, forward faster than backward (Dao 2023,
//    arXiv:2307.08691, abstract and Fig. 4-6), but only ~35 % of H100 peak (Shah et al. 2024,
//    FlashAttention-3, arXiv:2407.08608, introduction); per generation in
//    sim/cluster/gpu_generation.cpp.
//  - Communication beside compute: NCCL runs its collectives as CUDA kernels on up to 16-32
//    channels (one SM each) and contends for HBM; overlapped compute kernels slow down by
//    10-30 % (Rashidi et al., ISCA 2021, "Enabling compute-communication overlap in distributed
//    deep learning training platforms", Fig. 2). 0.15, calibratable.
//  - Unfused attention (softmax materialised) runs its batched GEMMs at about half the GEMM
//    ceiling: Mu Li's A100 benchmarks measure a GPT-2 layer at 53 TFLOP/s against 230 for a
//    large matmul (docs/SOURCES.md#gemm-rates); assumption, calibrated by validate/.
//  - Kernel gap: back-to-back kernel launches on one stream cost about 1-2 us each (NVIDIA CUDA
//    best-practices guide, "kernel launch overhead"), more when the host is busy with framework
//    hooks; 2 us, eight kernels per block.
//  - Optimizer: a fused mixed-precision Adam reads and writes the fp32 master, m and v (24 B),
//    reads a 16-bit gradient (2 B) and writes the 16-bit parameter (2 B) = 28 B/param
//    (docs/SOURCES.md#adam-optimizer-throughput); the gradient upcast and norm add ~6 B/param.
//  - CPU Adam (offload): DeepSpeed's CPU Adam updated an 11.6B-parameter GPT-2 in 8.2 s, about
//    1.4e9 parameters/s (github.com/deepspeedai/DeepSpeed/pull/735). The CPU is not
//    stated; ASSUMPTION: the ZeRO-Offload paper's DGX-2 host (2 x 24-core Xeon Platinum 8168), so
//    1.4e9 / 48 per core, scaled by the preset's cores. It cannot beat the host's DRAM: an update
//    reads and writes the fp32 master, m and v (24 B), reads the fp32 gradient (4 B) and writes
//    the 16-bit parameter (2 B) = 30 B/param, at 0.7 of the DRAM bandwidth (ASSUMPTION: the usual
//    STREAM-triad share of peak on two-socket servers). The ranks of a node share its cores and DRAM.
//  - Tensor-list collectives (DeepSpeed 0.3-0.5 stage 3, zero.stage3_implementation =
//    per-parameter): per rank, DeepSpeed builds a narrow() view in Python and torch.distributed
//    copies it into or out of the flat NCCL buffer with one copy_() (PyTorch 1.8
//    ProcessGroupNCCL allgather/reduce_scatter with tensor lists; PyTorch PR #33924 measured
//    those copies making an 8-GPU all-gather 4.6x slower). Each is a dispatched PyTorch op at
//    5-7 us of host time (PyTorch issue #41383): 6 us each (ASSUMPTION: the middle; not fitted
//    to the cases), so 12 us per rank. DeepSpeed >= 0.6's reduce_scatter_coalesced
//    (runtime/comm/coalesced_collectives.py, v0.6.0 to the newest release) still slices every
//    tensor of the bucket once per rank in Python before the collective: one op per rank and
//    per tensor (its interleaving loop over ranks and tensors, plain Python list work without a
//    dispatched op, and the torch.cat of the pieces are not counted).
//  - PCIe copies: pinned host<->device copies reach 0.866 of the link (H200 host-to-device 55.43
//    of 64 GB/s, ML Engineering Open Book, network chapter); the ranks of a node also share its DRAM
//    bandwidth (each GPU has its own PCIe switch uplink in the presets' topologies). NVMe: the
//    node's drives are shared by its ranks, at the preset's bandwidth.


// FlashAttention-2 compiles one kernel per head dimension in steps of 32 and runs a head of d
// on the smallest that holds it, with its zeros computed: d = 80 runs the 96 kernel at 80 / 96
// of its rate. The kernels' rates against the 128 kernel's, forward and backward, are
// zerosim's H200 measurement (torch 2.11 SDPA FLASH_ATTENTION, causal, 32 heads, sequences
// 2K-8K; validate/results/NVIDIA_H200_2026-12-04/, attention_probe_head_dims.json): the
// generation's rates are quoted at 128. The 80 row of that file, not used here, checks the
// padding rule (0.78 / 0.70 measured; 0.82 / 0.73 by the rule). ASSUMPTION: the 32 kernel runs
// as the 64 one, the 224 one between 192 and 256, and other generations keep Hopper's ratios.
AttentionEfficiency flash_head_dim_factor(std::int64_t head_dim) {
  struct Kernel {
    std::int64_t dim;
    AttentionEfficiency vs_128;
  };
  static constexpr Kernel kKernels[] = {
      {32, {0.876, 0.878}},  {64, {0.876, 0.878}},  {96, {0.982, 0.872}},
      {128, {1.0, 1.0}},     {160, {0.699, 0.702}}, {192, {0.927, 0.895}},
      {224, {0.931, 0.878}}, {256, {0.935, 0.860}},
  };
  if (head_dim <= 0) return {1.0, 1.0};
  for (const Kernel& k : kKernels) {
    if (head_dim <= k.dim) {
      const double used = static_cast<double>(head_dim) / static_cast<double>(k.dim);
      return {k.vs_128.forward * used, k.vs_128.backward * used};
    }
  }
  // FlashAttention-2 has no kernel past 256 (its interface refuses the call): the 256 one's rates.
  const Kernel& widest = kKernels[std::size(kKernels) - 1];
  return widest.vs_128;
}

AttentionEfficiency flash_attention_efficiency(const GpuSpec& gpu, const ModelSpec& m) {
  const GenerationConstants& g = generation_constants(gpu.generation);
  // MLA's attention (query/key 192, value 128 wide) runs other kernels (FlashMLA, cuDNN's
  // unequal head dimensions): its rate stays the generation's.
  const AttentionEfficiency f = m.is_mla() ? AttentionEfficiency{1.0, 1.0}
                                           : flash_head_dim_factor(m.head_dim());
  return {g.flash_forward * f.forward, g.flash_backward * f.backward};
}

ComputeCost::ComputeCost(const Scenario& s, const TrainingPlan& plan, ComputeConstants c)
    : s_(s), c_(c) {
  const GpuSpec& gpu = s.cluster.gpu;
  peak_flops_ = gpu.peak_tflops(sixteen_bit(s.training.precision)) * 1e12;
  // The share of the best GEMM rate a training step sustains is fitted (fitted.gemm_sustained).
  gemm_flops_ = peak_flops_ * gpu.gemm_efficiency * s.fitted.gemm_sustained;
  // FP8 GEMMs (fp8 training): the FP8 peak at the preset's GEMM share scaled by what FP8 GEMMs
  // reach of their peak against 16-bit ones of theirs (MAMF, gpu_generation.cpp), sustained as
  // 16-bit GEMMs are.
  if (s.training.precision == Precision::Fp8) {
    gemm_flops_fp8_ = gpu.peak_tflops(Precision::Fp8) * 1e12 * gpu.gemm_efficiency *
                      generation_constants(gpu.generation).fp8_gemm_efficiency_ratio *
                      s.fitted.gemm_sustained;
  }
  hbm_bytes_per_s_ = gpu.hbm_bandwidth * gpu.hbm_efficiency;
  flash_ = flash_attention_efficiency(gpu, s.model);
  layer_ = layer_work(s, false);
  if (s.model.is_moe()) moe_layer_ = layer_work(s, true);
  if (!s.whatif.slow_ranks.empty()) {
    slow_rank_.assign(static_cast<std::size_t>(plan.plan.num_ranks), false);
    for (int r : s.whatif.slow_ranks) {
      if (r < plan.plan.num_ranks) slow_rank_[r] = true;
    }
  }
  seconds_.resize(plan.works.size());
  picos_.resize(plan.works.size());
  for (std::size_t w = 0; w < plan.works.size(); ++w) {
    const Work& work = plan.works[w];
    double t;
    if (work.kind == WorkKind::CpuOptimizerStep || work.kind == WorkKind::HostToDevice ||
        work.kind == WorkKind::DeviceToHost || work.kind == WorkKind::NvmeToDevice) {
      t = host_seconds(work);
    } else if (work.kind == WorkKind::HostOverhead) {
      t = c_.host_op_s * static_cast<double>(work.elements);
    } else if (work.kind == WorkKind::Quantize) {
      // ZeRO++ (de)quantization kernels are memory-bound: their bytes at the HBM rate.
      t = bytes_seconds(static_cast<double>(work.elements)) + c_.kernel_overhead_s;
    } else if (work.kind == WorkKind::GradAccumulate) {
      // One add_ per parameter tensor: its bytes at the HBM rate with a launch gap per kernel,
      // or the host's dispatch of the kernels where that is longer.
      const double kernels = static_cast<double>(work.host_ops);
      t = std::max(bytes_seconds(static_cast<double>(work.elements)) + c_.kernel_overhead_s * kernels,
                   c_.host_op_s * kernels);
    } else if (work.kind == WorkKind::OptimizerStep) {
      // Adam reads and writes its state once: a smaller state (precision-aware optimizer) moves
      // fewer bytes than the fp32 master weights and moments the default counts.
      const double saved =
          static_cast<double>(kAdamStateBytes - s.optimizer_state_bytes_per_param());
      const double bytes_per_param = c_.optimizer_bytes_per_param - 2.0 * saved;
      t = (s.sim.adam_params_per_s > 0
               ? static_cast<double>(work.elements) / s.sim.adam_params_per_s
               : static_cast<double>(work.elements) * bytes_per_param / hbm_bytes_per_s_) +
          c_.kernel_overhead_s * 4;
    } else {
      // The GPU cannot run a block faster than the host dispatches its ops (eager PyTorch), at
      // the fitted host time per counted op (fitted.layer_host_op_time).
      t = std::max(block_seconds(work.kind, work.part),
                   s.fitted.layer_host_op_time * static_cast<double>(work.host_ops));
    }
    seconds_[w] = t;
    picos_[w] = seconds_to_ps(t);
  }
}

double ComputeCost::host_seconds(const Work& work) const {
  const HostSpec& host = s_.cluster.host;
  const double ranks_per_node =
      static_cast<double>(std::min(s_.cluster.gpus_per_node, s_.num_gpus()));
  const double dram_share = host.dram_bandwidth * c_.dram_efficiency / ranks_per_node;
  const double pcie = std::min(s_.cluster.pcie_bandwidth * c_.pcie_efficiency, dram_share);
  const double nvme = host.nvme_bandwidth / ranks_per_node;
  const double n = static_cast<double>(work.elements);
  switch (work.kind) {
    case WorkKind::CpuOptimizerStep: {
      const double rate = std::min(c_.cpu_adam_params_per_core_s * host.cpu_cores,
                                   host.dram_bandwidth * c_.dram_efficiency /
                                       c_.cpu_adam_dram_bytes_per_param) /
                          ranks_per_node;
      double t = n / rate;
      if (work.nvme_bytes > 0) t += static_cast<double>(work.nvme_bytes) / nvme;
      return t;
    }
    case WorkKind::HostToDevice:
    case WorkKind::DeviceToHost: return n / pcie + c_.kernel_overhead_s;
    case WorkKind::NvmeToDevice: return n / std::min(pcie, nvme) + c_.kernel_overhead_s;
    default: return 0;
  }
}

SimTime ComputeCost::duration(const Plan& plan, OpId op) {
  const Op& o = plan.ops[op];
  const SimTime t = picos_[static_cast<std::size_t>(o.work)];
  // A straggler's GPU is slow, not its host or its PCIe links.
  if (!slow_rank_.empty() && slow_rank_[o.rank] && o.kind == OpKind::Compute &&
      o.stream != Stream::Cpu) {
    // Through seconds_to_ps, so that a slowdown that pushes the op past the clock is an error
    // rather than an overflow.
    return seconds_to_ps(seconds_[static_cast<std::size_t>(o.work)] * s_.whatif.slowdown);
  }
  return t;
}

double ComputeCost::gemm_seconds(const Gemm& g) const {
  const int sms = std::max(1, s_.cluster.gpu.sm_count);
  // The experts' GEMMs grouped into one launch fill the SMs with all their tiles together;
  // looped, each launch has only its own (and the later ones wait for the earlier).
  const bool grouped = g.expert && s_.training.moe_grouped_gemm;
  const double tiles = std::ceil(static_cast<double>(g.m) / c_.tile) *
                       std::ceil(static_cast<double>(g.n) / c_.tile) *
                       (grouped ? static_cast<double>(g.count) : 1.0);
  const double waves = std::ceil(tiles / sms);
  const double wave_eff = tiles / (waves * sms);
  return g.flops() / ((g.fp8 ? gemm_flops_fp8_ : gemm_flops_) * wave_eff);
}

double ComputeCost::bytes_seconds(double bytes) const { return bytes / hbm_bytes_per_s_; }

double ComputeCost::attention_seconds(double flops, bool backward) const {
  const double flash_share = backward ? flash_.backward : flash_.forward;
  return flops / (s_.training.flash_attention ? peak_flops_ * flash_share
                                              : gemm_flops_ * c_.unfused_attention_efficiency);
}

// A layer block's passes: GEMMs (backward prices dgrad and wgrad at the forward shape's rate),
// the attention core, the elementwise kernels and the launch gaps. A zero-bubble W pass launches
// one wgrad per GEMM and its B pass the rest of the backward's kernels, so that B and W add up
// to the whole backward.
double ComputeCost::layer_block_seconds(const WorkKernels& k, bool backward) const {
  double gemms = 0;
  for (const Gemm& g : k.gemms) {
    gemms += gemm_seconds(g);
    // A loop over the experts launches each one's GEMM on its own.
    if (g.expert && !s_.training.moe_grouped_gemm)
      gemms += static_cast<double>(g.count - 1) * c_.kernel_overhead_s;
  }
  const bool every_pass = k.part == BackwardPart::Whole || k.part == BackwardPart::BeforeInputLinear;
  double t = (every_pass ? k.passes : 1) * gemms;
  if (k.attention_flops) t += attention_seconds(*k.attention_flops, backward);
  t += k.passes * bytes_seconds(*k.elementwise_bytes) + bytes_seconds(k.fp8_cast_bytes) +
       bytes_seconds(k.once_bytes);
  const double launches = k.passes * c_.kernels_per_block;
  const double wgrads = std::min(launches, static_cast<double>(k.gemms.size()));
  switch (k.part) {
    case BackwardPart::Whole: t += k.passes * (c_.kernel_overhead_s * c_.kernels_per_block); break;
    case BackwardPart::Input: t += (launches - wgrads) * c_.kernel_overhead_s; break;
    case BackwardPart::Weight: t += wgrads * c_.kernel_overhead_s; break;
    // The input linear's dgrad and wgrad are launched on their own: the three parts add up to
    // the whole backward.
    case BackwardPart::BeforeInputLinear: t += std::max(0.0, launches - 2) * c_.kernel_overhead_s; break;
    case BackwardPart::InputLinearDgrad:
    case BackwardPart::InputLinearWgrad: t += c_.kernel_overhead_s; break;
  }
  return t;
}

// What Megatron-core's selective recomputation replays in a block's backward, by module
// (Scenario recompute_modules): the attention core (core_attn), the block's norm forward
// (layernorm: read and write its 16-bit tokens, split over TP under sequence parallelism), MLA's
// q_up and kv_up GEMMs (mla_up_proj), a dense MLP's whole forward (mlp), and the routed
// experts' activation function (moe_act: a gated one reads its two halves and writes one, 3
// bytes per element of the first expert GEMM's output; 4 for GeLU / ReLU, read and write).
double ComputeCost::selective_recompute_seconds(WorkKind kind, const WorkKernels& forward) const {
  const RecomputeModules& m = s_.parallel.recompute_modules;
  double t = 0;
  if (m.core_attn && forward.attention_flops) t += attention_seconds(*forward.attention_flops, false);
  if (m.layernorm) {
    const double tokens = s_.micro_batch_tokens() /
                          (s_.parallel.sequence_parallel ? static_cast<double>(s_.parallel.tp) : 1.0);
    t += bytes_seconds(4.0 * tokens * static_cast<double>(s_.model.hidden_size));
  }
  for (const Gemm& g : forward.gemms) {
    if (kind == WorkKind::AttentionBackward && m.mla_up_proj &&
        g.role == GemmRole::MlaUpProjection)
      t += gemm_seconds(g);
    const bool gated = g.role == GemmRole::GatedMlpInput;
    if (kind == WorkKind::MoeBackward && m.moe_act && g.expert &&
        (gated || g.role == GemmRole::MlpInput)) {
      const double out = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.count);
      t += bytes_seconds((gated ? 3.0 : 4.0) * out);
    }
  }
  if (kind == WorkKind::MlpBackward && m.mlp) t += layer_block_seconds(forward, false);
  return t;
}

double ComputeCost::block_seconds(WorkKind kind, BackwardPart part) const {
  const LayerWork& layer = is_moe_kind(kind) ? moe_layer_ : layer_;
  const WorkKernels k = work_kernels(kind, s_, layer, part);
  const double overhead = c_.kernel_overhead_s * c_.kernels_per_block;
  const Recompute rc = s_.parallel.recompute;
  switch (kind) {
    case WorkKind::AttentionForward:
    case WorkKind::MlpForward:
    case WorkKind::MoeForward: return layer_block_seconds(k, false);
    case WorkKind::AttentionBackward:
    case WorkKind::MlpBackward:
    case WorkKind::MoeBackward: {
      // Recomputation replays the forward (full), only the attention core (selective), or the
      // matmuls torchtitan's op-level policy did not save and the elementwise ops
      // (selective-op).
      const WorkKind fwd = kind == WorkKind::AttentionBackward ? WorkKind::AttentionForward
                           : kind == WorkKind::MoeBackward     ? WorkKind::MoeForward
                                                               : WorkKind::MlpForward;
      double t = layer_block_seconds(k, true);
      // B recomputed what W needs, and the part before the input linear what its GEMMs need.
      if (part == BackwardPart::Weight || is_input_linear_gemm(part)) return t;
      if (rc == Recompute::SelectiveOp) {
        return t + layer_block_seconds(op_checkpoint_recompute(kind, s_, layer), false);
      }
      const WorkKernels forward = work_kernels(fwd, s_, layer);
      // Replayed by ops of their own before the layer's backward, or here.
      if (rc == Recompute::Full && !s_.replays_layers_before_backward()) {
        t += layer_block_seconds(forward, false);
      }
      if (rc == Recompute::Selective) t += selective_recompute_seconds(kind, forward);
      return t;
    }
    case WorkKind::HeadForward:
    case WorkKind::HeadBackward:
    case WorkKind::MtpForward:
    case WorkKind::MtpBackward:
      return k.passes * gemm_seconds(k.gemms.front()) + bytes_seconds(k.once_bytes) + overhead;
    case WorkKind::EmbedForward:
    case WorkKind::EmbedBackward: return bytes_seconds(k.once_bytes) + c_.kernel_overhead_s * 2;
    case WorkKind::OptimizerStep:
    case WorkKind::CpuOptimizerStep:
    case WorkKind::HostToDevice:
    case WorkKind::DeviceToHost:
    case WorkKind::NvmeToDevice:
    case WorkKind::Quantize:
    case WorkKind::HostOverhead:
    case WorkKind::GradAccumulate: break;
  }
  return 0;
}

}  // namespace zerosim
