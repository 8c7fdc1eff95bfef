// Parameter counts, per-layer GEMM work and activation memory of a transformer (see model.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim {

std::string to_string(MlpKind k) {
  switch (k) {
    case MlpKind::Gelu: return "gelu";
    case MlpKind::Swiglu: return "swiglu";
    case MlpKind::Relu: return "relu";
    case MlpKind::Geglu: return "geglu";
  }
  return "?";
}

std::string to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::SelectiveOp: return "selective-op";
    case Recompute::Full: return "full";
  }
  return "?";
}

std::string to_string(NormKind k) {
  switch (k) {
    case NormKind::LayerNorm: return "layernorm";
    case NormKind::RmsNorm: return "rmsnorm";
    case NormKind::LayerNormNoBias: return "layernorm_no_bias";
  }
  return "?";
}

std::string to_string(PositionKind k) {
  switch (k) {
    case PositionKind::Learned: return "learned";
    case PositionKind::Rotary: return "rotary";
    case PositionKind::Alibi: return "alibi";
  }
  return "?";
}

namespace {

bool gated(const ModelSpec& m) { return m.mlp == MlpKind::Swiglu || m.mlp == MlpKind::Geglu; }

// Parameters of one norm: LayerNorm has a gain and a bias, RMSNorm only a gain.
std::int64_t norm_params(const ModelSpec& m) {
  return m.norm == NormKind::LayerNorm ? 2 * m.hidden_size : m.hidden_size;
}

// Width of K (and of V): kv_heads * head_dim; equals hidden_size without GQA.
std::int64_t kv_width(const ModelSpec& m) { return m.num_kv_heads * m.head_dim(); }


// TP splits heads, kv heads and the FFN width across ranks (Megatron column/row parallel
// layers); a split that leaves a fraction of a head is not a configuration anyone runs.
void check_parallel(const ModelSpec& m, std::int64_t micro_batch, std::int64_t tp) {
  if (micro_batch < 1)
    throw InputError("training.micro_batch_size",
                     "must be a positive integer, got " + std::to_string(micro_batch));
  if (tp < 1) throw InputError("parallel.tp", "must be a positive integer, got " + std::to_string(tp));
  if (m.num_attention_heads % tp != 0 || m.num_kv_heads % tp != 0 || m.ffn_hidden_size % tp != 0)
    throw InputError("parallel.tp",
                     "tp = " + std::to_string(tp) + " must divide num_attention_heads (" +
                         std::to_string(m.num_attention_heads) + "), num_kv_heads (" +
                         std::to_string(m.num_kv_heads) + ") and ffn_hidden_size (" +
                         std::to_string(m.ffn_hidden_size) + ") of model '" + m.name + "'");
  // Experts are split like the dense MLP (Megatron's expert tensor parallelism at ep = 1).
  if (m.is_moe() && (m.moe.expert_ffn_hidden_size % tp != 0 || m.moe.shared_ffn_hidden_size % tp != 0))
    throw InputError("parallel.tp",
                     "tp = " + std::to_string(tp) + " must divide the expert width (" +
                         std::to_string(m.moe.expert_ffn_hidden_size) +
                         ") and the shared experts' width (" +
                         std::to_string(m.moe.shared_ffn_hidden_size) + ") of model '" + m.name + "'");
}

// The parameters of a linear: weights and bias, all copies.
std::int64_t linear_params(const Linear& l) {
  return l.copies * (l.in * l.out + (l.bias ? l.out : 0));
}

std::int64_t block_params(const Block& b) {
  std::int64_t n = b.replicated_params;
  for (const Linear& l : b.linears) n += linear_params(l);
  return n;
}

// A dense (gated or not) MLP of width f named with `prefix`: gate and up fused (two tensors).
void push_mlp(std::vector<Linear>& out, const ModelSpec& m, const std::string& prefix,
              std::int64_t f, std::int64_t copies, bool routed) {
  const std::int64_t h = m.hidden_size;
  if (gated(m)) {
    out.push_back({prefix + "_gate_up", h, 2 * f, TpSplit::Column, m.mlp_bias, 2, copies, routed,
                   GemmRole::GatedMlpInput});
  } else {
    out.push_back({prefix + "_up", h, f, TpSplit::Column, m.mlp_bias, 1, copies, routed,
                   GemmRole::MlpInput});
  }
  out.push_back({prefix + "_down", f, h, TpSplit::Row, m.mlp_bias, 1, copies, routed});
}


}  // namespace

