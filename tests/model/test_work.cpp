// FLOPs and activation memory against the closed forms of Megatron-LM (Narayanan et al. SC21,
// Sec. 5.1), PaLM (Chowdhery et al. 2022, App. B) and Korthikanti et al. 2022 (arXiv:2205.05198).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim {
namespace {

TEST(modelFlops, MatchesMegatronFormulaForGpt3) {
  const ModelSpec m = model_preset("gpt3-175b", "model");
  const double l = m.num_layers, h = m.hidden_size, s = m.seq_length, V = m.vocab_size;
  // Megatron: 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) per iteration of B sequences, no recompute.
  const double megatron_per_token = 72.0 * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
  EXPECT_NEAR(model_flops_per_token(m) / megatron_per_token, 1.0, 1e-9);
}

TEST(modelFlops, MatchesPalmFormulaForLlama) {
  // PaLM App. B: 6N + 12*L*H*Q*T per token, N the matmul parameters (untied output head
  // included, input embedding and norms excluded), H*Q = hidden, T = sequence.
  const ModelSpec m = model_preset("llama3-8b", "model");
  const ParamCounts c = count_params(m);
  const double norms = m.num_layers * 2.0 * m.hidden_size + m.hidden_size;
  const double n = static_cast<double>(c.total - c.embedding) - norms;
  const double palm = 6.0 * n + 12.0 * m.num_layers * m.hidden_size * double(m.seq_length);
  EXPECT_NEAR(model_flops_per_token(m) / palm, 1.0, 1e-12);
}

TEST(modelFlops, TensorParallelSplitsEveryGemm) {
  const ModelSpec m = model_preset("llama3-70b", "model");
  const LayerWork one = layer_forward_work(m, 2, 1, false, false);
  const LayerWork eight = layer_forward_work(m, 2, 8, true, false);
  ASSERT_EQ(one.gemms.size(), eight.gemms.size());
  for (std::size_t i = 0; i < one.gemms.size(); ++i) {
    EXPECT_EQ(one.gemms[i].m, 2 * m.seq_length);  // tokens of the micro-batch
    EXPECT_DOUBLE_EQ(one.gemms[i].flops(), 8.0 * eight.gemms[i].flops()) << one.gemms[i].name;
  }
  const double b = 2, s = m.seq_length, h = m.hidden_size;
  EXPECT_DOUBLE_EQ(one.attention_flops, 4.0 * b * s * s * h);
  EXPECT_DOUBLE_EQ(eight.attention_flops, 4.0 * b * s * s * h / 8.0);
  // Column-parallel QKV: n split; row-parallel out projection: k split.
  EXPECT_EQ(eight.gemms[0].n, (8192 + 2 * 8 * 128) / 8);
  EXPECT_EQ(eight.gemms[1].k, 8192 / 8);
}

// Causal attention with flash attention runs the causal band only: s^2 / 2 (query, key) pairs,
// and with a sliding window of w keys s w - w^2 / 2 (the first w queries see fewer); without it
// the s^2 scores are computed in full and masked.
// Decoupled heads scale the attention with heads x head_dim, not the hidden size.
TEST(modelFlops, SlidingWindowAndHeadWidthScaleTheAttention) {
  ModelSpec m = model_preset("llama2-7b", "model");
  m.seq_length = 8192;
  ModelSpec windowed = m;
  windowed.sliding_window = 4096;
  const double b = 1, s = 8192, h = m.hidden_size;
  EXPECT_DOUBLE_EQ(layer_forward_work(m, 1, 1, false, true).attention_flops,
                   4.0 * b * s * s / 2 * h);
  EXPECT_DOUBLE_EQ(layer_forward_work(m, 1, 1, false, false).attention_flops,
                   4.0 * b * s * s * h);
  EXPECT_DOUBLE_EQ(layer_forward_work(windowed, 1, 1, false, true).attention_flops,
                   4.0 * b * (s * 4096 - 4096.0 * 4096 / 2) * h);
  EXPECT_DOUBLE_EQ(layer_forward_work(windowed, 1, 1, false, false).attention_flops,
                   layer_forward_work(m, 1, 1, false, false).attention_flops);
  // Half the layers windowed (gpt-oss, Gemma 2): each layer costs the layers' average, so the
  // layers add up to 16 full ones and 16 windowed; Megatron's count (the MFU numerator) has
  // s k keys per query in each: 4 s k q FLOPs per layer and token, times 3 for the step.
  ModelSpec half = windowed;
  half.sliding_window_layers = m.num_layers / 2;
  EXPECT_DOUBLE_EQ(layer_forward_work(half, 1, 1, false, true).attention_flops,
                   4.0 * b * ((s * s / 2) + (s * 4096 - 4096.0 * 4096 / 2)) / 2 * h);
  EXPECT_DOUBLE_EQ(model_flops_per_token(m) - model_flops_per_token(half),
                   3.0 * 4.0 * (s - 4096) * h * m.num_layers / 2);
  windowed.sliding_window = 16384;  // longer than the sequence: no effect
  EXPECT_DOUBLE_EQ(layer_forward_work(windowed, 1, 1, false, true).attention_flops,
                   layer_forward_work(m, 1, 1, false, true).attention_flops);

  ModelSpec wide = m;
  wide.attention_head_dim = 2 * m.head_dim();  // Q twice the hidden size
  const LayerWork w = layer_forward_work(wide, 1, 1, false, true);
  EXPECT_DOUBLE_EQ(w.attention_flops, 2.0 * layer_forward_work(m, 1, 1, false, true).attention_flops);
  EXPECT_EQ(w.gemms[0].n, 2 * h + 2 * 2 * h);  // Q, K and V, each 2h wide (no GQA)
  EXPECT_EQ(w.gemms[1].k, 2 * h);               // the output projection reads Q's width
}

// Llama 4's chunked attention: each query attends causally within its own chunk of c tokens.
// The (query, key) pairs of one sequence are counted here by brute force, query by query (query
// i sees i mod c + 1 keys, the diagonal included); flash attention's convention counts a causal
// square of L as L^2 / 2, without the half diagonal, so over the sequence it is the brute-force
// count less s / 2. Three of four layers chunked (Llama 4's layers with rotary): every layer
// costs the layers' average.
TEST(modelFlops, ChunkedAttentionCountsThePairsInsideEachChunk) {
  ModelSpec m = model_preset("llama2-7b", "model");
  m.num_layers = 4;
  m.seq_length = 20000;  // two whole chunks of 8192 and one of 3616
  ModelSpec chunked = m;
  chunked.attention_chunk_size = 8192;
  chunked.chunked_attention_layers = 3;
  double pairs = 0;
  for (std::int64_t i = 0; i < m.seq_length; ++i) pairs += static_cast<double>(i % 8192 + 1);
  pairs -= 20000.0 / 2;
  const double h = m.hidden_size;
  const double full = layer_forward_work(m, 1, 1, false, true).attention_flops;  // 4 h s^2 / 2
  EXPECT_NEAR(layer_forward_work(chunked, 1, 1, false, true).attention_flops / ((3 * 4.0 * h * pairs + full) / 4),
              1.0, 1e-12);
  // Every layer chunked; a sequence within one chunk is plain causal attention.
  chunked.chunked_attention_layers = 0;
  EXPECT_NEAR(layer_forward_work(chunked, 1, 1, false, true).attention_flops / (4.0 * h * pairs), 1.0, 1e-12);
  chunked.seq_length = m.seq_length = 8192;
  EXPECT_DOUBLE_EQ(layer_forward_work(chunked, 1, 1, false, true).attention_flops,
                   layer_forward_work(m, 1, 1, false, true).attention_flops);
  // The MFU numerator counts each query against its whole chunk, Megatron's s k with k = c when
  // the sequence is whole chunks: at s = 4 c, a chunked layer has a quarter of a full one's
  // core.
  chunked.seq_length = m.seq_length = 4 * 8192;
  const double core_full = 3 * 4.0 * (4 * 8192.0) * h;  // per token and layer, 3 x forward
  EXPECT_DOUBLE_EQ(model_flops_per_token(m) - model_flops_per_token(chunked),
                   m.num_layers * (core_full - core_full / 4));
}

TEST(modelFlops, ElementwiseTrafficShrinksWithSpAndFlash) {
  const ModelSpec m = model_preset("gpt3-175b", "model");
  const double base = layer_forward_work(m, 1, 8, false, false).elementwise_bytes;
  const double sp = layer_forward_work(m, 1, 8, true, false).elementwise_bytes;
  const double flash = layer_forward_work(m, 1, 8, false, true).elementwise_bytes;
  EXPECT_LT(sp, base);
  EXPECT_LT(flash, base);
  // Documented count at tp=1, no flash: 22sbh + 4sbf + 9as^2b bytes (GPT-3 has no rotary).
  const double s = m.seq_length, h = m.hidden_size, f = m.ffn_hidden_size, a = 96;
  EXPECT_DOUBLE_EQ(layer_forward_work(m, 1, 1, false, false).elementwise_bytes,
                   22 * s * h + 4 * s * f + 9 * a * s * s);
}

// torchtitan's model code run eagerly (no torch.compile) moves, per token of a Llama 3 8B
// layer, more than fused kernels by: two RMSNorms at 36 instead of 4 B per element, rotary at
// 20 instead of 4 B per element of Q and K, SwiGLU at 10 instead of 6 B per FFN element,
// repeat_kv's copies of K and V at the query width (4 (kvw + q)) and the attention output's
// contiguous copy (4q), counted by hand from the code (model.cpp lists the ops).
TEST(modelFlops, EagerTorchtitanOpsMoveMoreThanFusedKernels) {
  const ModelSpec m = model_preset("llama3-8b", "model");
  const double h = m.hidden_size, f = m.ffn_hidden_size, q = h, kv = 8 * 128;
  const double tokens = 2.0 * static_cast<double>(m.seq_length);
  const double fused = layer_forward_work(m, 2, 1, false, true).elementwise_bytes;
  const double eager =
      layer_forward_work(m, 2, 1, false, true, false, 1, 1.0, 1, ElementwiseOps::Eager)
          .elementwise_bytes;
  const double per_token = 2 * 32 * h + 16 * (q + kv) + 4 * f + 4 * (kv + q) + 4 * q;
  EXPECT_DOUBLE_EQ(eager - fused, tokens * per_token);
  // A GPT layer's LayerNorm and GeLU are single kernels eager or not; only the output copy
  // remains (no rotary, no GQA).
  const ModelSpec gpt = model_preset("gpt3-1.3b", "model");
  EXPECT_DOUBLE_EQ(layer_forward_work(gpt, 1, 1, false, true, false, 1, 1.0, 1, ElementwiseOps::Eager)
                           .elementwise_bytes -
                       layer_forward_work(gpt, 1, 1, false, true).elementwise_bytes,
                   4.0 * gpt.seq_length * gpt.hidden_size);
}

TEST(modelFlops, TpMustDivideHeadsAndFfn) {
  const ModelSpec m = model_preset("llama3-8b", "model");  // 8 kv heads
  try {
    layer_forward_work(m, 1, 16, false, true);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "parallel.tp");
  }
}

