#pragma once
// What zerosim's models assume per GPU generation, in one table: the numbers that differ between
// architectures but are not properties of one product, so they do not belong in a preset file.
// Keyed by GpuSpec::generation (the preset's `gpu.generation`), never by the GPU's name.
#include <string>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/core/units.h"

namespace zerosim {

struct GenerationConstants {
  // FlashAttention-2 forward and backward rates as a share of the GPU's dense tensor-core peak,
  // for heads of 128 (the compute cost model's attention core scales them by the head's width:
  // flash_attention_efficiency, sim/cost/compute_cost.h).
  double flash_forward = 0, flash_backward = 0;
  // NCCL ring all-reduce bus bandwidth on NVLink as a share of the NVLink bandwidth per direction
  // (the alpha-beta network's bandwidth inside a node).
  double nvlink_ring_efficiency = 0;
  // The cuBLAS workspace PyTorch gives each (cuBLAS handle, stream) pair, allocated through the
  // caching allocator and never freed (the plan's "cublas_workspace" allocation).
  Bytes cublas_workspace_bytes = 0;
  // The best FP8 GEMM's share of the FP8 peak against the best 16-bit GEMM's share of the 16-bit
  // peak (MAMF, docs/SOURCES.md#gemm-rates): what FP8 training's GEMMs reach relative to a
  // preset's gpu.gemm_efficiency. 0 where the generation has no FP8 tensor cores.
  double fp8_gemm_efficiency_ratio = 0;
};

const GenerationConstants& generation_constants(GpuGeneration g);

// "volta", "ampere", "hopper", "blackwell", in that order.
const std::vector<std::string>& gpu_generation_names();
// Throws InputError(key_path) naming the allowed values for anything else.
GpuGeneration parse_gpu_generation(const std::string& text, const std::string& key_path);

}  // namespace zerosim