Block attention_block(const ModelSpec& m) {
  const std::int64_t h = m.hidden_size;
  Block b;
  if (m.is_mla()) {
    // DeepSeek's MLA: the down-projections (to the latents and the shared rotary key) are not
    // split over TP (Megatron-core's MLA replicates them), the up-projections by heads.
    const MlaSpec& a = m.mla;
    const std::int64_t heads = m.num_attention_heads;
    if (a.q_lora_rank > 0) {
      b.linears.push_back({"q_down", h, a.q_lora_rank, TpSplit::Replicated, m.qkv_bias});
      b.linears.push_back({"q_up", a.q_lora_rank, m.qk_width(), TpSplit::Column, false, 1, 1,
                           false, GemmRole::MlaUpProjection});
      b.replicated_params += a.q_lora_rank;  // q_a_layernorm (RMSNorm)
      b.replicated_tensors += 1;
    } else {
      b.linears.push_back({"q", h, m.qk_width(), TpSplit::Column, false});  // q_proj: no bias
    }
    b.linears.push_back(
        {"kv_down", h, a.kv_lora_rank + a.qk_rope_head_dim, TpSplit::Replicated, m.qkv_bias});
    b.linears.push_back({"kv_up", a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim),
                         TpSplit::Column, false, 1, 1, false, GemmRole::MlaUpProjection});
    b.replicated_params += a.kv_lora_rank;  // kv_a_layernorm (RMSNorm)
    b.replicated_tensors += 1;
  } else {
    // Fused QKV [h -> q + 2*kvw] (q = h unless the head width is decoupled, as in Gemma).
    b.linears.push_back({"qkv", h, m.q_width() + 2 * kv_width(m), TpSplit::Column, m.qkv_bias, 1,
                         1, false, GemmRole::QkvProjection});
  }
  b.linears.push_back({"attn_out", m.v_width(), h, TpSplit::Row, m.attention_output_bias});
  // The block's norms, the first half with attention: one norm of a parallel block feeds both
  // and is fetched with the attention; Gemma 2's four split two and two.
  const std::int64_t norms = (m.layer_norms + 1) / 2;
  b.replicated_params += norms * norm_params(m);
  b.replicated_tensors += static_cast<int>(norms) * (m.norm == NormKind::LayerNorm ? 2 : 1);
  if (m.qk_norm) {
    b.replicated_params += m.qk_norm_projection ? m.q_width() + kv_width(m) : 2 * m.head_dim();
    b.replicated_tensors += 2;
  }
  if (m.attention_sinks) {  // one logit per head (counted whole on every TP rank)
    b.replicated_params += m.num_attention_heads;
    b.replicated_tensors += 1;
  }
  return b;
}

Block mlp_block(const ModelSpec& m, bool moe) {
  Block b;
  if (moe) {
    const MoeSpec& e = m.moe;
    b.linears.push_back({"router", m.hidden_size, e.num_experts, TpSplit::Replicated, e.router_bias});
    push_mlp(b.linears, m, "expert", e.expert_ffn_hidden_size, e.num_experts, true);
    if (e.shared_ffn_hidden_size > 0) push_mlp(b.linears, m, "shared", e.shared_ffn_hidden_size, 1, false);
    if (e.shared_expert_gate)
      b.linears.push_back({"shared_gate", m.hidden_size, 1, TpSplit::Replicated, false});
  } else {
    push_mlp(b.linears, m, "mlp", m.ffn_hidden_size, 1, false);
  }
  const std::int64_t norms = m.layer_norms / 2;
  b.replicated_params = norms * norm_params(m);
  b.replicated_tensors = static_cast<int>(norms) * (m.norm == NormKind::LayerNorm ? 2 : 1);
  return b;
}

