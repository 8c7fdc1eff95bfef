#pragma once
// Transformer description and the per-layer quantities every other folder derives from it:
// parameter counts, GEMM shapes, FLOPs and activation sizes.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"

namespace zerosim {

// Gelu, Relu: two matrices (up, down). Swiglu, Geglu: gated, three (gate, up, down), the gate
// through SiLU or GeLU; the two gated kinds cost the same and differ only in name.
enum class MlpKind { Gelu, Swiglu, Relu, Geglu };
// LayerNormNoBias: a LayerNorm with a gain only (PyTorch's nn.LayerNorm(bias=False), DBRX's).
enum class NormKind { LayerNorm, RmsNorm, LayerNormNoBias };
enum class PositionKind { Learned, Rotary, Alibi };
// Selective: Megatron's (the attention core recomputed). SelectiveOp: torchtitan's op-level
// selective checkpointing (op_checkpoint_matmuls below). Full: every layer's forward replayed.
enum class Recompute { None, Selective, SelectiveOp, Full };

// Megatron-core's selective recomputation by module (--recompute-modules with
// --recompute-granularity selective; transformer_config.py): the parts of a layer replayed in
// backward instead of kept. core_attn: the attention core (Megatron's default, zerosim's
// Recompute::Selective); layernorm: the two norms' outputs; moe_act: the routed experts'
// activation function; mla_up_proj: MLA's up-projections (queries, keys and values); mlp: a
// dense layer's whole MLP (Megatron skips MoE layers for it).
struct RecomputeModules {
  bool core_attn = true, layernorm = false, moe_act = false, mla_up_proj = false, mlp = false;
  bool operator==(const RecomputeModules&) const = default;
};

// What a framework's layer code keeps for backward where it differs from the fused Megatron-core
// layer that activation_tensors_per_layer counts by default (Korthikanti et al. 2022).
struct LayerSaves {
  // Megatron's bias-dropout-add keeps a 1-byte mask per element after the attention and after
  // the MLP when the model's hidden_dropout is above 0; a layer without dropout modules keeps
  // none.
  bool dropout_masks = true;
  // A gated activation written as act(gate) * up in eager PyTorch: the multiply saves act's
  // output beside the gate and up halves, 2 bytes per ffn element more than a fused kernel.
  bool eager_gated_activation = false;
  // Multi-head attention whose query stays a view of the fused, permuted QKV tensor (keeping all
  // of it alive) while the keys and values are rotated in a new concatenated tensor: K and V are
  // held twice. Not with GQA, whose query, keys and values are copies of their own.
  bool mha_qkv_held_whole = false;
  // An MoE layer's routed tokens (top_k copies of each) as the multiply by the router's scores
  // keeps them for the scores' gradient, bytes per element; 0 where the scores are applied inside
  // the experts' fused activation, which keeps only its input and the scores (Megatron-core since
  // core_v0.13.0, 2659630721, 2025-04: weighted_bias_swiglu, the combine's unpermute a
  // scatter-add that keeps no tensor). Either way the scores, fp32, one per copy, are kept.
  int moe_scored_copy_bytes = 0;
  // Megatron-core --activation-func-fp8-input-store: the fused SwiGLU keeps its input (the first
  // linear's output) in FP8, one byte per element instead of two (fused_bias_swiglu.py; dense
  // MLPs, routed and shared experts alike).
  bool activation_input_fp8 = false;
};

std::string to_string(MlpKind k);       // "gelu", "swiglu", "relu", "geglu"
std::string to_string(Recompute r);
std::string to_string(NormKind k);      // "layernorm", "rmsnorm"
std::string to_string(PositionKind k);  // "learned", "rotary", "alibi"

// A Mixture-of-Experts feed-forward block (Shazeer et al. 2017, arXiv:1701.06538; Fedus et al.
// 2021, Switch Transformers, arXiv:2101.03961; Jiang et al. 2024, Mixtral, arXiv:2401.04088): a
// router [h -> num_experts] scores each token, its top_k experts process it and their outputs
// are summed with the router's weights. Each expert is an MLP of the model's kind (mlp) and of
// width expert_ffn_hidden_size; shared experts (DeepSeekMoE, arXiv:2401.06066; Qwen-MoE) process
// every token.
struct MoeSpec {
  std::int64_t num_experts = 0;             // routed experts of an MoE layer; 0: a dense model
  std::int64_t top_k = 0;                   // routed experts per token
  std::int64_t expert_ffn_hidden_size = 0;  // one routed expert's intermediate width
  // The always-active shared experts as one MLP of their summed width (DeepSeek: n_shared x the
  // expert width; Qwen2-MoE: shared_expert_intermediate_size); 0: none.
  std::int64_t shared_ffn_hidden_size = 0;
  bool shared_expert_gate = false;  // Qwen2-MoE: a [h -> 1] sigmoid gate scales the shared expert
  bool router_bias = false;         // gpt-oss: the router linear has a bias
  // Layer i (from 0) is an MoE layer when i >= first_k_dense and (i - first_k_dense) % layer_freq
  // == 0: after first_k_dense dense layers, every layer_freq-th one, starting with the first
  // (DeepSeek's first_k_dense_replace, Qwen's decoder_sparse_step, Megatron's moe_layer_freq);
  // the others have the dense MLP of ffn_hidden_size. The case format's keys: first_k_dense,
  // moe_layer_freq.
  std::int64_t first_k_dense = 0;
  std::int64_t layer_freq = 1;
  // Group-limited routing (DeepSeek-V2's device-limited, DeepSeek-V3's node-limited; Megatron-
  // core's moe_router_num_groups / moe_router_group_topk, transformers' n_group / topk_group):
  // the experts form router_num_groups equal groups of consecutive experts, and each token picks
  // its top_k among the router_group_topk groups it scores highest. 0: no limit. It changes no
  // parameter and no FLOP, only where tokens go (the flex dispatcher's traffic).
  std::int64_t router_num_groups = 0;
  std::int64_t router_group_topk = 0;
  bool operator==(const MoeSpec&) const = default;
};

// Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, Sec. 2.1): keys and values are
// projected down to a latent of kv_lora_rank (plus a shared rotary key of qk_rope_head_dim) and
// back up per head; queries likewise through q_lora_rank (directly when 0). Each head's query and
// key are qk_nope_head_dim + qk_rope_head_dim wide, its value v_head_dim.
struct MlaSpec {
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;  // 0: not MLA
  std::int64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool operator==(const MlaSpec&) const = default;
};

struct ModelSpec {
  std::string name;               // preset name, HF path, or "inline"
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_kv_heads = 0;  // == num_attention_heads without GQA
  std::int64_t ffn_hidden_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t seq_length = 0;    // training sequence length
  std::int64_t max_position_embeddings = 0;
  MlpKind mlp = MlpKind::Gelu;
  NormKind norm = NormKind::LayerNorm;
  PositionKind position = PositionKind::Learned;
  bool tied_embeddings = true;
  // Biases of the linears, by where they sit: GPT-3/BLOOM have all three, Llama none, Qwen2 only
  // q/k/v, GPT-NeoX and Llama's attention_bias q/k/v and the attention output.
  bool qkv_bias = true;
  bool attention_output_bias = true;
  bool mlp_bias = true;
  bool output_bias = false;       // a bias on the output (logit) layer: Phi-2's lm_head
  std::string source;             // citation for presets
  bool embedding_norm = false;    // BLOOM: LayerNorm right after the word embedding
  // Width of one attention head; 0 means hidden_size / num_attention_heads. Gemma decouples them
  // (Gemma 7B: 16 heads of 256 on a hidden size of 3072).
  std::int64_t attention_head_dim = 0;
  // Norms per transformer block: 2 (before attention, before the MLP); 1 where a parallel block
  // feeds attention and MLP from one norm (Falcon-7B, Phi-2); 4 with Gemma 2's post-norms.
  std::int64_t layer_norms = 2;
  // Keys each query attends to at most (Mistral's sliding window); 0 = all.
  std::int64_t sliding_window = 0;
  // How many layers attend within that window, the others attending to the whole sequence
  // (gpt-oss and Gemma 2: every other layer); 0 = every layer. zerosim costs every layer alike,
  // so each layer's attention core is costed at the layers' average (mean_keys_per_query): the
  // step's attention work is exact, a pipeline stage's share of windowed layers is the model's.
  std::int64_t sliding_window_layers = 0;
  // Chunked attention (Llama 4): the sequence is cut into chunks of attention_chunk_size tokens
  // and each query attends causally within its own chunk; 0 = none. chunked_attention_layers
  // counts the layers that do (Llama 4: three of every four, the layers with rotary positions;
  // the others attend to the whole sequence), 0 = every layer; costed at the layers' average, as
  // the sliding window is. A model has either a window or chunks.
  std::int64_t attention_chunk_size = 0;
  std::int64_t chunked_attention_layers = 0;
  // RMSNorms over each head's query and key (Qwen3, Gemma 3): 2 x head_dim parameters per layer;
  // with qk_norm_projection, over the whole query and key projections (OLMo 2): q_width +
  // kv_width parameters.
  bool qk_norm = false;
  bool qk_norm_projection = false;
  // A learned logit per head that each softmax row also normalises over (gpt-oss's sinks): one
  // parameter per head and layer.
  bool attention_sinks = false;
  // Dropout probabilities: on the attention's and the MLP's outputs (Megatron's --hidden-dropout,
  // Hugging Face's hidden_dropout / resid_pdrop) and on the attention probabilities
  // (--attention-dropout, attention_dropout / attn_pdrop). At 0 PyTorch's dropout returns its
  // input and keeps no mask (ATen Dropout.cpp, _dropout_impl). Default: Megatron-core's, 0.1 each
  // (transformer_config.py); Megatron-Bridge sets 0 for the Llama, Qwen, DeepSeek and gpt-oss
  // families, as their Hugging Face configs do.
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  MoeSpec moe;
  MlaSpec mla;
  // Multi-token prediction modules (DeepSeek-V3, arXiv:2412.19437, Sec. 2.2; Megatron-core's
  // --mtp-num-layers): each one normalises the hidden states and the next token's embedding
  // (enorm, hnorm), projects their concatenation [2h -> h] (eh_proj), runs one transformer layer
  // of the last decoder layer's kind (Megatron's gpt builder takes the decoder block's last layer
  // spec), a final norm, and the shared output head and loss again. The embedding and the head
  // are the model's own (shared). Layer numbers num_layers .. num_layers + mtp_num_layers - 1.
  std::int64_t mtp_num_layers = 0;

