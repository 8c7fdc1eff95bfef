#include "sim/cost/work_kernels.h"

#include <cstdint>

namespace zerosim {

namespace {

std::vector<Gemm> block_gemms(const LayerWork& layer, bool attention) {
  const auto split = layer.gemms.begin() + static_cast<std::ptrdiff_t>(layer.attention_gemms);
  return attention ? std::vector<Gemm>(layer.gemms.begin(), split)
                   : std::vector<Gemm>(split, layer.gemms.end());
}

// Transformer Engine runs a layer's linears in FP8: each GEMM's 16-bit input is cast to FP8
// first (read 2 bytes, write 1 per element of its m x k input; ASSUMPTION: the amax reduction and
// the weights' casts, once per step, are neglected).
void run_in_fp8(WorkKernels& k) {
  for (Gemm& g : k.gemms) {
    g.fp8 = true;
    *k.elementwise_bytes += 3.0 * static_cast<double>(g.m) * static_cast<double>(g.k) *
                            static_cast<double>(g.count);
  }
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
  if (s.training.precision == Precision::Fp8 && k.elementwise_bytes) run_in_fp8(k);
  k.part = part;
  if (part == BackwardPart::Weight) {
    k.attention_flops.reset();
    if (k.elementwise_bytes) k.elementwise_bytes = 0.0;
    k.once_bytes = 0;
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
  if (s.training.precision == Precision::Fp8) run_in_fp8(k);
  return k;
}

std::vector<Gemm> gemm_launches(const WorkKernels& k) {
  if (k.passes == 1) return k.gemms;
  std::vector<Gemm> out;
  for (const Gemm& g : k.gemms) {
    if (k.part != BackwardPart::Weight) {
      out.push_back({g.name + ".dgrad", g.m, g.k, g.n, g.count, g.expert, g.fp8});
    }
    if (k.part != BackwardPart::Input) {
      out.push_back({g.name + ".wgrad", g.k, g.n, g.m, g.count, g.expert, g.fp8});
    }
  }
  return out;
}

}  // namespace zerosim
