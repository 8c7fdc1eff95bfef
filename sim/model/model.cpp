// Parameter counts, per-layer GEMM work and activation memory of a transformer (see model.h).
#include <algorithm>
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
    case Recompute::Full: return "full";
  }
  return "?";
}

std::string to_string(NormKind k) {
  switch (k) {
    case NormKind::LayerNorm: return "layernorm";
    case NormKind::RmsNorm: return "rmsnorm";
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

// Keys one query attends to: the whole sequence, or the sliding window when it is shorter.
std::int64_t attended_keys(const ModelSpec& m) {
  return m.sliding_window > 0 ? std::min(m.seq_length, m.sliding_window) : m.seq_length;
}

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
}

}  // namespace

ParamCounts count_params(const ModelSpec& m) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t q = m.q_width();
  const std::int64_t kvw = kv_width(m);
  const std::int64_t f = m.ffn_hidden_size;

  // Attention: fused QKV [h -> q + 2*kvw] and output projection [q -> h] (q = h unless the
  // head width is decoupled, as in Gemma).
  std::int64_t attention = h * (q + 2 * kvw) + q * h;
  // MLP: gated (SwiGLU, GeGLU) has gate and up [h -> f] and down [f -> h]; otherwise up and down.
  std::int64_t mlp = (gated(m) ? 3 : 2) * h * f;
  if (m.qkv_bias) attention += q + 2 * kvw;
  if (m.attention_output_bias) attention += h;
  if (m.mlp_bias) mlp += (gated(m) ? 2 * f : f) + h;
  ParamCounts c;
  // The block's norms, the first half with attention: one norm of a parallel block feeds both
  // and is fetched with the attention; Gemma 2's four split two and two.
  c.attention_norm = (m.layer_norms + 1) / 2 * norm_params(m);
  c.mlp_norm = m.layer_norms / 2 * norm_params(m);
  c.per_layer = attention + mlp + c.attention_norm + c.mlp_norm;
  c.attention_block = attention + c.attention_norm;
  c.mlp_block = mlp + c.mlp_norm;

  const std::int64_t token_table = m.vocab_size * h;
  const std::int64_t position_table =
      m.position == PositionKind::Learned ? m.max_position_embeddings * h : 0;
  // BLOOM's word_embeddings_layernorm is counted with the embedding it follows.
  c.embedding = token_table + position_table + (m.embedding_norm ? norm_params(m) : 0);
  // Output head: no bias in GPT/Llama/BLOOM; Phi-2's lm_head has one (kept when tied).
  c.output = (m.tied_embeddings ? 0 : token_table) + (m.output_bias ? m.vocab_size : 0);
  c.final_norm = norm_params(m);
  c.total = c.per_layer * m.num_layers + c.embedding + c.output + c.final_norm;

  // Largest module at Hugging Face granularity (what DeepSpeed's estimator walks): the token
  // embedding, the position table, and each of q/k/v/o and each MLP matrix with its bias.
  const std::int64_t bqkv = m.qkv_bias ? 1 : 0, bo = m.attention_output_bias ? 1 : 0;
  const std::int64_t bm = m.mlp_bias ? 1 : 0;
  c.largest_module = std::max({token_table, position_table, h * q + bqkv * q, q * h + bo * h,
                               h * kvw + bqkv * kvw, h * f + bm * f, f * h + bm * h});
  return c;
}

double LayerWork::flops() const {
  double total = attention_flops;
  for (const auto& g : gemms) total += g.flops();
  return total;
}

