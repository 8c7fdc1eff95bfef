#include "sim/cost/work_kernels.h"

#include <cstdint>

namespace zerosim {

namespace {

std::vector<Gemm> block_gemms(const LayerWork& layer, bool attention) {
  const auto split = layer.gemms.begin() + static_cast<std::ptrdiff_t>(layer.attention_gemms);
  return attention ? std::vector<Gemm>(layer.gemms.begin(), split)
                   : std::vector<Gemm>(split, layer.gemms.end());
}

// HBM bytes per element of the FP8 casts around a layer's linear GEMMs (fp8 training).
struct Fp8CastBytes {
  double input = 0;        // forward: each GEMM's m x k input
  double weight = 0;       // each pass: each GEMM's k x n weight
  double grad_output = 0;  // backward: each GEMM's m x n output gradient
  double saved_input = 0;  // backward: each GEMM's input, cast again from its saved 16 bits
};

// Transformer Engine (Megatron-core, the other frameworks' TE layers): one quantization reads the
// 16-bit tensor (2 B) and writes, in the same kernel, the row-wise data this pass's GEMM takes and
// the column-wise data (transposed on Hopper) the weight-gradient GEMM takes, 1 B each: the input
// in forward (transformer_engine/pytorch/module/linear.py at d0067d0: the input quantizer's usage
// is row-wise and column-wise when the backward needs the input, which keeps the column-wise
// data), the output gradient in backward (module/base.py grad_output_preprocess: fused cast and
// transpose). Current scaling (tensorwise) first reads the tensor for its amax
// (csrc/quantizer.cpp, Float8CurrentScalingQuantizer::quantize_impl: nvte_compute_amax, then
// nvte_quantize_v2); delayed scaling takes the scale from earlier steps' amax and records the
// amax in the cast itself; mxfp8 writes an E8M0 scale per 32 elements of each copy and blockwise
// an fp32 scale per 128 (both with the data, in one pass). The weights are cast at a step's first
// micro-batch and cached for the others (Megatron passes is_first_microbatch): not counted.
// ASSUMPTION: a cast fused into the norm before it (LayerNormLinear), and the row-wise-only cast
// before a sequence-parallel all-gather with its column-wise cast in backward, are counted as the
// plain cast; current scaling's all-reduce of such an input's amax over the TP group (one float,
// linear.py set_quantizer_amax_reduction_group) is not simulated.
// torchao's Float8Linear (framework fsdp: torchtitan) keeps the 16-bit input for backward and
// casts every operand where it is used, each an amax pass and a cast (read 2 + read 2 + write 1
// = 5 B: torchao/float8/float8_linear.py at 36027d8, matmul_with_hp_or_float8_args): forward the
// input and the weight; backward the output gradient twice (for the input gradient and, in the
// other layout, for the weight gradient), the weight again and the saved input. With FP8
// all-gathers (training.fp8_param_gather) the weight arrives in FP8, cast on its shard before the
// gather, and is not cast again.
Fp8CastBytes fp8_cast_bytes(const Scenario& s) {
  if (s.parallel.framework == Framework::Fsdp) {
    return {5, s.training.fp8_param_gather ? 0.0 : 5.0, 10, 5};
  }
  const double per_usage = fp8_bytes_per_element(s.training.fp8_recipe);
  const double amax = s.training.fp8_recipe == Fp8Recipe::Tensorwise ? 2 : 0;
  const double cast = amax + 2 + 2 * per_usage;
  return {cast, 0, cast, 0};
}

// A layer block's linears run in FP8: their GEMMs at FP8 rates, after the casts of this pass.
void run_in_fp8(WorkKernels& k, const Scenario& s, bool backward) {
  const Fp8CastBytes per = fp8_cast_bytes(s);
  double bytes = 0;
  for (Gemm& g : k.gemms) {
    g.fp8 = true;
    const double count = static_cast<double>(g.count);
    const double in = static_cast<double>(g.m) * static_cast<double>(g.k) * count;
    const double weight = static_cast<double>(g.k) * static_cast<double>(g.n) * count;
    const double out = static_cast<double>(g.m) * static_cast<double>(g.n) * count;
    bytes += per.weight * weight +
             (backward ? per.grad_output * out + per.saved_input * in : per.input * in);
  }
  k.fp8_cast_bytes = bytes;
}

}  // namespace

WorkKernels work_kernels(WorkKind kind, const Scenario& s, const LayerWork& layer,
                         BackwardPart part) {
  const ModelSpec& m = s.model;
  const double tp = s.parallel.tp;
  const double sb = s.micro_batch_tokens();
  const bool backward = kind == WorkKind::AttentionBackward || kind == WorkKind::MlpBackward ||
                        kind == WorkKind::MoeBackward || kind == WorkKind::HeadBackward ||
                        kind == WorkKind::MtpBackward ||
                        kind == WorkKind::EmbedBackward;
  WorkKernels k;
  k.passes = backward ? 2 : 1;
  switch (kind) {
    case WorkKind::AttentionForward:
    case WorkKind::AttentionBackward:
      k.gemms = block_gemms(layer, true);
      k.attention_flops = backward ? 2.5 * layer.attention_flops : layer.attention_flops;
      k.elementwise_bytes = layer.elementwise_bytes / 2;
      break;
    case WorkKind::MlpForward:
    case WorkKind::MlpBackward:
    case WorkKind::MoeForward:
    case WorkKind::MoeBackward:
      k.gemms = block_gemms(layer, false);
      k.elementwise_bytes = layer.elementwise_bytes / 2;
      break;

    case WorkKind::HeadForward:
    case WorkKind::HeadBackward: {
      // The model's logits and, with MTP, each module's again over the same tokens (Megatron-
      // core computes them all on the loss's stage).
      const double heads = 1.0 + static_cast<double>(m.mtp_num_layers);
      k.gemms = {{"logits", static_cast<std::int64_t>(sb), m.vocab_size / s.parallel.tp,
                  m.hidden_size, 1 + m.mtp_num_layers}};
      // Read 16-bit logits, write and read fp32 (10 bytes per logit), plus the final norm.
      k.once_bytes = heads * 10.0 * sb * m.vocab_size / tp + 4.0 * sb * m.hidden_size;
      break;
    }
    case WorkKind::MtpForward:
    case WorkKind::MtpBackward: {
      // One module: eh_proj, column-parallel [2h -> h / tp] over the gathered tokens; the next
      // tokens' embedding rows gathered (read + write, as the embedding's) and its three norms
      // (enorm, hnorm, final; read + write 16-bit), over sb / tp tokens under sequence
      // parallelism.
      const double norm_tokens = s.parallel.sequence_parallel ? sb / tp : sb;
      k.gemms = {{"mtp_eh_proj", static_cast<std::int64_t>(sb), m.hidden_size / s.parallel.tp,
                  2 * m.hidden_size, 1}};
      k.once_bytes = 6.0 * sb * m.hidden_size + 3 * 4.0 * norm_tokens * m.hidden_size;
      break;
    }
    case WorkKind::EmbedForward:
    case WorkKind::EmbedBackward:
      // Gather sbh 16-bit rows (read + write), plus the position embedding add when learned.
      k.once_bytes = 6.0 * sb * m.hidden_size;
      break;
    default: break;  // optimizer steps, copies, quantization, host work: priced elsewhere
  }
  // torchtitan's TP plan (models/llama3/infra/parallelize.py at 6b11290c1) shards the
  // activations between blocks on the sequence, dim 1 of [batch, seq, hidden]: DTensor all-gathers
  // a block's input and reduce-scatters its output on dim 1 with the functional collectives
  // (torch/distributed/_functional_collectives.py), which NCCL runs on dim 0. The gathered result
  // is re-concatenated on dim 1, a copy unless the dims before it are all 1 (torch/_utils.py
  // _maybe_view_chunk_cat: a view at micro-batch 1); the reduce-scatter's input is chunked on
  // dim 1 and concatenated on dim 0 first (torch.cat, a copy). Each copy reads and writes the
  // whole [b, s, h] tensor, 16-bit but for the gathered input under FP8 training, which torchao
  // casts before the gather (float8_tensor_parallel.py Float8ColwiseParallel at 36027d8); the
  // backward mirrors them (each collective's gradient is the other). ASSUMPTION: torch.compile
  // keeps them (Inductor lowers the cat to a copy kernel).
  if (is_dense_layer_block(kind) && s.parallel.framework == Framework::Fsdp && s.parallel.tp > 1 &&
      s.parallel.sequence_parallel) {
    const double gathered = s.training.precision == Precision::Fp8 ? 1 : 2;
    const double per_token = 2 * 2 + (s.training.micro_batch_size > 1 ? 2 * gathered : 0);
    k.once_bytes = per_token * sb * static_cast<double>(m.hidden_size);
  }
  if (s.training.precision == Precision::Fp8 && k.elementwise_bytes) run_in_fp8(k, s, backward);
  k.part = part;
  // The block's backward before its input linear keeps everything but that linear's two GEMMs;
  // each of those is one GEMM (the casts of the output gradient were made before them).
  const bool input_linear_gemm = is_input_linear_gemm(part);
  if (part == BackwardPart::BeforeInputLinear || input_linear_gemm) {
    std::erase_if(k.gemms, [&](const Gemm& g) { return g.opens_dense_block() != input_linear_gemm; });
  }
  if (part == BackwardPart::Weight || input_linear_gemm) {
    k.attention_flops.reset();
    if (k.elementwise_bytes) k.elementwise_bytes = 0.0;
    k.once_bytes = 0;
    k.fp8_cast_bytes = 0;  // B cast the output gradient for both GEMMs
  }
  return k;
}

WorkKernels op_checkpoint_recompute(WorkKind backward_kind, const Scenario& s,
                                    const LayerWork& layer) {
  const bool attention = backward_kind == WorkKind::AttentionBackward;
  WorkKernels k;
  for (const CheckpointedMatmul& mm :
       op_checkpoint_matmuls(s.model, static_cast<std::int64_t>(s.micro_batch_tokens()),
                             s.parallel.tp)) {
    if (mm.attention == attention && !mm.saved) k.gemms.push_back(mm.gemm);
  }
  k.elementwise_bytes = layer.elementwise_bytes / 2;
  if (s.training.precision == Precision::Fp8) run_in_fp8(k, s, false);
  return k;
}

std::vector<Gemm> gemm_launches(const WorkKernels& k) {
  if (k.passes == 1) return k.gemms;
  std::vector<Gemm> out;
  const bool dgrads = k.part != BackwardPart::Weight && k.part != BackwardPart::InputLinearWgrad;
  const bool wgrads = k.part != BackwardPart::Input && k.part != BackwardPart::InputLinearDgrad;
  for (const Gemm& g : k.gemms) {
    if (dgrads) out.push_back({g.name + ".dgrad", g.m, g.k, g.n, g.count, g.expert, g.fp8});
    if (wgrads) out.push_back({g.name + ".wgrad", g.k, g.n, g.m, g.count, g.expert, g.fp8});
  }
  return out;
}

}  // namespace zerosim
