// Published model architectures. Each preset cites where its numbers come from.
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim {
namespace {

// GPT-3 (Brown et al. 2020, arXiv:2005.14165, Table 2.1): learned position embeddings, tied
// input/output embeddings, biases on every linear, LayerNorm, GeLU, ffn = 4 * d_model,
// n_ctx = 2048, GPT-2 BPE vocabulary of 50257 tokens (Sec. 2.1 / GPT-2 tokenizer; Megatron pads
// it to 51200, which is not used here).
ModelSpec gpt3(const std::string& name, std::int64_t layers, std::int64_t hidden,
               std::int64_t heads, const std::string& note) {
  ModelSpec m;
  m.name = name;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_kv_heads = heads;
  m.ffn_hidden_size = 4 * hidden;
  m.vocab_size = 50257;
  m.seq_length = 2048;
  m.max_position_embeddings = 2048;
  m.mlp = MlpKind::Gelu;
  m.norm = NormKind::LayerNorm;
  m.position = PositionKind::Learned;
  m.tied_embeddings = true;
  m.qkv_bias = m.attention_output_bias = m.mlp_bias = true;
  // Dropout: the paper gives none; Megatron-LM's GPT default, 0.1 each (ModelSpec's).
  m.source = "Brown et al. 2020, Language Models are Few-Shot Learners (arXiv:2005.14165), Table 2.1" +
             note;
  return m;
}

// Llama 2 and Llama 3: RMSNorm, rotary positions, SwiGLU, no biases, untied output head.
ModelSpec llama(const std::string& name, std::int64_t layers, std::int64_t hidden,
                std::int64_t heads, std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab,
                std::int64_t seq, std::int64_t max_positions, const std::string& source) {
  ModelSpec m;
  m.name = name;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_kv_heads = kv_heads;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  m.seq_length = seq;
  m.max_position_embeddings = max_positions;
  m.mlp = MlpKind::Swiglu;
  m.norm = NormKind::RmsNorm;
  m.position = PositionKind::Rotary;
  m.tied_embeddings = false;
  m.qkv_bias = m.attention_output_bias = m.mlp_bias = false;
  m.hidden_dropout = m.attention_dropout = 0;  // no dropout modules (the HF configs' 0.0)
  m.source = source;
  return m;
}

const char* kLlama2 =
    "Touvron et al. 2023, Llama 2 (arXiv:2307.09288), Table 1 (context 4096, GQA for 70B) and "
    "the meta-llama/Llama-2-*-hf config.json (hidden, layers, heads, intermediate_size, vocab "
    "32000)";
const char* kLlama3 =
    "Llama Team 2024, The Llama 3 Herd of Models (arXiv:2407.21783), Table 3 (layers, model "
    "dimension, FFN dimension, heads, 8 KV heads, vocab 128000 + 256 special = 128256, pre-training "
    "context 8192) and the meta-llama/Meta-Llama-3*-* config.json";

ModelSpec bloom_176b() {
  ModelSpec m;
  m.name = "bloom-176b";
  m.num_layers = 70;
  m.hidden_size = 14336;
  m.num_attention_heads = 112;
  m.num_kv_heads = 112;
  m.ffn_hidden_size = 4 * 14336;
  m.vocab_size = 250880;
  m.seq_length = 2048;
  m.max_position_embeddings = 2048;  // ALiBi: no position table; the training context
  m.mlp = MlpKind::Gelu;
  m.norm = NormKind::LayerNorm;
  m.position = PositionKind::Alibi;
  m.tied_embeddings = true;
  m.qkv_bias = m.attention_output_bias = m.mlp_bias = true;
  m.embedding_norm = true;
  m.hidden_dropout = m.attention_dropout = 0;  // bigscience/bloom config.json: 0.0 each
  m.source =
      "BigScience 2022, BLOOM (arXiv:2211.05100), Table 3 (70 layers, d 14336, 112 heads, seq 2048, "
      "vocab 250880 padded, ALiBi, embedding LayerNorm) and bigscience/bloom config.json";
  return m;
}

// Mixture-of-Experts models, each the architecture its Hugging Face config.json describes
// (tests/model/hf_configs/ holds the configs; tests/model/test_moe.cpp checks that each preset
// equals its config's reading and the published parameter counts).
ModelSpec moe_llama(const std::string& name, std::int64_t layers, std::int64_t hidden,
                    std::int64_t heads, std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab,
                    std::int64_t seq, std::int64_t max_positions, MoeSpec moe,
                    const std::string& source) {
  ModelSpec m = llama(name, layers, hidden, heads, kv_heads, ffn, vocab, seq, max_positions, source);
  m.moe = moe;
  return m;
}

ModelSpec mixtral(const std::string& name, std::int64_t layers, std::int64_t hidden,
                  std::int64_t heads, std::int64_t ffn, std::int64_t max_positions,
                  const std::string& source) {
  MoeSpec e;
  e.num_experts = 8;
  e.top_k = 2;
  e.expert_ffn_hidden_size = ffn;
  // Jiang et al. 2024 (arXiv:2401.04088), Sec. 2: "trained with a context size of 32k tokens".
  return moe_llama(name, layers, hidden, heads, 8, ffn, 32000, 32768, max_positions, e, source);
}

// DeepSeek-V3 (DeepSeek-AI 2024, arXiv:2412.19437): Sec. 4.2 (61 layers, hidden 7168, 128 heads,
// d_c 512, d_c' 1536, head 128 + rotary 64, first 3 layers dense, 1 shared and 256 routed
// experts of 2048, 8 per token), pre-training at 4K tokens (Sec. 4.3), and the
// deepseek-ai/DeepSeek-V3 config.json (dense FFN 18432, vocab 129280, 163840 positions). The
// multi-token-prediction module is not part of the preset.
ModelSpec deepseek_v3() {
  MoeSpec e;
  e.num_experts = 256;
  e.top_k = 8;
  e.expert_ffn_hidden_size = 2048;
  e.shared_ffn_hidden_size = 2048;
  e.first_k_dense = 3;
  // Sec. 2.1.2: node-limited routing, each token to at most M = 4 nodes; config.json's n_group 8,
  // topk_group 4.
  e.router_num_groups = 8;
  e.router_group_topk = 4;
  ModelSpec m = moe_llama("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096, 163840, e,
                          "DeepSeek-AI 2024, DeepSeek-V3 technical report (arXiv:2412.19437), "
                          "Sec. 4.2-4.3, and deepseek-ai/DeepSeek-V3 config.json");
  m.mla = {1536, 512, 128, 64, 128};
  return m;
}

// Qwen3-235B-A22B (Qwen3 technical report, arXiv:2505.09388, Table 2: 94 layers, 64 query and
// 4 KV heads, 128 experts, 8 activated; pre-training stage 1 at 4,096 tokens, Sec. 3.2) and the
// Qwen/Qwen3-235B-A22B config.json (hidden 4096, head_dim 128, expert width 1536, q/k norms).
ModelSpec qwen3_235b() {
  MoeSpec e;
  e.num_experts = 128;
  e.top_k = 8;
  e.expert_ffn_hidden_size = 1536;
  ModelSpec m = moe_llama("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 4096, 40960, e,
                          "Qwen3 technical report (arXiv:2505.09388), Table 2 and Sec. 3.2, and "
                          "Qwen/Qwen3-235B-A22B config.json");
  m.attention_head_dim = 128;
  m.qk_norm = true;
  return m;
}

// gpt-oss-120b (OpenAI 2025, gpt-oss-120b & gpt-oss-20b model card, arXiv:2508.10925, Sec. 2:
// 36 layers, 128 experts, top 4, residual width 2880, 64 query heads of 64, 8 KV heads,
// attention sinks, banded attention of 128 tokens in every other layer; its config.json's
// initial_context_length 4096; config.json's sliding_window 128 and layer_types, which alternate
// sliding_attention and full_attention from layer 0: 18 of the 36 layers banded).
ModelSpec gpt_oss_120b() {
  MoeSpec e;
  e.num_experts = 128;
  e.top_k = 4;
  e.expert_ffn_hidden_size = 2880;
  e.router_bias = true;
  ModelSpec m = moe_llama("gpt-oss-120b", 36, 2880, 64, 8, 2880, 201088, 4096, 131072, e,
                          "OpenAI 2025, gpt-oss-120b & gpt-oss-20b model card (arXiv:2508.10925), "
                          "Sec. 2, and openai/gpt-oss-120b config.json");
  m.attention_head_dim = 64;
  m.qkv_bias = m.attention_output_bias = m.mlp_bias = true;
  m.attention_sinks = true;
  m.sliding_window = 128;
  m.sliding_window_layers = 18;
  return m;
}

// Llama 4 Scout and Maverick (meta-llama/Llama-4-Scout-17B-16E and -Maverick-17B-128E config.json,
// modeling_llama4.py): 48 layers of 5120, 40 query heads of 128 and 8 KV heads, routed experts of
// 8192 with top 1 and one shared expert of 8192, dense layers of 16384, vocab 202048, untied;
// Scout 16 experts in every layer, Maverick 128 in every other one (layers 1, 3, ...); chunked
// attention of 8192 in the 36 layers with rotary. Training length 8192, as NeMo's Llama4Config
// pre-trains them (nemo/collections/llm/gpt/model/llama.py at 7a8f1cc7, seq_length 8192).
ModelSpec llama4(const std::string& name, std::int64_t experts, std::int64_t every,
                 std::int64_t max_positions, const std::string& checkpoint) {
  MoeSpec e;
  e.num_experts = experts;
  e.top_k = 1;
  e.expert_ffn_hidden_size = 8192;
  e.shared_ffn_hidden_size = 8192;
  e.first_k_dense = every - 1;
  e.layer_freq = every;
  ModelSpec m = moe_llama(name, 48, 5120, 40, 8, 16384, 202048, 8192, max_positions, e,
                          "Meta, Llama 4 model card and meta-llama/" + checkpoint +
                              " config.json; training length as NeMo's Llama4Config");
  m.attention_chunk_size = 8192;
  m.chunked_attention_layers = 36;
  return m;
}

const std::vector<ModelSpec>& presets() {
  static const std::vector<ModelSpec> table = {
      // Table 2.1 prints n_heads = 24 with d_head = 128 for GPT-3 XL; 24 does not divide 2048, so
      // the d_head = 128 reading (16 heads) is used. Heads do not change parameters or FLOPs.
      gpt3("gpt3-1.3b", 24, 2048, 16, " (XL; 16 heads of 128, see note)"),
      gpt3("gpt3-2.7b", 32, 2560, 32, ""),
      gpt3("gpt3-6.7b", 32, 4096, 32, ""),
      // Table 2.1 prints d_model = 5140, which 40 heads cannot divide; n_heads * d_head =
      // 40 * 128 = 5120 is used (as Megatron and other replications do).
      gpt3("gpt3-13b", 40, 5120, 40, " (d_model 5120 = 40 heads x 128; the table prints 5140)"),
      gpt3("gpt3-175b", 96, 12288, 96, ""),
      llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 4096, kLlama2),
      llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 4096, kLlama2),
      llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 4096, kLlama2),
      llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 8192, kLlama3),
      llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 8192, kLlama3),
      // 405B exists only as Llama 3.1, whose config allows 131072 positions (rotary; no table).
      llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 131072, kLlama3),
      bloom_176b(),
      mixtral("mixtral-8x7b", 32, 4096, 32, 14336, 32768,
              "Jiang et al. 2024, Mixtral of Experts (arXiv:2401.04088), Table 1, and "
              "mistralai/Mixtral-8x7B-v0.1 config.json"),
      mixtral("mixtral-8x22b", 56, 6144, 48, 16384, 65536,
              "Mistral AI 2024-04-17, Mixtral 8x22B release, and the Mixtral-8x22B-v0.1 "
              "config.json"),
      deepseek_v3(),
      qwen3_235b(),
      gpt_oss_120b(),
      llama4("llama4-scout", 16, 1, 10485760, "Llama-4-Scout-17B-16E"),
      llama4("llama4-maverick", 128, 2, 1048576, "Llama-4-Maverick-17B-128E-Instruct"),
  };
  return table;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& m : presets()) names.push_back(m.name);
  return names;
}

ModelSpec model_preset(const std::string& name, const std::string& key_path) {
  for (const auto& m : presets())
    if (m.name == name) return m;
  const auto names = model_preset_names();
  throw InputError(key_path, "unknown model preset '" + name + "'" + did_you_mean(name, names) +
                                 "; presets: " + join_list(names) +
                                 ", or a path to a Hugging Face config.json, or an object");
}

}  // namespace zerosim