ParamCounts count_params(const ModelSpec& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t q = m.q_width();
  const std::int64_t kvw = kv_width(m);
  const std::int64_t f = m.ffn_hidden_size;

  ParamCounts c;
  c.attention_norm = (m.layer_norms + 1) / 2 * norm_params(m);
  c.mlp_norm = m.layer_norms / 2 * norm_params(m);
  c.attention_block = block_params(attention_block(m));
  c.mlp_block = block_params(mlp_block(m, false));
  c.per_layer = c.attention_block + c.mlp_block;
  const std::int64_t moe_layers = m.moe_layer_count();
  if (m.is_moe()) {
    c.moe_block = block_params(mlp_block(m, true));
    c.moe_layer = c.attention_block + c.moe_block;
  }

  const std::int64_t token_table = m.vocab_size * h;
  const std::int64_t position_table =
      m.position == PositionKind::Learned ? m.max_position_embeddings * h : 0;
  // BLOOM's word_embeddings_layernorm is counted with the embedding it follows.
  c.embedding = token_table + position_table + (m.embedding_norm ? norm_params(m) : 0);
  // Output head: no bias in GPT/Llama/BLOOM; Phi-2's lm_head has one (kept when tied).
  c.output = (m.tied_embeddings ? 0 : token_table) + (m.output_bias ? m.vocab_size : 0);
  c.final_norm = norm_params(m);
  const bool mtp_moe = m.is_moe_layer(m.num_layers);
  c.mtp = m.mtp_num_layers * ((mtp_moe ? c.moe_layer : c.per_layer) + 2 * h * h + 3 * norm_params(m));
  c.total = c.per_layer * (m.num_layers - moe_layers) + c.moe_layer * moe_layers + c.embedding +
            c.output + c.final_norm + c.mtp;
  c.active = c.total;
  if (m.is_moe()) {
    const Block moe = mlp_block(m, true);
    std::int64_t one_expert = 0;
    for (const Linear& l : moe.linears)
      if (l.routed) one_expert += linear_params(l) / l.copies;
    const std::int64_t routed_layers = moe_layers + (mtp_moe ? m.mtp_num_layers : 0);
    c.active -= routed_layers * (m.moe.num_experts - m.moe.top_k) * one_expert;
  }

  // Largest module at Hugging Face granularity (what DeepSpeed's estimator walks): the token
  // embedding, the position table, and each of q/k/v/o and each MLP matrix with its bias (an
  // expert's, a shared expert's, MLA's projections alike).
  const std::int64_t bqkv = m.qkv_bias ? 1 : 0, bo = m.attention_output_bias ? 1 : 0;
  const std::int64_t bm = m.mlp_bias ? 1 : 0;
  c.largest_module = std::max({token_table, position_table, h * q + bqkv * q, q * h + bo * h,
                               h * kvw + bqkv * kvw, h * f + bm * f, f * h + bm * h});
  // The routed experts' linears are one tensor each, all experts together (as the ZeRO-3
  // units hold them, sim/parallel/layout.cpp).
  if (m.is_moe() || m.is_mla()) {
    for (const Block& b : {attention_block(m), mlp_block(m, m.is_moe())})
      for (const Linear& l : b.linears)
        c.largest_module = std::max(
            c.largest_module, l.routed ? linear_params(l) : (l.in * l.out + (l.bias ? l.out : 0)) / l.tensors);
  }
  return c;
}

namespace {

// The attention core's forward FLOPs for b sequences of s queries that each attend to `keys`
// keys on average, all heads: QK^T and AV, 2 * 2 * d per (query, key) pair and head (MLA: 2 per
// pair over its query/key width and 2 over its value width).
double attention_core_flops(const ModelSpec& m, double b, double s, double keys) {
  return m.is_mla() ? 2.0 * b * s * keys * static_cast<double>(m.qk_width() + m.v_width())
                    : 4.0 * b * s * keys * static_cast<double>(m.q_width());
}

}  // namespace

double LayerWork::flops() const {
  double total = attention_flops;
  for (const auto& g : gemms) total += g.flops();
  return total;
}

namespace {

// The GEMMs of a block's linears on one TP rank: a column-parallel linear splits its output
// columns (n), a row-parallel one its input rows (k); an expert sees its balanced share of the
// routed tokens, ceil(tokens x top_k / num_experts). The routed experts are split by expert_tp;
// below tp (expert TP 1 with the EP groups across TP: Megatron-core's MoE parallel folding) a
// rank routes only its own 1 / (tp / expert_tp) of the tokens (sequence parallelism).
void push_gemms(std::vector<Gemm>& out, const ModelSpec& m, const Block& b, std::int64_t tokens,
                std::int64_t tp, std::int64_t ep, double load_imbalance,
                std::int64_t expert_tp) {
  for (const Linear& l : b.linears) {
    std::int64_t rows = tokens, copies = l.copies, split = tp;
    if (l.routed) {
      split = expert_tp;
      // In 128 bits: tokens x top_k x ep may pass 2^63 for inputs validation allows.
      const __int128 routed =
          static_cast<__int128>(tokens / (tp / expert_tp)) * m.moe.top_k * ep;
      rows = static_cast<std::int64_t>((routed + m.moe.num_experts - 1) / m.moe.num_experts);
      // The busiest rank's experts (expert parallelism); on one rank the rows sum to the same.
      if (load_imbalance != 1.0 && ep > 1)
        rows = static_cast<std::int64_t>(std::ceil(static_cast<double>(rows) * load_imbalance));
      copies = l.copies / ep;
    }
    out.push_back({l.name, rows, l.split == TpSplit::Column ? l.out / split : l.out,
                   l.split == TpSplit::Row ? l.in / split : l.in, copies, l.routed});
    out.back().role = l.role;
  }
}

}  // namespace