  bool is_moe() const { return moe.num_experts > 0; }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  // An MTP layer (layer >= num_layers) is of the last decoder layer's kind.
  bool is_moe_layer(std::int64_t layer) const {
    if (layer >= num_layers) layer = num_layers - 1;
    return is_moe() && layer >= moe.first_k_dense && (layer - moe.first_k_dense) % moe.layer_freq == 0;
  }
  std::int64_t moe_layer_count() const {
    if (!is_moe() || moe.first_k_dense >= num_layers) return 0;
    return (num_layers - 1 - moe.first_k_dense) / moe.layer_freq + 1;
  }
  bool linear_bias() const { return qkv_bias && attention_output_bias && mlp_bias; }
  std::int64_t head_dim() const {
    return attention_head_dim > 0 ? attention_head_dim : hidden_size / num_attention_heads;
  }
  // Width of Q (and of the attention output projection's input): heads x head_dim.
  std::int64_t q_width() const { return num_attention_heads * head_dim(); }
  // Widths the attention core multiplies: the queries' and keys' (heads x their head width) and
  // the values'; q_width() for both without MLA.
  std::int64_t qk_width() const {
    return is_mla() ? num_attention_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
                    : q_width();
  }
  std::int64_t v_width() const {
    return is_mla() ? num_attention_heads * mla.v_head_dim : q_width();
  }
  bool operator==(const ModelSpec&) const = default;
};

// Checks sizes are positive integers within 64-bit-safe bounds, heads divide hidden (unless
// attention_head_dim is set), kv heads divide heads, and seq_length fits a learned position
// table. Throws InputError naming key_join(key_path, "<field>") and what is allowed.
void validate_model(const ModelSpec& m, const std::string& key_path);

// How Megatron splits a linear layer over the tensor-parallel group: by output columns, by input
// rows (its bias then whole on every rank), or not at all.
enum class TpSplit : std::uint8_t { Column, Row, Replicated };

// One linear module of a block, or `copies` identical ones (the routed experts), as the
// parameter counts, the GEMMs and ZeRO-3's tensors all see it.
// What a GEMM is where a rule needs to know: an MLA up-projection (Megatron-core's mla_up_proj
// replays it), the fused QKV projection, an MLP's first linear, plain or with gate and up fused
// (moe_act replays the activation from its output); QKV and the MLP's first linear are the
// column-parallel linears that open their blocks (Gemm::opens_dense_block).
enum class GemmRole : std::uint8_t { Other, MlaUpProjection, QkvProjection, MlpInput, GatedMlpInput };

struct Linear {
  std::string name;  // the GEMM's name
  std::int64_t in = 0, out = 0;
  TpSplit split = TpSplit::Column;
  bool bias = false;
  int tensors = 1;          // weight tensors it is stored as (gate and up fused: 2)
  std::int64_t copies = 1;  // identical modules: the routed experts
  bool routed = false;      // an expert: processes top_k / num_experts of the tokens
  GemmRole role = GemmRole::Other;
};

// The parameters of one block of a layer: its linears, and the small tensors replicated over TP
// (norms, q/k norms, MLA's latent norms, sinks).
struct Block {
  std::vector<Linear> linears;
  std::int64_t replicated_params = 0;
  int replicated_tensors = 0;
};
// The attention block: its pre-norm(s) (the first half of the block's norms, count_params),
// QKV (or MLA's projections) and output projection.
Block attention_block(const ModelSpec& m);
// The feed-forward block with its norm(s): the dense MLP, or with `moe` the MoE block (router,
// routed experts, shared experts and their gate) of an MoE layer (ModelSpec::is_moe_layer).
Block mlp_block(const ModelSpec& m, bool moe);

// Parameter counts, exact for the architecture described.
struct ParamCounts {
  std::int64_t per_layer = 0;       // one dense transformer block (attention + MLP + norms)
  std::int64_t embedding = 0;       // token (+ learned position) embedding
  std::int64_t output = 0;          // output projection; 0 when tied to the embedding
  std::int64_t final_norm = 0;
  // The MTP modules (ModelSpec::mtp_num_layers): each its transformer layer, eh_proj [2h -> h]
  // and three norms (enorm, hnorm, final); the embedding and head they share are not counted
  // again (DeepSeek-V3's checkpoint stores copies of both: its "14B" MTP module).
  std::int64_t mtp = 0;
  std::int64_t total = 0;           // per_layer * layers + embedding + output + final_norm + mtp
  std::int64_t largest_module = 0;  // largest single weight matrix (DeepSpeed's largest layer)
  // per_layer split into the attention block (its norm, QKV, output projection) and the MLP
  // block (its norm and linears): the units ZeRO-3 fetches and the gradient hooks hand over.
  std::int64_t attention_block = 0, mlp_block = 0;
  std::int64_t attention_norm = 0, mlp_norm = 0;  // replicated under tensor parallelism
  // MoE models: one MoE layer and its feed-forward block, and the parameters one token passes
  // through (total less the routed experts it is not sent to; embedding and head included).
  std::int64_t moe_layer = 0, moe_block = 0;
  std::int64_t active = 0;
};
ParamCounts count_params(const ModelSpec& m);

// One GEMM of the forward pass: C[m x n] = A[m x k] * B[k x n], counted `count` times.
// Backward runs two GEMMs of the same FLOPs for each forward one (dgrad, wgrad).
struct Gemm {
  std::string name;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t count = 1;
  bool expert = false;  // the routed experts' GEMMs (count of them), grouped or looped
  bool fp8 = false;     // run in FP8 (a transformer layer's linear under fp8 training)
  GemmRole role = GemmRole::Other;

