// Real Hugging Face config.json files, one family at a time: each transcribed config
// (tests/model/hf_configs/, with its hub address in hf_configs/README.md) must give the parameter
// count its publisher states, and what the reader does not take as written must be said.
//
// Tolerances: exact where the source gives an exact count (a model card or paper table, or the
// total of the checkpoint's safetensors metadata that the Hugging Face Hub reports); half a unit of
// the last digit where it gives a rounded figure ("7.6B": +-0.05B).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim {
namespace {

using nlohmann::json;

struct Read {
  ModelSpec m;
  std::vector<InputWarning> warnings;
};

std::string config_path(const std::string& file) {
  return std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/" + file;
}

Read read_config(const std::string& file) {
  Read r;
  r.m = model_from_json(config_path(file), "model", &r.warnings);
  return r;
}

// The warning whose key path ends in ".<key>", or nullptr.
const InputWarning* warning_on(const Read& r, const std::string& key) {
  for (const InputWarning& w : r.warnings) {
    const std::string tail = "." + key;
    if (w.key_path.size() >= tail.size() &&
        w.key_path.compare(w.key_path.size() - tail.size(), tail.size(), tail) == 0)
      return &w;
  }
  return nullptr;
}

std::string all_warnings(const Read& r) {
  std::string out;
  for (const InputWarning& w : r.warnings) out += w.key_path + ": " + w.message + "\n";
  return out;
}

// A config whose every field is read or cost-free gives no warning but the training length's.
void expect_only_seq_length_warning(const Read& r) {
  ASSERT_EQ(r.warnings.size(), 1u) << all_warnings(r);
  EXPECT_NE(warning_on(r, "seq_length"), nullptr) << all_warnings(r);
}

std::int64_t total(const Read& r) { return count_params(r.m).total; }

// Every family's model reads back from its inline echo (what the report writes).
void expect_echo_reads_back(const Read& r) {
  EXPECT_EQ(model_from_json(model_to_json(r.m), "model"), r.m) << model_to_json(r.m).dump();
}

// meta-llama/Llama-2-7b-hf and Meta-Llama-3-8B: 6,738,415,616 and 8,030,261,248 parameters
// (safetensors metadata on the Hub, "6.74B" and "8.03B"). Both are 4096 tokens long by default:
// Llama 2's limit is its pre-training length, Llama 3's 8192 is capped, with a warning.
TEST(hfFamilies, Llama2_7bAnd3_8b) {
  struct Case {
    const char* file;
    std::int64_t params, kv_heads;
  };
  for (const Case& c : {Case{"llama-2-7b.json", 6'738'415'616, 32},
                        Case{"llama-3-8b.json", 8'030'261'248, 8}}) {
    const Read r = read_config(c.file);
    EXPECT_EQ(total(r), c.params) << c.file;
    EXPECT_EQ(r.m.num_kv_heads, c.kv_heads) << c.file;
    EXPECT_EQ(r.m.seq_length, 4096) << c.file;
    expect_only_seq_length_warning(r);
    expect_echo_reads_back(r);
  }
}

// mistralai/Mistral-7B-v0.1: 7,241,732,096 parameters (safetensors metadata, "7.24B"; the release
// post's "7.3B" is rounded up). Its 4096-token sliding window is in every layer: modelled.
TEST(hfFamilies, Mistral7b) {
  const Read r = read_config("mistral-7b-v0.1.json");
  EXPECT_EQ(total(r), 7'241'732'096);
  EXPECT_EQ(r.m.sliding_window, 4096);
  expect_only_seq_length_warning(r);
  EXPECT_NE(warning_on(r, "seq_length")->message.find("32768"), std::string::npos);
  expect_echo_reads_back(r);

  // At 4096 tokens the window holds the whole sequence; at 8192 each query attends to at most
  // 4096 keys with flash attention: 8192 x 4096 - 4096^2 / 2 pairs against the causal band's
  // 8192^2 / 2, 3/4 of it; without flash attention the scores are computed in full and masked.
  ModelSpec full = r.m;
  full.sliding_window = 0;
  EXPECT_EQ(layer_forward_work(r.m, 1, 1, false, true).attention_flops,
            layer_forward_work(full, 1, 1, false, true).attention_flops);
  ModelSpec longer = r.m;
  longer.seq_length = full.seq_length = 8192;
  EXPECT_DOUBLE_EQ(layer_forward_work(longer, 1, 1, false, true).attention_flops,
                   0.75 * layer_forward_work(full, 1, 1, false, true).attention_flops);
  EXPECT_DOUBLE_EQ(layer_forward_work(longer, 1, 1, false, false).attention_flops,
                   layer_forward_work(full, 1, 1, false, false).attention_flops);
}

// Qwen/Qwen2-7B: 7,615,616,512 parameters (safetensors metadata, "7.62B"); the Qwen2 technical
// report (Yang et al. 2024, arXiv:2407.10671, Table 1) rounds it to 7.6B, 6.5B without
// embeddings. Qwen2's q/k/v biases (not o_proj's) are in the exact count.
TEST(hfFamilies, Qwen2_7b) {
  const Read r = read_config("qwen2-7b.json");
  EXPECT_EQ(total(r), 7'615'616'512);
  EXPECT_TRUE(r.m.qkv_bias);
  EXPECT_FALSE(r.m.attention_output_bias);
  EXPECT_FALSE(r.m.mlp_bias);
  const ParamCounts c = count_params(r.m);
  EXPECT_NEAR(static_cast<double>(c.total), 7.6e9, 0.05e9);
  EXPECT_NEAR(static_cast<double>(c.total - c.embedding - c.output), 6.5e9, 0.05e9);
  // use_sliding_window is false: no window, and sliding_window / max_window_layers are moot.
  EXPECT_EQ(r.m.sliding_window, 0);
  // max_position_embeddings is 131072, a limit: the training length is 4096, with a warning.
  EXPECT_EQ(r.m.seq_length, 4096);
  expect_only_seq_length_warning(r);
  EXPECT_NE(warning_on(r, "seq_length")->message.find("131072"), std::string::npos);
  expect_echo_reads_back(r);
}

// google/gemma-7b and google/gemma-2b: the Gemma report (Gemma Team 2024, arXiv:2403.08295,
// Table 2) gives 7,751,248,896 and 1,981,884,416 non-embedding parameters, exact. Its embedding
// counts are for the 256,128-row table of Table 1; the released configs have 256,000 rows.
TEST(hfFamilies, Gemma7bAnd2b) {
  struct Case {
    const char* file;
    std::int64_t non_embedding, paper_embedding;
  };
  for (const Case& g : {Case{"gemma-7b.json", 7'751'248'896, 786'825'216},
                        Case{"gemma-2b.json", 1'981'884'416, 524'550'144}}) {
    const Read r = read_config(g.file);
    const ParamCounts c = count_params(r.m);
    EXPECT_EQ(c.total - c.embedding - c.output, g.non_embedding) << g.file;
    EXPECT_EQ(g.paper_embedding, 256'128 * r.m.hidden_size) << g.file;
    EXPECT_EQ(c.embedding, 256'000 * r.m.hidden_size) << g.file;
    EXPECT_EQ(c.output, 0) << g.file;  // tied (GemmaConfig's default)
    EXPECT_EQ(r.m.head_dim(), 256) << g.file;
    EXPECT_EQ(r.m.mlp, MlpKind::Geglu) << g.file;
    expect_only_seq_length_warning(r);
    expect_echo_reads_back(r);
  }
  // Gemma 7B: 16 heads of 256 on a hidden size of 3072, so Q is 4096 wide.
  EXPECT_EQ(read_config("gemma-7b.json").m.q_width(), 4096);
}

// google/gemma-3-1b-pt (model_type gemma3_text): the Gemma 3 report (Gemma Team 2025,
// arXiv:2503.19786, Table 1) gives 302M embedding and 698M non-embedding parameters. Gemma 3
// adds q/k norms over each head to Gemma 2's four norms per block, and attends within a window
// of 512 in all but every sixth layer (sliding_window_pattern 6: 22 of 26).
TEST(hfFamilies, Gemma3_1b) {
  const Read r = read_config("gemma-3-1b-pt.json");
  const ParamCounts c = count_params(r.m);
  EXPECT_NEAR(static_cast<double>(c.embedding) / 1e6, 302, 0.5);
  EXPECT_NEAR(static_cast<double>(c.total - c.embedding - c.output) / 1e6, 698, 0.5);
  EXPECT_EQ(c.output, 0);  // tied
  EXPECT_TRUE(r.m.qk_norm);
  EXPECT_EQ(r.m.layer_norms, 4);
  EXPECT_EQ(r.m.mlp, MlpKind::Geglu);
  EXPECT_EQ(r.m.sliding_window, 512);
  EXPECT_EQ(r.m.sliding_window_layers, 22);
  expect_only_seq_length_warning(r);
  expect_echo_reads_back(r);
}

// allenai/OLMo-2-1124-7B (model_type olmo2): q_norm and k_norm span the whole projections
// (Olmo2Attention: RMSNorm over num_heads x head_dim and num_key_value_heads x head_dim), and the
// two norms per block follow attention and MLP. Per layer from the config: 4 h^2 (q, k, v, o;
// 32 key/value heads), 3 h f (gated MLP), 2 h (the block's norms), 2 h (q/k norms); untied
// embeddings and a final norm: 7,298,617,344.
TEST(hfFamilies, Olmo2_7b) {
  const Read r = read_config("olmo-2-1124-7b.json");
  const std::int64_t h = 4096, f = 11008, layers = 32, vocab = 100352;
  EXPECT_EQ(count_params(r.m).total, layers * (4 * h * h + 3 * h * f + 2 * h + 2 * h) + 2 * vocab * h + h);
  EXPECT_EQ(count_params(r.m).total, 7'298'617'344);
  EXPECT_TRUE(r.m.qk_norm && r.m.qk_norm_projection);
  EXPECT_FALSE(r.m.tied_embeddings);
  expect_only_seq_length_warning(r);
  expect_echo_reads_back(r);
}

// microsoft/phi-2: 2,779,683,840 parameters (safetensors metadata, "2.78B"; the release post
// says 2.7 billion). Biases on every linear and on lm_head, one LayerNorm per block feeding
// attention and MLP in parallel, rotary on 40 % of each head.
TEST(hfFamilies, Phi2) {
  const Read r = read_config("phi-2.json");
  EXPECT_EQ(total(r), 2'779'683'840);
  EXPECT_TRUE(r.m.output_bias);
  EXPECT_EQ(r.m.layer_norms, 1);
  ASSERT_EQ(r.warnings.size(), 2u) << all_warnings(r);
  EXPECT_NE(warning_on(r, "model_type"), nullptr) << all_warnings(r);  // parallel block
  EXPECT_NE(warning_on(r, "seq_length"), nullptr) << all_warnings(r);
  expect_echo_reads_back(r);
}

// microsoft/Phi-3-mini-4k-instruct: 3,821,079,552 parameters (safetensors metadata, "3.82B"); the
// Phi-3 report (Abdin et al. 2024, arXiv:2404.14219) says 3.8B. Its sliding window of 2047 is in
// every layer: modelled.
TEST(hfFamilies, Phi3Mini) {
  const Read r = read_config("phi-3-mini-4k.json");
  EXPECT_EQ(total(r), 3'821'079'552);
  EXPECT_NEAR(static_cast<double>(total(r)), 3.8e9, 0.05e9);
  EXPECT_EQ(r.m.sliding_window, 2047);
  expect_only_seq_length_warning(r);
  expect_echo_reads_back(r);
}

// EleutherAI/gpt-neox-20b: the model card's table gives n_parameters = 20554567680.
TEST(hfFamilies, GptNeox20b) {
  const Read r = read_config("gpt-neox-20b.json");
  EXPECT_EQ(total(r), 20'554'567'680);
  EXPECT_EQ(r.m.layer_norms, 2);  // input_layernorm and post_attention_layernorm, in parallel
  EXPECT_FALSE(r.m.tied_embeddings);
  ASSERT_EQ(r.warnings.size(), 2u) << all_warnings(r);
  EXPECT_NE(warning_on(r, "use_parallel_residual"), nullptr) << all_warnings(r);
  expect_echo_reads_back(r);
}

// tiiuae/falcon-7b: the model card says 7B. The checkpoint's safetensors metadata counts
// 7,217,189,760, which stores lm_head as a tensor of its own; transformers ties it to the word
// embedding (FalconConfig leaves tie_word_embeddings at True), so the model has that less one
// vocab x hidden table. Multi-query attention, one LayerNorm per parallel block, no biases.
TEST(hfFamilies, Falcon7b) {
  const Read r = read_config("falcon-7b.json");
  EXPECT_NEAR(static_cast<double>(total(r)), 7e9, 0.5e9);
  EXPECT_TRUE(r.m.tied_embeddings);
  EXPECT_EQ(total(r) + r.m.vocab_size * r.m.hidden_size, 7'217'189'760);
  EXPECT_EQ(r.m.num_kv_heads, 1);
  EXPECT_EQ(r.m.layer_norms, 1);
  EXPECT_FALSE(r.m.linear_bias());
  EXPECT_EQ(r.m.max_position_embeddings, 2048);  // FalconConfig's default: the config omits it
  ASSERT_EQ(r.warnings.size(), 2u) << all_warnings(r);
  EXPECT_NE(warning_on(r, "parallel_attn"), nullptr) << all_warnings(r);
  EXPECT_NE(warning_on(r, "seq_length")->message.find("class default"), std::string::npos);
  expect_echo_reads_back(r);
}

// bigscience/bloom-560m and bloom-7b1: the model cards give 559,214,592 and 7,069,016,064
// parameters. ALiBi: no position limit, so the training length is 4096 with a warning.
TEST(hfFamilies, Bloom560mAnd7b1) {
  const Read small = read_config("bloom-560m.json");
  EXPECT_EQ(total(small), 559'214'592);
  const Read big = read_config("bloom-7b1.json");
  EXPECT_EQ(total(big), 7'069'016'064);
  for (const Read* r : {&small, &big}) {
    EXPECT_EQ(r->m.position, PositionKind::Alibi);
    EXPECT_EQ(r->m.seq_length, kDefaultHfSeqLength);
    expect_only_seq_length_warning(*r);
    EXPECT_NE(warning_on(*r, "seq_length")->message.find("nor a position limit"),
              std::string::npos);
    expect_echo_reads_back(*r);
  }
}

// ---- what is modelled, warned about and refused ----------------------------------------------

json config_json(const std::string& file) {
  std::ifstream in(config_path(file));
  return json::parse(in);
}

Read read_json_config(const json& cfg) {
  Read r;
  r.m = model_from_hf_config(cfg, "hf", &r.warnings);
  return r;
}

TEST(hfFields, LlamaAttentionAndMlpBiases) {
  json cfg = config_json("llama-2-7b.json");
  const std::int64_t base = total(read_json_config(cfg));
  const std::int64_t h = 4096, f = 11008, layers = 32;
  cfg["attention_bias"] = true;  // q, k, v and o_proj
  EXPECT_EQ(total(read_json_config(cfg)), base + layers * 4 * h);
  cfg["mlp_bias"] = true;  // gate, up and down
  EXPECT_EQ(total(read_json_config(cfg)), base + layers * (4 * h + 2 * f + h));
}

// A field given twice keeps its last value, as transformers' json reader keeps it, and is said.
TEST(hfFields, RepeatedFieldsKeepTheLastAndAreSaid) {
  const std::string file = ::testing::TempDir() + "/zerosim_repeated_config.json";
  std::string text = config_json("llama-2-7b.json").dump();
  text.insert(1, R"("num_hidden_layers": 2, )");  // the config's own value comes later
  std::ofstream(file) << text;
  std::vector<InputWarning> w;
  const ModelSpec m = model_from_json(file, "model", &w);
  EXPECT_EQ(m.num_layers, 32);
  bool said = false;
  for (const InputWarning& x : w) said = said || x.key_path == "model(" + file + ").num_hidden_layers";
  EXPECT_TRUE(said);
}

TEST(hfFields, UnknownFieldsAreReportedNotDropped) {
  json cfg = config_json("llama-2-7b.json");
  cfg["attn_layer_period"] = 8;  // a field of another family (Jamba): unknown to Llama
  cfg["quantization_config"] = {{"bits", 4}};
  cfg["unused_but_null"] = nullptr;  // null is absent, as transformers reads it
  const Read r = read_json_config(cfg);
  ASSERT_NE(warning_on(r, "attn_layer_period"), nullptr) << all_warnings(r);
  EXPECT_EQ(warning_on(r, "attn_layer_period")->key_path, "hf.attn_layer_period");
  EXPECT_NE(warning_on(r, "quantization_config"), nullptr) << all_warnings(r);
  EXPECT_EQ(warning_on(r, "unused_but_null"), nullptr) << all_warnings(r);
  // A field another family reads is unknown to this one: Llama has no sliding window.
  cfg = config_json("llama-2-7b.json");
  cfg["sliding_window"] = 1024;
  const Read llama = read_json_config(cfg);
  EXPECT_NE(warning_on(llama, "sliding_window"), nullptr) << all_warnings(llama);
  EXPECT_EQ(llama.m.sliding_window, 0);
}

// A window in some layers only: the window and how many layers have it, as each family's
// transformers code places it (Qwen2 from max_window_layers on, Gemma 2 every other layer).
TEST(hfFields, WindowInSomeLayersIsCountedByLayer) {
  json cfg = config_json("qwen2-7b.json");
  cfg["use_sliding_window"] = true;
  cfg["sliding_window"] = 4096;
  cfg["max_window_layers"] = 14;  // layers 14..27 windowed
  Read r = read_json_config(cfg);
  EXPECT_EQ(r.m.sliding_window, 4096);
  EXPECT_EQ(r.m.sliding_window_layers, 14);
  EXPECT_EQ(warning_on(r, "use_sliding_window"), nullptr) << all_warnings(r);
  cfg["max_window_layers"] = 0;  // every layer
  r = read_json_config(cfg);
  EXPECT_EQ(r.m.sliding_window, 4096);
  EXPECT_EQ(r.m.sliding_window_layers, 0);
  cfg["max_window_layers"] = 28;  // none
  r = read_json_config(cfg);
  EXPECT_EQ(r.m.sliding_window, 0);

  // Gemma 2 alternates local and global layers; it also has four norms per block.
  json gemma2 = config_json("gemma-7b.json");
  gemma2["model_type"] = "gemma2";
  gemma2["sliding_window"] = 4096;
  r = read_json_config(gemma2);
  EXPECT_EQ(r.m.sliding_window, 4096);
  EXPECT_EQ(r.m.sliding_window_layers, 14);  // layers 0, 2, ..., 26 of 28
  EXPECT_EQ(r.m.layer_norms, 4);
  // A layer_types list names each layer.
  gemma2["layer_types"] = json::array();
  for (int i = 0; i < 28; ++i)
    gemma2["layer_types"].push_back(i % 4 == 3 ? "full_attention" : "sliding_attention");
  r = read_json_config(gemma2);
  EXPECT_EQ(r.m.sliding_window_layers, 21);
}

TEST(hfFields, PhiQkLayerNormIsWarned) {
  json cfg = config_json("phi-2.json");
  cfg["qk_layernorm"] = true;
  const Read r = read_json_config(cfg);
  ASSERT_NE(warning_on(r, "qk_layernorm"), nullptr) << all_warnings(r);
  EXPECT_NE(warning_on(r, "qk_layernorm")->message.find("not counted"), std::string::npos);
}

TEST(hfFields, FalconNewDecoderArchitecture) {
  json cfg = config_json("falcon-7b.json");
  cfg["new_decoder_architecture"] = true;
  cfg["num_kv_heads"] = 71;
  cfg["bias"] = true;
  const Read r = read_json_config(cfg);
  EXPECT_EQ(r.m.num_kv_heads, 71);
  EXPECT_EQ(r.m.layer_norms, 2);  // ln_attn and ln_mlp
  EXPECT_TRUE(r.m.linear_bias());
  EXPECT_NE(warning_on(r, "new_decoder_architecture"), nullptr) << all_warnings(r);
}

// The key path of the InputError `f` throws, with its message; "accepted" when it throws none.
std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.key_path() + ": " + e.what();
  }
  return "accepted";
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Dropout rates decide whether masks are kept: phi-2's config gives resid_pdrop 0.1 and
// attention_dropout 0.0; Llama 2's none (LlamaConfig: no hidden dropout, attention 0.0); a GPT-2
// config without them takes GPT2Config's 0.1 each; a rate outside [0, 1) is refused by name.
TEST(hfFields, DropoutRatesAreReadWithTheirClassDefaults) {
  const Read phi = read_json_config(config_json("phi-2.json"));
  EXPECT_DOUBLE_EQ(phi.m.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(phi.m.attention_dropout, 0.0);
  const Read llama = read_json_config(config_json("llama-2-7b.json"));
  EXPECT_DOUBLE_EQ(llama.m.hidden_dropout, 0.0);
  EXPECT_DOUBLE_EQ(llama.m.attention_dropout, 0.0);
  json gpt2 = {{"model_type", "gpt2"}, {"n_embd", 768}, {"n_head", 12}, {"n_layer", 12},
               {"n_positions", 1024}, {"vocab_size", 50257}};
  const Read plain = read_json_config(gpt2);
  EXPECT_DOUBLE_EQ(plain.m.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(plain.m.attention_dropout, 0.1);
  gpt2["attn_pdrop"] = 1.5;
  const std::string bad = refusal([&] { (void)model_from_hf_config(gpt2, "hf"); });
  EXPECT_TRUE(starts_with(bad, "hf.attn_pdrop: ")) << bad;
}

TEST(hfFields, CrossAttentionAndForeignActivationsAreRefused) {
  const json gpt2 = {{"model_type", "gpt2"}, {"n_embd", 768}, {"n_head", 12}, {"n_layer", 12},
                     {"n_positions", 1024}, {"vocab_size", 50257}, {"add_cross_attention", true}};
  const std::string cross = refusal([&] { (void)model_from_hf_config(gpt2, "hf"); });
  EXPECT_TRUE(starts_with(cross, "hf.add_cross_attention: ")) << cross;
  json gemma = config_json("gemma-2b.json");
  gemma["hidden_act"] = "relu";  // Gemma's MLP is gated; a ReLU gate is no family zerosim knows
  const std::string relu = refusal([&] { (void)model_from_hf_config(gemma, "hf"); });
  EXPECT_TRUE(starts_with(relu, "hf.hidden_act: ")) << relu;
}

// ---- the training length --------------------------------------------------------------------

TEST(hfSeqLength, TrainingLengthReplacesTheDefaultAndItsWarning) {
  Read r = read_config("qwen2-7b.json");
  ASSERT_NE(warning_on(r, "seq_length"), nullptr);
  set_training_seq_length(r.m, 8192, "training.seq_length", r.warnings);
  EXPECT_EQ(r.m.seq_length, 8192);
  EXPECT_EQ(warning_on(r, "seq_length"), nullptr) << all_warnings(r);

  // An inline object that gives the length needs no default either.
  std::vector<InputWarning> w;
  const ModelSpec m = model_from_json(
      json{{"hf_config", config_path("qwen2-7b.json")}, {"seq_length", 2048}}, "model", &w);
  EXPECT_EQ(m.seq_length, 2048);
  EXPECT_TRUE(w.empty());
}

TEST(hfSeqLength, LearnedTableBoundsTheTrainingLength) {
  ModelSpec m = model_preset("gpt3-175b", "model");
  std::vector<InputWarning> w;
  const std::string past = refusal([&] { set_training_seq_length(m, 4096, "training.seq_length", w); });
  EXPECT_TRUE(starts_with(past, "training.seq_length: ")) << past;
  EXPECT_NE(past.find("2048"), std::string::npos) << past;
}

}  // namespace
}  // namespace zerosim