LayerWork layer_forward_work(const ModelSpec& m, std::int64_t micro_batch, std::int64_t tp,
                             bool sequence_parallel, bool flash_attention) {
  check_parallel(m, micro_batch, tp);
  const std::int64_t h = m.hidden_size;
  const std::int64_t q = m.q_width();
  const std::int64_t kvw = kv_width(m);
  const std::int64_t f = m.ffn_hidden_size;
  const std::int64_t tokens = micro_batch * m.seq_length;  // GEMM m dimension

  LayerWork w;
  // Megatron TP: QKV and MLP up (+gate, fused) are column-parallel (n split), the attention
  // output projection and MLP down are row-parallel (k split). With sequence parallelism the
  // inputs are all-gathered first, so the GEMM shapes are the same.
  w.gemms.push_back({"qkv", tokens, (q + 2 * kvw) / tp, h, 1});
  w.gemms.push_back({"attn_out", tokens, h, q / tp, 1});
  w.gemms.push_back({gated(m) ? "mlp_gate_up" : "mlp_up", tokens, (gated(m) ? 2 * f : f) / tp, h, 1});
  w.gemms.push_back({"mlp_down", tokens, h, f / tp, 1});

  // QK^T ([s x d] x [d x s]) and AV ([s x s] x [s x d]) per head and sample: 2 * 2*s*s*d each,
  // so 4*b*s^2*q over all heads (q = heads x d), split across TP ranks by heads. The causal
  // mask is NOT discounted (kernels without block skipping compute the full square; Megatron's
  // formula counts it too). A sliding window of k < s keys is: flash attention skips the blocks
  // outside the band, so each query costs k keys (4*b*s*k*q, the same convention: full square
  // when k = s); without flash attention the scores are computed in full and masked.
  const double b = static_cast<double>(micro_batch);
  const double s = static_cast<double>(m.seq_length);
  const double hd = static_cast<double>(h);
  const double qd = static_cast<double>(q);
  const double t = static_cast<double>(tp);
  const double keys = flash_attention ? static_cast<double>(attended_keys(m)) : s;
  w.attention_flops = 4.0 * b * s * keys * qd / t;

  // HBM traffic of the non-GEMM kernels, forward, 16-bit elements (2 bytes) and 1-byte dropout
  // masks; each kernel reads its inputs once and writes its outputs once (fused where Megatron
  // fuses: bias+GeLU, bias+dropout+residual-add, scale+mask+softmax). Bias adds ride on those
  // fusions and are not counted separately. With sbh = b*s*h elements:
  //   2 norms (read x, write y)                         2 * 2 sbh * 2B      =  8 sbh bytes
  //     (n norms per block: 4n sbh; one in a shared-norm parallel block, four in Gemma 2)
  //   2 dropout+residual-add (read x, residual; write
  //     y and a 1-byte mask)                            2 * (3 * 2B + 1B) sbh = 14 sbh bytes
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
  const double sbh = b * s * hd;
  const double sbf = b * s * static_cast<double>(f);
  const double a = static_cast<double>(m.num_attention_heads);
  const double norms = static_cast<double>(m.layer_norms);
  const double replicated = 4.0 * norms * sbh + 14.0 * sbh;
  double split = (gated(m) ? 6.0 : 4.0) * sbf;
  if (m.position == PositionKind::Rotary) split += 4.0 * b * s * static_cast<double>(q + kvw);
  if (!flash_attention) split += 9.0 * a * s * s * b;
  w.elementwise_bytes = (sequence_parallel ? replicated / t : replicated) + split / t;
  return w;
}

double logits_forward_flops(const ModelSpec& m, std::int64_t micro_batch) {
  return 2.0 * static_cast<double>(micro_batch) * static_cast<double>(m.seq_length) *
         static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);
}

double model_flops_per_token(const ModelSpec& m) {
  const double tokens = static_cast<double>(m.seq_length);  // one sequence, tp = 1
  const double layer = layer_forward_work(m, 1, 1, false, true).flops();
  const double forward = static_cast<double>(m.num_layers) * layer + logits_forward_flops(m, 1);
  return 3.0 * forward / tokens;
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
double activation_bytes_per_layer(const ModelSpec& m, std::int64_t micro_batch, std::int64_t tp,
                                  bool sequence_parallel, Recompute recompute, bool flash_attention) {
  check_parallel(m, micro_batch, tp);
  const double s = static_cast<double>(m.seq_length);
  const double b = static_cast<double>(micro_batch);
  const double t = static_cast<double>(tp);
  const double sbh = s * b * static_cast<double>(m.hidden_size);
  const double sbf = s * b * static_cast<double>(m.ffn_hidden_size);
  const double sbk = s * b * static_cast<double>(kv_width(m));
  const double sbq = s * b * static_cast<double>(m.q_width());
  const double a = static_cast<double>(m.num_attention_heads);

  if (recompute == Recompute::Full) return sequence_parallel ? 2.0 * sbh / t : 2.0 * sbh;

  // Full-size on every TP rank unless sequence parallel: norm inputs 2 per norm (4 for two),
  // QKV input 2, first-linear input 2, two dropout masks 1 + 1.
  const double replicated = (2.0 * static_cast<double>(m.layer_norms) + 6.0) * sbh;
  double mlp_intermediate = 4.0 * sbf;
  if (m.mlp == MlpKind::Relu) mlp_intermediate = 2.0 * sbf;
  if (gated(m)) mlp_intermediate = 6.0 * sbf;
  // Q, K, V, out-projection input, MLP intermediates.
  double split = 2.0 * sbq + 4.0 * sbk + 2.0 * sbq + mlp_intermediate;
  if (recompute == Recompute::None && !flash_attention) split += 5.0 * a * s * s * b;
  return (sequence_parallel ? replicated / t : replicated) + split / t;
}

}  // namespace zerosim