// Korthikanti et al. 2022, Table 2 / eq. 1, 2, 4, 6, for a GPT-3 175B layer.
class modelKorthikanti : public ::testing::Test {
 protected:
  ModelSpec m = model_preset("gpt3-175b", "model");
  double s = m.seq_length, h = m.hidden_size, a = m.num_attention_heads;
  double act(std::int64_t b, std::int64_t t, bool sp, Recompute r, bool flash = false) {
    return activation_bytes_per_layer(m, b, t, sp, r, flash);
  }
};

TEST_F(modelKorthikanti, Eq1NoParallelism) {
  for (std::int64_t b : {1, 4}) {
    EXPECT_DOUBLE_EQ(act(b, 1, false, Recompute::None), 34 * s * b * h + 5 * a * s * s * b);
    EXPECT_DOUBLE_EQ(act(b, 1, false, Recompute::None), s * b * h * (34 + 5 * a * s / h));
  }
}

TEST_F(modelKorthikanti, Eq2TensorParallel) {
  const double b = 2, t = 8;
  EXPECT_DOUBLE_EQ(act(2, 8, false, Recompute::None), s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
}

TEST_F(modelKorthikanti, Eq4TensorAndSequenceParallel) {
  const double b = 2, t = 8;
  EXPECT_DOUBLE_EQ(act(2, 8, true, Recompute::None), s * b * h / t * (34 + 5 * a * s / h));
}

TEST_F(modelKorthikanti, SelectiveRecomputeAndFlashDropTheScoreTerm) {
  const double b = 2, t = 8;
  EXPECT_DOUBLE_EQ(act(2, 8, false, Recompute::Selective), s * b * h * (10 + 24 / t));
  EXPECT_DOUBLE_EQ(act(2, 8, true, Recompute::Selective), 34 * s * b * h / t);  // eq. 6
  EXPECT_DOUBLE_EQ(act(2, 8, true, Recompute::None, true), 34 * s * b * h / t);
  EXPECT_DOUBLE_EQ(act(2, 1, false, Recompute::None, true), 34 * s * b * h);
}

TEST_F(modelKorthikanti, FullRecomputeKeepsLayerInput) {
  const double b = 2, t = 8;
  EXPECT_DOUBLE_EQ(act(2, 8, false, Recompute::Full), 2 * s * b * h);
  EXPECT_DOUBLE_EQ(act(2, 8, true, Recompute::Full), 2 * s * b * h / t);
}

TEST(modelActivations, GeluWithOtherFfnMatchesTranscribedFormula) {
  // docs/SOURCES.md#activation-memory: for ffn != 4h, sb(18h + 4 d_ff) + 5as^2b.
  ModelSpec m = model_preset("gpt3-2.7b", "model");
  m.ffn_hidden_size = 3 * m.hidden_size;
  const double s = m.seq_length, h = m.hidden_size, f = m.ffn_hidden_size, a = m.num_attention_heads;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 1, false, Recompute::None, false),
                   s * (18 * h + 4 * f) + 5 * a * s * s);
}

