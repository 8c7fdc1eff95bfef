#include "sim/cluster/gpu_generation.h"

#include "sim/core/error.h"

namespace zerosim {

namespace {

// Indexed by GpuGeneration.
// cuBLAS workspace: PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp, getChosenWorkspaceSize:
// ":4096:2:16:8" (2 x 4096 KiB + 8 x 16 KiB = 8.125 MiB) unless the GPU is sm90, which gets
// ":4096:8" (32 MiB).
constexpr Bytes kCublasWorkspacePreHopper = 2 * 4096 * 1024 + 8 * 16 * 1024;
constexpr Bytes kCublasWorkspaceHopper = 8 * 4096 * 1024;
const GenerationConstants kConstants[] = {
    // Volta. Attention: assumption (FlashAttention-1 era, no FA2). NVLink: no V100 curve in
    // collectives.json; ASSUMPTION: Hopper's 0.82.
    {0.40, 0.30, 0.82, kCublasWorkspacePreHopper, 0},
    // Ampere. Attention: FA2 paper (Dao 2023, arXiv:2307.08691) Fig. 4: ~190-230 TFLOP/s forward,
    // ~150-170 backward of A100's 312. NVLink: nccl-tests all_reduce on 8x A100 SXM saturates at
    // 234.9 GB/s bus bandwidth of the 300 GB/s per direction (Bekman, ML Engineering, network
    // chapter; validate/measurements/collectives.json "dgx-a100-1node-allreduce-nccltests") = 0.78.
    {0.62, 0.48, 0.78, kCublasWorkspacePreHopper, 0},
    // Hopper. Attention: FA2 reaches ~335-380 TFLOP/s forward of H100's 989 (Shah et al. 2024,
    // FlashAttention-3, arXiv:2407.08608, introduction). NVLink: NVIDIA's nccl-tests maintainers
    // quote ~370 GB/s ring busbw on H100's 450 GB/s (nccl-tests issues) = 0.82. FP8 GEMMs: MAMF
    // H100 SXM, e4m3 1402.6 of 1979 (0.709) against bf16 794.5 of 989 (0.803) = 0.883 (the
    // Hopper presets' gemm_efficiency is the H100 SXM bf16 ratio; H200's own FP8 ratio, 0.734,
    // would give 0.914).
    {0.38, 0.30, 0.82, kCublasWorkspaceHopper, 0.709 / 0.803},
    // Blackwell. Attention: assumption, Hopper-like until Blackwell kernels are measured. NVLink:
    // ASSUMPTION: Hopper's 0.82 (not fitted to the B200 curves of collectives.json). cuBLAS
    // workspace: ASSUMPTION: Hopper's 32 MiB (the PyTorch version read tests sm90 exactly; later
    // ones are reported to extend it to sm100). FP8 GEMMs: MAMF B200 SXM, e4m3 3432.5 of 4500
    // (0.763) against bf16 1745.0 of 2250 (0.776) = 0.983.
    {0.38, 0.30, 0.82, kCublasWorkspaceHopper, 0.763 / 0.776},
};

}  // namespace

const GenerationConstants& generation_constants(GpuGeneration g) {
  return kConstants[static_cast<int>(g)];
}

const std::vector<std::string>& gpu_generation_names() {
  static const std::vector<std::string> names = {"volta", "ampere", "hopper", "blackwell"};
  return names;
}

std::string to_string(GpuGeneration g) { return gpu_generation_names()[static_cast<int>(g)]; }

GpuGeneration parse_gpu_generation(const std::string& text, const std::string& key_path) {
  const std::vector<std::string>& names = gpu_generation_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (text == names[i]) return static_cast<GpuGeneration>(i);
  }
  throw InputError(key_path, "unknown GPU generation '" + text + "'" + did_you_mean(text, names) +
                                 "; allowed: " + join_list(names));
}

}  // namespace zerosim