  double flops() const { return 2.0 * static_cast<double>(m) * n * k * count; }
  // The column-parallel linear that opens a dense attention (QKV) or MLP block.
  bool opens_dense_block() const {
    return !expert && (role == GemmRole::QkvProjection || role == GemmRole::MlpInput ||
                       role == GemmRole::GatedMlpInput);
  }
};

// How a framework's layer code runs its elementwise work (layer_forward_work counts the HBM bytes
// of each kernel): fused kernels (Megatron-core, the Megatron models DeepSpeed trains, torchtitan
// under torch.compile); torchtitan's model code op by op in eager PyTorch; nanotron's Llama layer
// (fused norms and rotary, an eager SwiGLU, copies of Q, K and V, no dropout).
enum class ElementwiseOps { Fused, Eager, Nanotron };

// Work of one transformer layer's forward pass on one GPU of a TP group of size tp.
struct LayerWork {
  std::vector<Gemm> gemms;          // weight GEMMs with TP-split shapes: attention's, then the MLP's
  std::size_t attention_gemms = 0;  // how many of them are the attention block's
  double attention_flops = 0;       // QK^T and attention*V as the kernel runs them, forward
  double elementwise_bytes = 0;     // HBM bytes moved by norms, activation, softmax, dropout, residual
  double flops() const;             // total forward FLOPs
};
// `moe_layer`: the work of an MoE layer, else of a dense one. Its experts get balanced shares of
// the routed tokens, ceil(tokens x top_k / num_experts) each; with expert parallelism of degree
// `ep` a rank holds num_experts / ep of them, each fed by the ep ranks of its group (ep times
// the share); `load_imbalance` >= 1 scales the share to the busiest expert's. With context
// parallelism of degree `cp` a rank holds s / cp of each sequence's tokens (Megatron-core's two
// load-balanced chunks) and computes 1 / cp of its attention core: every GEMM, elementwise and
// attention term divides by cp. `ops`: how the elementwise work runs (ElementwiseOps; model.cpp
// counts the kernels of each).
// `expert_tp` (0: tp) splits the routed experts; 1 under tp > 1 is Megatron-core's MoE parallel
// folding with expert TP 1: the EP groups span TP, and a rank routes only its own tokens (its
// 1 / tp of them under sequence parallelism) to whole experts.
LayerWork layer_forward_work(const ModelSpec& m, std::int64_t micro_batch, std::int64_t tp,
                             bool sequence_parallel, bool flash_attention, bool moe_layer = false,
                             std::int64_t ep = 1, double load_imbalance = 1.0,
                             std::int64_t cp = 1, ElementwiseOps ops = ElementwiseOps::Fused,
                             std::int64_t expert_tp = 0);

// torchtitan's op-level selective activation checkpointing (activation_checkpoint.mode
// "selective" with selective_ac_option "op"; torchtitan/parallelisms/parallelize_llama.py at
// commit 9dec370, _apply_ac_to_transformer_block): each transformer block runs under
// torch.utils.checkpoint with a policy that saves the outputs of every matmul (aten.mm) except
// every second one of the block, of the attention kernel (SDPA) and of TP's reduce-scatters, and
// recomputes every other op in the backward. torchtitan's Llama issues its matmuls as wq, wk,
// wv, wo (model.py, Attention.forward), then w1, w3, w2 (FeedForward.forward:
// w2(silu(w1(x)) * w3(x))): wq, wv, w1 and w2 are saved, wk, wo and w3 recomputed; a
// non-gated MLP (w1, w2) saves w1. torchao's Float8 linears count alike: the policy, a dispatch
// mode, sees aten.mm on torchao's Float8Tensor (float8_ops.py implements aten.mm with
// torch._scaled_mm) and saves its 16-bit output. The matmuls of one layer, in that order,
// with their TP-split shapes for `tokens` rows (column-parallel: output columns split by tp;
// row-parallel wo and w2: input rows split, each rank writing a full-width partial sum).
struct CheckpointedMatmul {
  Gemm gemm;
  bool attention = false;  // in the attention block (else the MLP's)
  bool saved = false;      // its output kept for backward (else recomputed)
};
std::vector<CheckpointedMatmul> op_checkpoint_matmuls(const ModelSpec& m, std::int64_t tokens,
                                                      std::int64_t tp);

// Forward FLOPs of the embedding lookup (0) and the output (logit) layer for one micro-batch:
// 2 * b * s * h * vocab, the whole layer (not divided by TP).
double logits_forward_flops(const ModelSpec& m, std::int64_t micro_batch);

// Model FLOPs per token, no recomputation: 3 x forward (forward + backward = 2 x forward) summed
// over layers and logits. The MFU numerator. With d = head_dim, kv = num_kv_heads, q = heads x d
// (= h unless attention_head_dim decouples it), f = ffn, g = 3 for a gated MLP else 2,
// l = layers, V = vocab, s = seq_length, k = min(s, sliding_window) (s without a window) in the
// layers with the window and s in the others, averaged over the layers:
//   3 * [ l * (2h(q + 2*kv*d) + 2qh + 2*g*h*f + 4*k*q) + 2*h*V ]
// Weight GEMMs and the QK^T / AV batched GEMMs only (no bias, norm or softmax FLOPs); the causal
// mask is not discounted. For ffn = 4h, kv = heads, g = 2 this is Megatron's
// 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) divided by the B*s tokens of the batch.
// In general: 3 x (2 x the weights each token multiplies, an expert weighted by top_k /
// num_experts, plus the attention core's 2k(q_qk + q_v) per layer), which for an MoE model
// counts the active experts only; MLA's query/key and value widths replace q in the core.
double model_flops_per_token(const ModelSpec& m);

// Keys per query of one layer's causal attention core, averaged over the model's layers (those
// within sliding_window or attention chunks, and the others): with `causal_band`, the (query,
// key) pairs a flash kernel runs over the sequence s, s k - k^2 / 2 with k = min(s, window),
// n c^2 / 2 + r^2 / 2 for s = n c + r in chunks of c, and s^2 / 2 with neither, divided by s;
// without, Megatron's count: k keys per query, (n c^2 + r^2) / s in chunks (each query against
// its chunk, the causal mask not discounted), s with neither (the MFU numerator's).
double mean_keys_per_query(const ModelSpec& m, bool causal_band);

// Activation bytes kept by one layer for backward, per GPU, Korthikanti et al. 2022 (eq. 1, 2, 4,
// 6), generalised to ffn != 4h, gated MLPs, GQA, decoupled head_dim and the norms per block; flash
// attention drops the 5as^2b term.
// With context parallelism of degree `cp` every term divides by cp (each rank keeps its s / cp
// tokens' activations, and without flash attention its s / cp rows of the scores).
// Recompute::SelectiveOp counts what op_checkpoint_matmuls' policy saves (MoE and MLA layers
// are refused for it by the scenario); Recompute::Selective drops what `modules` replays.
// `fp8_linear_inputs`: each linear layer keeps its input for the weight gradient in FP8, one
// byte per element, as Transformer Engine's linears do under FP8 training (linear.py,
// layernorm_linear.py, grouped_linear.py save the quantized input unless the recipe runs wgrad in
// higher precision): the QKV and first-linear inputs (the norms' outputs), the output
// projection's input, the second linear's input (the activation's output), the routed experts'
// permuted tokens and MLA's normed latents. ASSUMPTION: the scales the mxfp8 and blockwise
// recipes keep beside that byte (one per 32 or 128 elements, 3 % more) are not counted.
// `saves`: where the framework's layer code keeps other tensors than Megatron-core's
// (LayerSaves). The sum of activation_tensors_per_layer.
double activation_bytes_per_layer(const ModelSpec& m, std::int64_t micro_batch, std::int64_t tp,
                                  bool sequence_parallel, Recompute recompute, bool flash_attention,
                                  bool moe_layer = false, std::int64_t cp = 1,
                                  std::int64_t expert_tp = 0,
                                  RecomputeModules modules = {}, bool fp8_linear_inputs = false,
                                  LayerSaves saves = {});
// The tensors activation_bytes_per_layer counts, one entry per tensor (bytes per GPU): the
// caching allocator places them one by one (sim/memory/caching_allocator.h).
std::vector<double> activation_tensors_per_layer(const ModelSpec& m, std::int64_t micro_batch,
                                                 std::int64_t tp, bool sequence_parallel,
                                                 Recompute recompute, bool flash_attention,
                                                 bool moe_layer = false, std::int64_t cp = 1,
                                                 std::int64_t expert_tp = 0,
                                                 RecomputeModules modules = {},
                                                 bool fp8_linear_inputs = false,
                                                 LayerSaves saves = {});

// Names of the model presets, and the preset itself (throws InputError naming key_path if unknown).
std::vector<std::string> model_preset_names();
ModelSpec model_preset(const std::string& name, const std::string& key_path);

// `model` value of a scenario: a preset name, a path to a Hugging Face config.json, or an inline
// object with the keys of the zerosim-published-cases/1 format. Throws InputError with key paths.
// A file path is read relative to the current directory; errors inside it name
// "<key_path>(<file>).<hf key>". Object keys besides the case format: preset (base preset name),
// hf_config (base config.json path), name, source, max_position_embeddings, norm
// (layernorm|rmsnorm), position (learned|rotary|alibi), linear_bias (all three biases),
// qkv_bias, attention_output_bias, mlp_bias, output_bias, embedding_norm, head_dim, layer_norms,
// sliding_window, sliding_window_layers.
// What a Hugging Face config says that zerosim reads otherwise than written (a default taken, an
// approximation, a field it does not know) is appended to `warnings` when given: never dropped in
// silence. model_json.cpp lists, per family, the fields modelled, warned about and refused, and
// the fields accepted silently because they do not change the cost.
ModelSpec model_from_json(const nlohmann::json& value, const std::string& key_path,
                          std::vector<InputWarning>* warnings = nullptr);
// `origin` is the key-path prefix used in errors (model_from_json passes "<key_path>(<file>)")
// and the spec's name.
ModelSpec model_from_hf_config(const nlohmann::json& config, const std::string& origin,
                               std::vector<InputWarning>* warnings = nullptr);

// Whether a `model` string names a Hugging Face config.json rather than a preset: it is no preset
// name, and it looks like a path ('/' in it, ".json" at its end) or names an existing file.
bool model_string_is_file(const std::string& s);

// The training sequence length a Hugging Face config leaves open: its position limit
// (max_position_embeddings) is what the positions allow, often raised for long-context use
// (Qwen2-7B: 131072, Mistral-7B: 32768), not what a run trains at. zerosim takes
// min(limit, 4096) (4096 without a limit) and warns. 4096 is Llama 2's pre-training length
// (Touvron et al. 2023) and a common fine-tuning length; for the older families, whose limit is
// at most 4096 (GPT-2 1024, GPT-NeoX, Falcon and Phi-2 2048, Llama 2 4096), min() is the length
// they were trained at.
inline constexpr std::int64_t kDefaultHfSeqLength = 4096;

// Sets the training sequence length of `m` to `seq_length`, given by the user as `key_path`
// (training.seq_length), checked against a learned position table. A warning that
// model_from_json gave about a defaulted training length no longer holds: it is removed from
// `warnings`.
void set_training_seq_length(ModelSpec& m, std::int64_t seq_length, const std::string& key_path,
                             std::vector<InputWarning>& warnings);

// The inline object form of a model (the case-format keys), used to echo the resolved scenario.
nlohmann::json model_to_json(const ModelSpec& m);

}  // namespace zerosim