// nanotron's Llama layer (models/llama.py), counted by hand from its code against fused kernels:
// SwiGLU as SiLU then a multiply (read gate, write SiLU's output; read it and up, write the
// product: 10 B per FFN element against 6), Q, K and V made contiguous once (read + write,
// 4 (q + 2 kv) B per token), K and V concatenated and permuted for the rotary (16 kv), and no
// dropout masks after the two residual adds (1 B per element each).
TEST(modelFlops, NanotronsLayerCopiesQkvAndRunsSwigluEagerly) {
  ModelSpec gqa = model_preset("llama3-8b", "model");
  ModelSpec mha = gqa;
  mha.num_kv_heads = mha.num_attention_heads;
  const double h = gqa.hidden_size, f = gqa.ffn_hidden_size;
  const double tokens = 2.0 * static_cast<double>(gqa.seq_length);
  for (const ModelSpec& m : {gqa, mha}) {
    const double kv = static_cast<double>(m.num_kv_heads) * 128;
    const double fused = layer_forward_work(m, 2, 1, false, true).elementwise_bytes;
    const double nanotron =
        layer_forward_work(m, 2, 1, false, true, false, 1, 1.0, 1, ElementwiseOps::Nanotron)
            .elementwise_bytes;
    EXPECT_DOUBLE_EQ(nanotron - fused, tokens * (4 * f + 4 * (h + 2 * kv) + 16 * kv - 2 * h));
  }
}