LayerWork layer_forward_work(const ModelSpec& m, std::int64_t micro_batch, std::int64_t tp,
                             bool sequence_parallel, bool flash_attention, bool moe_layer,
                             std::int64_t ep, double load_imbalance, std::int64_t cp,
                             ElementwiseOps ops, std::int64_t expert_tp) {
  check_parallel(m, micro_batch, tp);
  if (expert_tp == 0) expert_tp = tp;
  if (cp < 1 || m.seq_length % cp != 0)
    throw InputError("parallel.cp", "must divide the sequence length (" +
                                        std::to_string(m.seq_length) + "), got " + std::to_string(cp));
  const std::int64_t h = m.hidden_size;
  const std::int64_t q = m.q_width();
  const std::int64_t kvw = kv_width(m);
  const std::int64_t f = m.ffn_hidden_size;
  const std::int64_t tokens = micro_batch * m.seq_length / cp;  // GEMM m dimension
  const bool moe = moe_layer && m.is_moe();
  if (moe && (ep < 1 || m.moe.num_experts % ep != 0))
    throw InputError("parallel.ep", "must divide model.moe.num_experts (" +
                                        std::to_string(m.moe.num_experts) + "), got " +
                                        std::to_string(ep));

  LayerWork w;
  // Megatron TP: QKV and MLP up (+gate, fused) are column-parallel (n split), the attention
  // output projection and MLP down are row-parallel (k split). With sequence parallelism the
  // inputs are all-gathered first, so the GEMM shapes are the same.
  push_gemms(w.gemms, m, attention_block(m), tokens, tp, 1, 1.0, tp);
  w.attention_gemms = w.gemms.size();
  push_gemms(w.gemms, m, mlp_block(m, moe), tokens, tp, ep, load_imbalance, expert_tp);

  // The attention core, split across TP ranks by heads and across CP ranks by queries (each
  // holds 1 / cp of the causal work: Megatron-core's load-balanced chunks). Training attention
  // is causal. A fused kernel (flash attention) runs only the tiles inside the causal band, and
  // inside a sliding window of k keys: s k - k^2 / 2 (query, key) pairs per sequence, s^2 / 2
  // without a window. That is the FlashAttention benchmarks' convention
  // (Dao-AILab/flash-attention, benchmarks/benchmark_flash_attention.py: the causal count is
  // half the square), in which the attention rates of gpu_generation.cpp were measured.
  // Unfused attention computes all s^2 scores and masks them. The MFU numerator
  // (model_flops_per_token) keeps Megatron's count, s k.
  const double b = static_cast<double>(micro_batch);
  const double s = static_cast<double>(m.seq_length);
  const double hd = static_cast<double>(h);
  const double t = static_cast<double>(tp);
  const double c = static_cast<double>(cp);
  const double keys_per_query = flash_attention ? mean_keys_per_query(m, true) : s;
  w.attention_flops = attention_core_flops(m, b, s, keys_per_query) / t / c;

  // HBM traffic of the non-GEMM kernels, forward, 16-bit elements (2 bytes) and 1-byte dropout
  // masks; each kernel reads its inputs once and writes its outputs once (fused where Megatron
  // fuses: bias+GeLU, bias+dropout+residual-add, scale+mask+softmax). Bias adds ride on those
  // fusions and are not counted separately. With sbh = b*s*h elements:
  //   2 norms (read x, write y)                         2 * 2 sbh * 2B      =  8 sbh bytes
  //     (n norms per block: 4n sbh; one in a shared-norm parallel block, four in Gemma 2)
  //   2 dropout+residual-add (read x, residual; write
  //     y and a 1-byte mask)                            2 * (3 * 2B + 1B) sbh = 14 sbh bytes
  //     (ASSUMPTION: the mask byte counted whatever model.hidden_dropout, 0 included)
  //   activation: GeLU/ReLU read + write sbf            2 * 2B * sbf          =  4 sbf bytes
  //               SwiGLU read gate, up; write product   3 * 2B * sbf          =  6 sbf bytes
  //   rotary (read + write Q and K)                     2 * 2B * sb(q + kvw)
  //     (also with partial rotary: HF rotates a slice and concatenates, rewriting Q and K)
  //   without flash attention, on b*a*s^2 scores:
  //     softmax (read scores, write probabilities)      2 * 2B                =  4 as^2b bytes
  //     attention dropout (read, write, 1-byte mask)    2 * 2B + 1B           =  5 as^2b bytes
  // With flash attention the softmax and dropout live inside the attention kernel (its traffic
  // is Q, K, V and O, not modelled here). Activation, rotary and softmax work are split by TP
  // (heads / ffn columns); norms and dropout+residual run on the full sequence on every TP
  // rank unless sequence parallelism splits them by tp.
  //
  // `eager_ops`: torchtitan's model code run op by op in eager PyTorch, without torch.compile
  // (torchtitan/models/norms.py RMSNorm, models/llama/model.py apply_rotary_emb, repeat_kv,
  // Attention and FeedForward at commit 9dec370), one kernel per op, each reading its inputs
  // and writing its output in its own dtype:
  //   RMSNorm: x.float() 2+4, pow(2) 4+4, mean 4, x * rsqrt 4+4, type_as 4+2, * weight 2+2
  //                                                  = 36 B per element (fused: 4)
  //   rotary: float() 2+4, complex multiply 4+4, type_as 4+2 = 20 B per element of Q and K (4)
  //   SwiGLU: silu 2+2, multiply 2+2+2                = 10 B per FFN element (6)
  //   repeat_kv (GQA): K and V expanded to the query heads and copied, read 2 B per key
  //   element and write 2 B per query element each     = 4 (kvw + q) B per token
  //   the attention output's transpose(1, 2).contiguous() = 4q B per token
  // (F.layer_norm and F.gelu are single kernels eager or not.)
  //
  // nanotron's Llama layer (models/llama.py at huggingface/nanotron 2411b022): TritonRMSNorm and
  // flash-attn's in-place rotary are fused kernels as counted above, but GLUActivation runs
  // act(gate) * up eagerly (10 B per FFN element, as torchtitan's), the layer has no dropout (the
  // residual adds read two and write one, 6 B per element), and CausalSelfAttention copies
  // Q, K and V: the fused QKV output permuted (MHA) or each of Q, K, V transposed (GQA) into a
  // contiguous tensor (read + write, 4 (q + 2 kvw) B per token), then K and V concatenated and
  // permuted again for the rotary (two more copies, 16 kvw B per token).
  const double sbh = b * s * hd;
  const double sbf = b * s * static_cast<double>(f);
  const double a = static_cast<double>(m.num_attention_heads);
  const bool eager_ops = ops == ElementwiseOps::Eager;
  const bool nanotron = ops == ElementwiseOps::Nanotron;
  const double norms = static_cast<double>(m.layer_norms);
  const double norm_bytes = eager_ops && m.norm == NormKind::RmsNorm ? 36.0 : 4.0;
  const double replicated = norm_bytes * norms * sbh + (nanotron ? 12.0 : 14.0) * sbh;
  const double activation = gated(m) ? (eager_ops || nanotron ? 10.0 : 6.0) : 4.0;
  double split = activation * sbf;
  // Not split by TP: the MoE block's token permutation and un-permutation (each reads and
  // writes top_k copies of every token: 2 x 2 x 2B x sbh x top_k) and the router's fp32 softmax
  // and top-k over the expert scores (read and write, 8 bytes per score). Megatron's experts
  // see every token of the TP group (its dispatchers all-gather them with sequence parallelism),
  // unless expert TP 1 spreads the EP groups across TP: then each rank routes its own tokens.
  double routed = 0;
  if (moe) {
    const double k = static_cast<double>(m.moe.top_k);
    split = activation * b * s *
            (k * static_cast<double>(m.moe.expert_ffn_hidden_size) +
             static_cast<double>(m.moe.shared_ffn_hidden_size));
    routed = (8.0 * k * sbh + 8.0 * b * s * static_cast<double>(m.moe.num_experts)) /
             static_cast<double>(tp / expert_tp);
  }
  // Rotary on Q and K; MLA rotates only the qk_rope_head_dim slice of each query head and the
  // one shared rotary key.
  if (m.position == PositionKind::Rotary)
    split += (eager_ops ? 20.0 : 4.0) * b * s *
             (m.is_mla() ? static_cast<double>((m.num_attention_heads + 1) * m.mla.qk_rope_head_dim)
                         : static_cast<double>(q + kvw));
  if (eager_ops && !m.is_mla()) {
    split += 4.0 * b * s * static_cast<double>(q);
    if (kvw < q) split += 4.0 * b * s * static_cast<double>(kvw + q);
  }
  if (nanotron && !m.is_mla()) {
    split += 4.0 * b * s * static_cast<double>(q + 2 * kvw) + 16.0 * b * s * static_cast<double>(kvw);
  }
  if (!flash_attention) split += 9.0 * a * s * s * b;
  w.elementwise_bytes = ((sequence_parallel ? replicated / t : replicated) + split / t + routed) / c;
  return w;
}

