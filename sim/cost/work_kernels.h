#pragma once
// What a compute Work of the training plan runs on its GPU: which GEMMs, how much attention-core
// work and how much elementwise traffic each WorkKind stands for, decided here once. The cost model
// prices it (compute_cost.cpp) and `zerosim plan` exports it (sim/report/plan_export.cpp), so the
// ops validate/ replays on GPUs are the ops that were priced.
#include <optional>
#include <vector>

#include "sim/model/model.h"
#include "sim/parallel/training_plan.h"

namespace zerosim {

struct WorkKernels {
  // Forward shapes: a layer block's weight GEMMs (TP-split) or the head's logits GEMM.
  std::vector<Gemm> gemms;
  // Backward runs every GEMM twice (dgrad and wgrad, each the forward's FLOPs), the block's
  // elementwise kernels twice and its kernel launches twice.
  int passes = 1;
  // A backward split by a zero-bubble schedule: B (Input) keeps the dgrads, the attention core,
  // the elementwise kernels and the once-per-pass traffic; W (Weight) only the wgrads. Split at
  // its input linear: BeforeInputLinear keeps all but that linear's GEMM (`gemms` lacks it), the
  // two others that GEMM alone, its dgrad or its wgrad.
  BackwardPart part = BackwardPart::Whole;
  // Attention blocks only: the attention core's FLOPs (QK^T and attention x V). Its backward
  // recomputes and differentiates both products: 2.5x the forward (FlashAttention-2's count).
  std::optional<double> attention_flops;
  // Layer blocks only: HBM bytes of one pass of the block's elementwise kernels (norm,
  // activation, softmax, dropout, residual), half the layer's.
  std::optional<double> elementwise_bytes;
  // fp8 training, layer blocks only: HBM bytes of this pass's FP8 casts (amax passes, casts and
  // their transposes) around the block's linear GEMMs, by recipe (work_kernels.cpp); a backward
  // counts its own, not twice the forward's.
  double fp8_cast_bytes = 0;
  // HBM bytes moved once whatever the pass: the head's fp32 cross-entropy over the
  // vocab-parallel logits and the final norm, the embedding's row gather, or a layer block's
  // copies around torchtitan's sequence-sharded TP collectives.
  double once_bytes = 0;
};

// Whether a Work of kind `kind` is a block of an MoE layer (its layer is Scenario::layer_work's
// MoE layer).
inline bool is_moe_kind(WorkKind kind) {
  return kind == WorkKind::MoeForward || kind == WorkKind::MoeBackward;
}

// The kernels of a Work of kind `kind` in scenario `s`, whose layer is `layer` (Scenario::layer_work;
// the MoE layer's for the MoE kinds). The layer's elementwise traffic is split half and half
// between its attention and feed-forward blocks. Optimizer steps, copies and host work run none
// of these: all empty.
WorkKernels work_kernels(WorkKind kind, const Scenario& s, const LayerWork& layer,
                         BackwardPart part = BackwardPart::Whole);

// What the backward of layer block `backward_kind` (AttentionBackward or MlpBackward) replays
// under torchtitan's op-level checkpointing (Recompute::SelectiveOp, op_checkpoint_matmuls in
// sim/model/model.h): the block's matmuls that were not saved and all its elementwise kernels,
// one forward pass; the attention kernel's output was saved, so the core is not rerun.
WorkKernels op_checkpoint_recompute(WorkKind backward_kind, const Scenario& s,
                                    const LayerWork& layer);

// The GEMMs as launched: the forward shapes, or in backward each one's dgrad
// (m x k = [m x n] * [n x k]) then wgrad (k x n = [k x m] * [m x n]); a B pass launches only
// the dgrads, a W pass only the wgrads, an input linear's part its own GEMM's.
std::vector<Gemm> gemm_launches(const WorkKernels& k);

}  // namespace zerosim