TEST(modelActivations, SwigluAndGqaRecount) {
  // Llama-3-8B trained with dropout (Megatron-LM's default 0.1): Q 2sbh, K and V 2sb*kvw each
  // (kvw = 1024), SwiGLU intermediates 6sbf.
  ModelSpec m = model_preset("llama3-8b", "model");
  m.hidden_dropout = 0.1;
  const double s = m.seq_length, h = m.hidden_size, f = m.ffn_hidden_size, k = 8 * 128;
  const double expected = 4 * s * h                          // norm inputs
                          + 2 * s * h + 2 * s * h + 4 * s * k  // QKV input, Q, K, V
                          + 2 * s * h + s * h                  // out-proj input, dropout mask
                          + 2 * s * h + s * h + 6 * s * f;     // MLP input, mask, intermediates
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 1, false, Recompute::Selective, true), expected);
  // With TP the 10sbh replicated part stays whole.
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 4, false, Recompute::Selective, true),
                   10 * s * h + (expected - 10 * s * h) / 4);
  // As Llama 3 is trained (the preset: no dropout), PyTorch's dropout at p = 0 keeps no mask:
  // 2sbh less, all of it from the replicated part.
  const ModelSpec preset = model_preset("llama3-8b", "model");
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(preset, 1, 1, false, Recompute::Selective, true),
                   expected - 2 * s * h);
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(preset, 1, 4, false, Recompute::Selective, true),
                   8 * s * h + (expected - 10 * s * h) / 4);
}