double logits_forward_flops(const ModelSpec& m, std::int64_t micro_batch) {
  return 2.0 * static_cast<double>(micro_batch) * static_cast<double>(m.seq_length) *
         static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);
}

double mean_keys_per_query(const ModelSpec& m, bool causal_band) {
  const double s = static_cast<double>(m.seq_length);
  auto keys = [&](double k) { return causal_band ? k - k * k / (2 * s) : k; };
  double local = 0;          // keys per query in the layers with a window or chunks
  std::int64_t limited = 0;  // those layers; 0: every layer
  if (m.sliding_window > 0) {
    local = keys(static_cast<double>(std::min(m.seq_length, m.sliding_window)));
    limited = m.sliding_window_layers;
  } else if (m.attention_chunk_size > 0) {
    // n whole chunks of c and a last one of r: causal within each, n c^2 / 2 + r^2 / 2 pairs,
    // twice that counted without the band.
    const std::int64_t c = m.attention_chunk_size;
    const double whole = static_cast<double>(m.seq_length / c);
    const double rest = static_cast<double>(m.seq_length % c);
    const double squares = whole * static_cast<double>(c) * static_cast<double>(c) + rest * rest;
    local = (causal_band ? squares / 2 : squares) / s;
    limited = m.chunked_attention_layers;
  } else {
    return keys(s);
  }
  if (limited == 0 || limited == m.num_layers) return local;
  const double layers = static_cast<double>(m.num_layers);
  const double share = static_cast<double>(limited);
  return (share * local + (layers - share) * keys(s)) / layers;
}

