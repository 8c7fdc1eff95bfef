#pragma once
// The constants of zerosim that were chosen by looking at measurements, declared in one place with
// the data they were fitted on and how. Every other constant comes from a datasheet, a paper or a
// framework's source and cites it where it is used; an ASSUMPTION says so. A fitted constant is
// in-sample for the data it was fitted on: docs/VALIDATION.md reports those runs apart from the
// held-out ones, and `zerosim calibrate` refits every entry here on the calibration set only.
//
// The scenario exposes each as a key of the `fitted` section (its default is the value here), so
// a run can change it and the refit can try values without rebuilding.

namespace zerosim::fitted {

struct FittedConstant {
  const char* key;        // scenario key, "fitted.<name>"
  double value;
  const char* unit;       // "" for a plain number, else the unit its key is written in
  const char* fitted_on;  // the measurements it was chosen on
  const char* method;     // how
  // The family of validate/cases/split.json's calibration set it is searched on by `zerosim
  // calibrate`; "" for a constant fitted on other data (the collective benchmarks).
  const char* calibration_family;
  // A plain number (gemm_sustained) rather than a quantity with a unit (a time).
  constexpr bool plain_number() const { return unit[0] == '\0'; }
};

// Share of the GPU's best measured GEMM rate (MAMF, cluster.gpu.gemm_efficiency) sustained by a
// training step's GEMMs: clocks settle lower under sustained power draw and shapes are not the
// best one.
inline constexpr FittedConstant kGemmSustained{
    "fitted.gemm_sustained", 0.85, "",
    "megatron-sc21, the calibration set's 16 runs: since GEMMs lost their small-dimension factor "
    "(2026-12-05) the search on them alone gives 0.85, the value first chosen on the 23 "
    "non-approximate runs of the default run before the calibration/evaluation split "
    "(megatron-sc21 13, ds-azure 5, torchtitan 5); the evaluation set informs it no longer "
    "(docs/VALIDATION.md#refitting-the-declared-constants)",
    "the grid 0.70 to 0.95 in steps of 0.01, minimizing those runs' step-time MAPE on the "
    "analytical network; `zerosim calibrate` repeats the search on the calibration set only and "
    "reports the evaluation set at both values",
    "megatron-sc21"};

// Host and launch time of one NCCL call not graphed with CUDA graphs, on top of NCCL's own latency
// model.
inline constexpr FittedConstant kNcclLaunchOverhead{
    "fitted.nccl_launch_overhead", 25e-6, "s",
    "the 32 KiB points of two all_reduce curves on one node in validate/measurements/"
    "collectives.json (8x A100, nccl-tests: 43.8 us; 8x H200, torch: 40.0 us), which NCCL's own "
    "model puts 27.8 and 24.6 us below the measurement",
    "the measured time minus NCCL's model time at 32 KiB, averaged over the two curves (26.2 us) "
    "and rounded to the nearest 5 us; those two points are reported apart from the held-out ones",
    ""};

// Host time per counted op of a framework's layer-block pass (sim/parallel/framework_policy.cpp,
// megatron_gpt_layer_host_ops): the dispatched op itself (about 6 us, pytorch/pytorch #41383)
// and its share of what the count leaves out (nn.Module and autograd.Function calls, Python
// between the ops, the stream syncs of torch.tensor(..., device=...); docs/SOURCES.md#host-
// dispatch). Fitted on its own calibration family, the vTrain single-node runs of hidden 2048;
// vTrain's hidden-1024 runs, the most host-bound, are held out.
inline constexpr FittedConstant kLayerHostOpTime{
    "fitted.layer_host_op_time", 13e-6, "s",
    "the 720 single-node vTrain runs of hidden 2048 (family vtrain-h2048, validate/cases/"
    "vtrain.json; 2-8 A100, TP 1-8, micro-batch 1-8); vTrain's 720 hidden-1024 single-node runs "
    "and its 109 multi-node runs are held out (family vtrain)",
    "the grid 6 to 18 us in steps of 1 us, minimizing those runs' step-time MAPE on the "
    "analytical network at the shipped gemm_sustained (12 us until GEMMs lost their "
    "small-dimension factor, 13 us since, 2026-12-05); `zerosim calibrate` repeats the search",
    "vtrain-h2048"};

inline constexpr FittedConstant kAll[] = {kGemmSustained, kNcclLaunchOverhead, kLayerHostOpTime};

}  // namespace zerosim::fitted