// Without flash attention the scores keep the softmax output, its dropout mask and the dropout's
// output (5as^2b, Korthikanti et al.); at attention_dropout 0 the softmax output alone (2as^2b).
TEST(modelActivations, ScoresWithoutAttentionDropoutKeepTheSoftmaxOutputAlone) {
  ModelSpec m = model_preset("gpt3-1.3b", "model");
  const double s = m.seq_length, a = m.num_attention_heads;
  const double with = activation_bytes_per_layer(m, 1, 1, false, Recompute::None, false);
  m.attention_dropout = 0;
  EXPECT_DOUBLE_EQ(with - activation_bytes_per_layer(m, 1, 1, false, Recompute::None, false),
                   3 * a * s * s);
}

// nanotron's Llama layer (models/llama.py), its saved tensors counted from its autograd: the two
// TritonRMSNorm inputs and the two column linears' sequence-parallel inputs (2 bytes per element
// of h each), no dropout; with MHA the permuted QKV tensor (3 h) kept whole by the query's view
// and the rotated K and V (2 h) in a tensor of their own, with GQA the query (h) and the
// concatenated K and V (2 kvw) alone; flash-attn's output, which the output projection saves as
// a view (h); gate_up's output (2 f), SiLU's output and the product, the down projection's input
// (f each). All split by TP under sequence parallelism.
TEST(modelActivations, NanotronsLayerSavesWhatItsAutogradSaves) {
  const LayerSaves nanotron{.dropout_masks = false, .eager_gated_activation = true,
                            .mha_qkv_held_whole = true};
  ModelSpec gqa = model_preset("llama3-8b", "model");
  ModelSpec mha = gqa;
  mha.num_kv_heads = mha.num_attention_heads;
  const double s = gqa.seq_length, h = gqa.hidden_size, f = gqa.ffn_hidden_size, k = 8 * 128;
  for (std::int64_t tp : {1, 4}) {
    const auto act = [&](const ModelSpec& m) {
      return activation_bytes_per_layer(m, 2, tp, true, Recompute::None, true, false, 1, 0, {},
                                        false, nanotron);
    };
    EXPECT_DOUBLE_EQ(act(mha), 2 * s * (2 * (2 + 2 + 3 + 2 + 1) * h + 2 * 4 * f) / tp);
    EXPECT_DOUBLE_EQ(act(gqa), 2 * s * (2 * (2 + 2 + 1 + 1) * h + 2 * 2 * k + 2 * 4 * f) / tp);
  }
}

TEST(modelActivations, Fp8LinearsKeepTheirInputsInOneByte) {
  // Transformer Engine under FP8 saves each linear's input quantized (one byte): of Korthikanti
  // et al.'s 34 sbh, the QKV input (2 sbh), the out-projection input (2), the first linear's
  // input (2) and the second's, the GeLU output (8), halve: 27 sbh + 5as^2b for GPT-3 2.7B.
  const ModelSpec m = model_preset("gpt3-2.7b", "model");
  const double s = m.seq_length, h = m.hidden_size, a = m.num_attention_heads;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 1, 1, false, Recompute::None, false, false, 1, 0,
                                              {}, true),
                   27 * s * h + 5 * a * s * s);
  // DeepSeek-V3's MoE layer: MLA's normed latents (q 1536 + kv 512 wide) and out-projection input
  // (128 heads x 128), the routed experts' permuted tokens (8 copies of each token) and their
  // and the shared expert's SwiGLU outputs (8 x 2048 + 2048 wide) halve as well.
  const ModelSpec d = model_preset("deepseek-v3", "model");
  const double sd = d.seq_length;
  const double halved = sd * (1536 + 512) + sd * 128 * 128 + 2 * sd * d.hidden_size +
                        8 * sd * d.hidden_size + sd * (8 * 2048 + 2048);
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(d, 1, 1, false, Recompute::Selective, true, true) -
                       activation_bytes_per_layer(d, 1, 1, false, Recompute::Selective, true, true,
                                                  1, 0, {}, true),
                   halved);
}