double model_flops_per_token(const ModelSpec& m) {
  const double tokens = static_cast<double>(m.seq_length);  // one sequence, tp = 1
  // Megatron's count of the attention core: each query against its k = min(s, window) keys,
  // the causal mask not discounted.
  const double core = attention_core_flops(m, 1, tokens, mean_keys_per_query(m, false));
  double layer = core;
  for (const Gemm& g : layer_forward_work(m, 1, 1, false, true).gemms) layer += g.flops();
  const std::int64_t moe_layers = m.moe_layer_count();
  double forward = static_cast<double>(m.num_layers - moe_layers) * layer + logits_forward_flops(m, 1);
  if (moe_layers > 0) {
    // The MoE layer's attention as in any layer, and its feed-forward per token from the linears
    // themselves (an expert's weights weighted by top_k / num_experts), so that no rounding of
    // an expert's share of the tokens enters the MFU numerator.
    const LayerWork w = layer_forward_work(m, 1, 1, false, true, true);
    double moe_layer = core;
    for (std::size_t i = 0; i < w.attention_gemms; ++i) moe_layer += w.gemms[i].flops();
    double per_token = 0;
    for (const Linear& l : mlp_block(m, true).linears) {
      const double share = l.routed ? static_cast<double>(m.moe.top_k) : static_cast<double>(l.copies);
      per_token += 2.0 * static_cast<double>(l.in) * static_cast<double>(l.out) * share;
    }
    moe_layer += per_token * tokens;
    forward += static_cast<double>(moe_layers) * moe_layer;
    if (m.is_moe_layer(m.num_layers)) layer = moe_layer;  // the MTP layers' kind
  }
  // Each MTP module: its layer, eh_proj [2h -> h] and the head's logits again (Megatron-core's
  // num_floating_point_operations counts the same three).
  const double hidden = static_cast<double>(m.hidden_size);
  forward += static_cast<double>(m.mtp_num_layers) *
             (layer + 2.0 * tokens * 2.0 * hidden * hidden + logits_forward_flops(m, 1));
  return 3.0 * forward / tokens;
}

std::vector<CheckpointedMatmul> op_checkpoint_matmuls(const ModelSpec& m, std::int64_t tokens,
                                                      std::int64_t tp) {
  const std::int64_t h = m.hidden_size, f = m.ffn_hidden_size;
  const std::int64_t q = m.q_width(), kv = kv_width(m);
  std::vector<CheckpointedMatmul> out;
  auto column = [&](const char* name, std::int64_t in, std::int64_t width, bool attention) {
    out.push_back({{name, tokens, width / tp, in, 1}, attention, false});
  };
  auto row = [&](const char* name, std::int64_t in, std::int64_t width, bool attention) {
    out.push_back({{name, tokens, width, in / tp, 1}, attention, false});
  };
  column("wq", h, q, true);
  column("wk", h, kv, true);
  column("wv", h, kv, true);
  row("wo", m.v_width(), h, true);
  column("w1", h, f, false);
  if (gated(m)) column("w3", h, f, false);
  row("w2", f, h, false);
  for (std::size_t i = 0; i < out.size(); ++i) out[i].saved = i % 2 == 0;
  return out;
}

