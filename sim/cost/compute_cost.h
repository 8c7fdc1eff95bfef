#pragma once
// Compute cost model: how long a compute op of the plan takes on one GPU. A roofline per kernel
// from the op's shapes: GEMMs at the GPU's best achievable GEMM rate (MAMF) scaled by a tile/wave
// quantization factor, attention at a FlashAttention-class rate, and
// elementwise kernels at the achievable HBM bandwidth; kernels of one op run one after another.
#include <vector>

#include "sim/core/engine.h"
#include "sim/cost/work_kernels.h"
#include "sim/parallel/training_plan.h"

namespace zerosim {

// Calibratable constants of the compute model; defaults cite their sources in compute_cost.cpp.
struct ComputeConstants {
  double unfused_attention_efficiency = 0.5;  // batched QK^T / PV GEMMs, of the GEMM rate
  int tile = 128;                           // output tile edge for wave quantization
  double kernel_overhead_s = 2.0e-6;        // per kernel launch gap on the GPU
  int kernels_per_block = 8;                // kernels of one attention or MLP block pass
  double optimizer_bytes_per_param = 34;    // fused Adam + gradient upcast/norm, see .cpp
  double comm_slowdown = 0.15;              // compute slowdown beside NCCL kernels
  // Offload (sources in compute_cost.cpp).
  double cpu_adam_params_per_core_s = 1.4e9 / 48;  // DeepSpeed CPU Adam, per core
  double cpu_adam_dram_bytes_per_param = 30;       // host memory traffic of one CPU Adam update
  double dram_efficiency = 0.7;                    // achievable share of the DRAM bandwidth
  double pcie_efficiency = 0.866;                  // achievable share of PCIe for pinned copies
  // Host time of one dispatched PyTorch op (a view, a narrow, a copy_), see compute_cost.cpp:
  // what DeepSpeed's per-rank tensor lists cost.
  double host_op_s = 6e-6;
};

// FlashAttention-2 forward and backward rates as a share of the GPU's dense peak, by GPU
// generation (sources in sim/cluster/gpu_generation.cpp).
struct AttentionEfficiency {
  double forward = 0, backward = 0;
};
// The rates of model `m`'s attention heads on `gpu`: the generation's, quoted at heads of 128,
// times flash_head_dim_factor of m's head (MLA's keep the generation's).
AttentionEfficiency flash_attention_efficiency(const GpuSpec& gpu, const ModelSpec& m);
// The rates of a head of `head_dim` against the 128-wide head those are quoted at (1 for 128).
AttentionEfficiency flash_head_dim_factor(std::int64_t head_dim);

// Durations of every Work of a plan, computed once (ops of the same work cost the same).
class ComputeCost : public ComputeModel {
 public:
  ComputeCost(const Scenario& s, const TrainingPlan& plan, ComputeConstants c = {});
  SimTime duration(const Plan& plan, OpId op) override;
  double comm_slowdown() const override { return c_.comm_slowdown; }
  double work_seconds(int work) const { return seconds_[work]; }
  // One GEMM on this GPU: its FLOPs at the sustained GEMM rate over its wave quantization.
  double gemm_seconds(const Gemm& g) const;

 private:
  double bytes_seconds(double bytes) const;
  double block_seconds(WorkKind kind, BackwardPart part) const;
  double selective_recompute_seconds(WorkKind kind, const WorkKernels& forward) const;
  double attention_seconds(double flops, bool backward) const;
  double layer_block_seconds(const WorkKernels& k, bool backward) const;
  double host_seconds(const Work& work) const;

  const Scenario& s_;
  ComputeConstants c_;
  double peak_flops_ = 0;     // FLOP/s at the 16-bit training precision (bf16 under fp8)
  double gemm_flops_ = 0;     // best achievable GEMM FLOP/s
  double gemm_flops_fp8_ = 0;  // the same in FP8 (fp8 training)
  double hbm_bytes_per_s_ = 0;
  AttentionEfficiency flash_;
  LayerWork layer_, moe_layer_;  // a dense layer's work, and an MoE layer's (MoE models)
  std::vector<double> seconds_;
  std::vector<SimTime> picos_;
  std::vector<bool> slow_rank_;  // what-if stragglers, by plan rank (== cluster rank: unfolded)
};

}  // namespace zerosim