// The allocator places a layer's activations tensor by tensor: GPT-3 2.7B without flash
// attention keeps its two norm inputs, the QKV and MLP inputs, two dropout masks, the GeLU's
// input and output, Q, K, V, the out-projection input and the scores' three (15 tensors, the
// terms of Korthikanti et al.'s eq. 1), the largest of which is the softmax output 2as^2b.
TEST(modelActivations, TensorsAreTheTermsOfTheCount) {
  const ModelSpec m = model_preset("gpt3-2.7b", "model");
  const double s = m.seq_length, h = m.hidden_size, a = m.num_attention_heads;
  const std::vector<double> t = activation_tensors_per_layer(m, 1, 1, false, Recompute::None, false);
  ASSERT_EQ(t.size(), 15u);
  EXPECT_DOUBLE_EQ(*std::max_element(t.begin(), t.end()), 2 * a * s * s);
  EXPECT_DOUBLE_EQ(std::accumulate(t.begin(), t.end(), 0.0), s * h * 34 + 5 * a * s * s);
  EXPECT_EQ(activation_tensors_per_layer(m, 1, 1, false, Recompute::Full, false).size(), 1u);
}

// torchtitan's op-level selective checkpointing, counted by hand from its policy
// (parallelize_llama.py at 9dec370): the block input, wq's output (q = h), wv's (kvw), the
// attention kernel's output (q) and fp32 log-sum-exp (4 bytes per head), w1's (f) and w2's (h);
// wk, wo and w3 are recomputed.
TEST(modelActivations, OpLevelCheckpointSavesEveryOtherMatmul) {
  const ModelSpec m = model_preset("llama3-8b", "model");
  const double s = m.seq_length, h = m.hidden_size, f = m.ffn_hidden_size, k = 8 * 128;
  const double a = m.num_attention_heads, b = 2;
  const double per_token = 2 * h + 2 * h + 2 * k + 2 * h + 4 * a + 2 * f + 2 * h;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 2, 1, false, Recompute::SelectiveOp, true),
                   b * s * per_token);
  // TP 4 with sequence parallelism: the input, the column-parallel outputs and the attention's
  // split by 4; w2 writes a full-width partial sum over the gathered sequence; the two
  // reduce-scatters' outputs (2h each) are saved, split by 4.
  const double tp4 = (2 * h + 2 * h + 2 * k + 2 * h + 4 * a + 2 * f) / 4 + 2 * h + 2 * (2 * h) / 4;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 2, 4, true, Recompute::SelectiveOp, true),
                   b * s * tp4);
  // Context parallelism divides every term.
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 2, 1, false, Recompute::SelectiveOp, true, false, 4),
                   b * s * per_token / 4);
  // Between Megatron's selective recomputation and full recomputation.
  EXPECT_LT(activation_bytes_per_layer(m, 2, 1, false, Recompute::SelectiveOp, true),
            activation_bytes_per_layer(m, 2, 1, false, Recompute::Selective, true));
  EXPECT_GT(activation_bytes_per_layer(m, 2, 1, false, Recompute::SelectiveOp, true),
            activation_bytes_per_layer(m, 2, 1, false, Recompute::Full, true));
}