// Activation memory of one layer, bytes per GPU, after Korthikanti et al. 2022 (arXiv:2205.05198)
// Sec. 4: 16-bit activations (2 bytes per element), 1-byte dropout masks, norm statistics ignored.
// With sbh = s*b*h, sbf = s*b*ffn, sbk = s*b*kv_heads*head_dim (the K and V width),
// sbq = s*b*heads*head_dim (the Q width, = sbh unless head_dim is decoupled), a = heads:
//
// Stored for backward, without any parallelism:
//   norms: inputs of the two pre-norms                                     4 sbh
//          (n norms per block: 2n sbh)
//   attention: QKV GEMM input 2sbh; Q 2sbq; K 2sbk; V 2sbk (QK^T and AV need them);
//              output-projection input 2sbq; post-attention dropout mask sbh
//                                                                          3 sbh + 4 sbq + 4 sbk
//              core attention: softmax output 2as^2b, its dropout mask as^2b, dropout output
//              2as^2b (the input of AV)                                    5 as^2b
//   MLP: first-linear input 2sbh and dropout mask sbh                      3 sbh, plus
//        GeLU: activation input 2sbf and down-projection input 2sbf        4 sbf
//        ReLU: its output is both what ReLU's backward needs and the down input  2 sbf
//        SwiGLU: gate output (silu input) 2sbf, up output 2sbf, product (down input) 2sbf
//                (silu(gate) is recomputed from the gate in backward, as Megatron's fused
//                swiglu does)                                              6 sbf
// For ffn = 4h, GeLU, kv = heads, q = h, two norms: 4 + 11 + 19 = 34 sbh + 5as^2b (eq. 1).
// A parallel block (Falcon, GPT-NeoX, Phi-2) is counted as a sequential one: its attention and
// MLP read the same normed input, which this counts twice (model_json.cpp warns).
//
// TP (eq. 2): the norm inputs, the QKV and first-linear inputs and the two dropout masks
// (10 sbh) are full-size on every rank; everything after a column-parallel split (Q, K, V, the
// out-projection input, core attention, the MLP intermediates) is divided by t.
// TP + sequence parallelism (eq. 4): the 10 sbh part is also split along the sequence, so all
// is divided by t. Selective recompute (eq. 6 with SP) and flash attention drop the 5as^2b core
// attention term (flash keeps only a per-row log-sum-exp, b*a*s fp32 values, neglected here as
// in the paper). Full recompute keeps only the layer input, 2sbh (divided by t with SP).
std::vector<double> activation_tensors_per_layer(const ModelSpec& m, std::int64_t micro_batch,
                                                 std::int64_t tp, bool sequence_parallel,
                                                 Recompute recompute, bool flash_attention,
                                                 bool moe_layer, std::int64_t cp,
                                                 std::int64_t expert_tp,
                                                 RecomputeModules modules,
                                                 bool fp8_linear_inputs, LayerSaves saves) {
  check_parallel(m, micro_batch, tp);
  const double in = fp8_linear_inputs ? 1.0 : 2.0;  // bytes per element of a linear's saved input
  // Without selective recomputation no module is replayed; Megatron's selective default is the
  // attention core alone.
  if (recompute != Recompute::Selective) modules = {};
  if (recompute == Recompute::None) modules.core_attn = false;
  if (expert_tp == 0) expert_tp = tp;
  const double c = static_cast<double>(cp);  // context parallelism: s / cp tokens per rank
  const double s = static_cast<double>(m.seq_length);
  const double b = static_cast<double>(micro_batch);
  const double t = static_cast<double>(tp);
  const double sbh = s * b * static_cast<double>(m.hidden_size);
  std::vector<double> out;
  // Full-size on every TP rank unless sequence parallel; split by TP after a column-parallel
  // split; not split by TP at all (an MoE block's routed tokens).
  auto replicated = [&](double bytes) { out.push_back(bytes / (sequence_parallel ? t : 1.0) / c); };
  auto split = [&](double bytes) { out.push_back(bytes / t / c); };
  auto whole = [&](double bytes) { out.push_back(bytes / c); };

  if (recompute == Recompute::SelectiveOp) {
    // The checkpoint keeps the block's input (split by tp under sequence parallelism) and what
    // the policy saves: the saved matmuls' outputs (rows x columns on this rank, 2 bytes), the
    // attention kernel's output (2 bytes per query element) and fp32 log-sum-exp (4 bytes per
    // head and token), and under TP the two reduce-scatters' outputs (2 bytes per element of
    // the rank's 1 / tp of the sequence).
    const std::int64_t tokens = micro_batch * m.seq_length / cp;
    replicated(2.0 * sbh);
    for (const CheckpointedMatmul& mm : op_checkpoint_matmuls(m, tokens, tp)) {
      if (mm.saved) out.push_back(2.0 * static_cast<double>(mm.gemm.m) * static_cast<double>(mm.gemm.n));
    }
    const double tok = static_cast<double>(tokens);
    out.push_back(2.0 * tok * static_cast<double>(m.q_width()) / t);
    out.push_back(4.0 * tok * static_cast<double>(m.num_attention_heads) / t);
    if (tp > 1) {
      split(2.0 * sbh);
      split(2.0 * sbh);
    }
    return out;
  }
  if (recompute == Recompute::Full) {
    replicated(2.0 * sbh);
    return out;
  }

  // The norm inputs (2 each), the QKV and first-linear inputs (`in` each: the norms' outputs,
  // which the layernorm module recomputes), two dropout masks (1) where the layer has them.
  const bool moe = moe_layer && m.is_moe();
  for (int n = 0; n < m.layer_norms; ++n) replicated(2.0 * sbh);
  if (!modules.layernorm) {
    replicated(in * sbh);
    replicated(in * sbh);
  }
  if (saves.dropout_masks && m.hidden_dropout > 0) {
    replicated(sbh);
    replicated(sbh);
  }
  // The MLP's intermediates, 2 bytes per element of its width each: GeLU 2 of them, ReLU 1,
  // gated 3 (above; a gated activation's input, 1 byte under saves.activation_input_fp8). An MoE
  // layer, by the same rules: each token's top_k expert intermediates and the shared experts';
  // not split by TP (Megatron's experts see every token of the TP group): the permuted tokens
  // (the experts' GEMM input, top_k copies of each token, `in` bytes), the scores applied to
  // them (fp32, one per copy), a scored copy where the framework's multiply keeps one
  // (saves.moe_scored_copy_bytes), and the router's fp32 probabilities (4 bytes per token and
  // expert) that the softmax's backward reads; split by tp / expert_tp when the EP groups span
  // TP (each rank routes its own tokens).
  // The last of them is the activation function's output (the second linear's input, `in`
  // bytes): the moe_act module recomputes the routed experts' (the shared experts' stays); the
  // mlp module replays a dense MLP from its input, keeping none of them.
  const int intermediates = m.mlp == MlpKind::Relu ? 1 : gated(m) ? 3 : 2;
  double width = s * b * static_cast<double>(m.ffn_hidden_size);
  if (moe) {
    const double k = static_cast<double>(m.moe.top_k);
    width = s * b *
            (k * static_cast<double>(m.moe.expert_ffn_hidden_size) +
             static_cast<double>(m.moe.shared_ffn_hidden_size));
  }
  if (!(modules.mlp && !moe)) {
    const double act_in = saves.activation_input_fp8 ? 1.0 : 2.0;
    for (int i = 0; i < intermediates - 1; ++i) split(act_in * width);
    if (saves.eager_gated_activation && gated(m)) split(2.0 * width);  // act(gate), for the multiply
    if (moe && modules.moe_act) {
      if (m.moe.shared_ffn_hidden_size > 0)
        split(in * s * b * static_cast<double>(m.moe.shared_ffn_hidden_size));
    } else {
      split(in * width);
    }
  }
  if (moe) {
    const double k = static_cast<double>(m.moe.top_k);
    const double own = static_cast<double>(tp / expert_tp);
    whole(in * k * sbh / own);
    if (saves.moe_scored_copy_bytes > 0) whole(saves.moe_scored_copy_bytes * k * sbh / own);
    whole(4.0 * k * s * b / own);
    whole(4.0 * s * b * static_cast<double>(m.moe.num_experts) / own);
  }
  if (m.is_mla()) {
    // MLA by the same rules: Q and K at the query/key width, V and the out-projection input at
    // the value width (2 bytes each; the input `in`), and the latents, produced by the
    // replicated down-projections, with their norm's input and output (2 bytes per latent
    // element each; the output, the up-projections' input, `in`). The mla_up_proj module
    // recomputes Q, K and V from the latents.
    const double sqk = s * b * static_cast<double>(m.qk_width());
    const double sv = s * b * static_cast<double>(m.v_width());
    if (!modules.mla_up_proj) {
      split(2.0 * sqk);
      split(2.0 * sqk);
      split(2.0 * sv);
    }
    split(in * sv);
    const double latents = s * b * static_cast<double>(m.mla.q_lora_rank + m.mla.kv_lora_rank);
    replicated(2.0 * latents);
    replicated(in * latents);
  } else {
    // Q, K, V, out-projection input (`in`).
    const double sbq = s * b * static_cast<double>(m.q_width());
    const double sbk = s * b * static_cast<double>(kv_width(m));
    if (saves.mha_qkv_held_whole && kv_width(m) == m.q_width()) {
      split(2.0 * (sbq + 2.0 * sbk));  // the fused QKV tensor, kept by the query's view
      split(2.0 * 2.0 * sbk);          // the rotated K and V
    } else {
      split(2.0 * sbq);
      split(2.0 * sbk);
      split(2.0 * sbk);
    }
    split(in * sbq);
  }
  if (!modules.core_attn && !flash_attention) {
    // The scores: softmax output 2as^2b, its dropout mask as^2b, dropout output 2as^2b; without
    // attention dropout the softmax output alone (AV reads it).
    const double as2b = static_cast<double>(m.num_attention_heads) * s * s * b;
    split(2.0 * as2b);
    if (m.attention_dropout > 0) {
      split(as2b);
      split(2.0 * as2b);
    }
  }
  return out;
}

double activation_bytes_per_layer(const ModelSpec& m, std::int64_t micro_batch, std::int64_t tp,
                                  bool sequence_parallel, Recompute recompute, bool flash_attention,
                                  bool moe_layer, std::int64_t cp, std::int64_t expert_tp,
                                  RecomputeModules modules, bool fp8_linear_inputs,
                                  LayerSaves saves) {
  double sum = 0;
  for (double bytes : activation_tensors_per_layer(m, micro_batch, tp, sequence_parallel, recompute,
                                                   flash_attention, moe_layer, cp, expert_tp,
                                                   modules, fp8_linear_inputs, saves)) {
    sum += bytes;
  }
  return sum;
}

}  // namespace zerosim