TEST(modelActivations, OpLevelCheckpointRecomputesWkWoAndW3) {
  const ModelSpec m = model_preset("llama3-8b", "model");
  const std::int64_t tokens = 2 * m.seq_length;
  const double h = m.hidden_size, f = m.ffn_hidden_size, k = 8 * 128, t = tokens;
  double attention = 0, mlp = 0;
  for (const CheckpointedMatmul& mm : op_checkpoint_matmuls(m, tokens, 1)) {
    if (!mm.saved) (mm.attention ? attention : mlp) += mm.gemm.flops();
  }
  EXPECT_DOUBLE_EQ(attention, 2 * t * h * k + 2 * t * h * h);  // wk, wo
  EXPECT_DOUBLE_EQ(mlp, 2 * t * h * f);                         // w3
  // A non-gated MLP has two matmuls: w1 (the fifth of the block) saved, w2 recomputed.
  ModelSpec gelu = m;
  gelu.mlp = MlpKind::Gelu;
  mlp = 0;
  for (const CheckpointedMatmul& mm : op_checkpoint_matmuls(gelu, tokens, 1)) {
    if (!mm.saved && !mm.attention) mlp += mm.gemm.flops();
  }
  EXPECT_DOUBLE_EQ(mlp, 2 * t * f * h);
}

// Megatron-core's selective recomputation by module, counted by hand from the same terms.
// Llama 3 8B (SwiGLU: intermediates gate, up and their product, 2sbf each): layernorm drops the
// QKV and MLP inputs (the norms' outputs, 2sbh each); mlp drops the three intermediates; GPT-3
// without flash attention and without core_attn keeps the scores (5as^2b).
TEST(modelActivations, RecomputeModulesDropWhatTheyReplay) {
  const ModelSpec m = model_preset("llama3-8b", "model");
  const double s = m.seq_length, h = m.hidden_size, f = m.ffn_hidden_size;
  auto bytes = [&](RecomputeModules r) {
    return activation_bytes_per_layer(m, 1, 1, false, Recompute::Selective, true, false, 1, 0, r);
  };
  const double base = bytes({});
  EXPECT_DOUBLE_EQ(base, activation_bytes_per_layer(m, 1, 1, false, Recompute::Selective, true));
  EXPECT_DOUBLE_EQ(bytes({true, true, false, false, false}), base - 4 * s * h);
  EXPECT_DOUBLE_EQ(bytes({true, false, false, false, true}), base - 6 * s * f);
  EXPECT_DOUBLE_EQ(bytes({true, false, true, true, false}), base);  // no MoE, no MLA layer
  // Without recompute selective the modules change nothing.
  EXPECT_DOUBLE_EQ(
      activation_bytes_per_layer(m, 1, 1, false, Recompute::None, true, false, 1, 0,
                                 {true, true, true, true, true}),
      activation_bytes_per_layer(m, 1, 1, false, Recompute::None, true));
  const ModelSpec g = model_preset("gpt3-2.7b", "model");
  const double a = g.num_attention_heads, gs = g.seq_length;
  EXPECT_DOUBLE_EQ(
      activation_bytes_per_layer(g, 1, 1, false, Recompute::Selective, false, false, 1, 0,
                                 {false, false, false, false, false}),
      activation_bytes_per_layer(g, 1, 1, false, Recompute::Selective, false) + 5 * a * gs * gs);
}

// DeepSeek-V3's MoE layer: mla_up_proj drops Q and K (2 x 2sb x 128 x 192) and V (2sb x 128 x
// 128), keeping the attention output; moe_act drops the routed experts' activation output
// (2sb x top_k 8 x 2048), keeping the shared expert's (2sb x 2048).
TEST(modelActivations, MlaUpProjAndMoeActDropTheirTensors) {
  const ModelSpec m = model_preset("deepseek-v3", "model");
  const double s = m.seq_length;
  auto bytes = [&](RecomputeModules r) {
    return activation_bytes_per_layer(m, 1, 1, false, Recompute::Selective, true, true, 1, 0, r);
  };
  const double base = bytes({});
  EXPECT_DOUBLE_EQ(bytes({true, false, false, true, false}),
                   base - 2 * 2 * s * 128 * 192 - 2 * s * 128 * 128);
  EXPECT_DOUBLE_EQ(bytes({true, false, true, false, false}), base - 2 * s * 8 * 2048);
  EXPECT_DOUBLE_EQ(bytes({true, false, false, false, true}), base);  // mlp: dense layers only
}

}  // namespace
}  // namespace zerosim
