// Reading models from presets, Hugging Face config.json files and inline objects; bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim {
namespace {

using nlohmann::json;

// Writes `text` to a fresh file under the temp directory and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("zerosim_test_model_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

// Values of meta-llama/Llama-2-7b-hf config.json (model card repository), extra keys included.
const char* kLlama2_7bConfig = R"({
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "tie_word_embeddings": false,
  "torch_dtype": "float16", "transformers_version": "4.31.0.dev0", "use_cache": true,
  "vocab_size": 32000 })";

// openai-community/gpt2 config.json (sizes only); 124,439,808 parameters.
const char* kGpt2Config = R"({ "activation_function": "gelu_new", "model_type": "gpt2",
  "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024,
  "vocab_size": 50257 })";

// bigscience/bloom-560m config.json (sizes only); 559,214,592 parameters. No position limit.
const char* kBloom560mConfig = R"({ "model_type": "bloom", "hidden_size": 1024, "n_head": 16,
  "n_layer": 24, "vocab_size": 250880, "hidden_dropout": 0.0 })";

TEST(modelJson, PresetByName) {
  const ModelSpec m = model_from_json("llama3-70b", "model");
  EXPECT_EQ(m, model_preset("llama3-70b", "model"));
  EXPECT_FALSE(m.source.empty());
}

TEST(modelJson, EveryPresetRoundTrips) {
  for (const auto& name : model_preset_names()) {
    const ModelSpec m = model_preset(name, "model");
    EXPECT_FALSE(m.source.empty()) << name;
    EXPECT_NO_THROW(validate_model(m, "model")) << name;
    EXPECT_EQ(model_from_json(model_to_json(m), "model"), m) << name;
  }
}

TEST(modelJson, HfLlama2ConfigCountsLikeThePreset) {
  const std::string path = write_temp("llama2-7b.json", kLlama2_7bConfig);
  const ModelSpec hf = model_from_json(path, "model");
  const ModelSpec preset = model_preset("llama2-7b", "model");
  EXPECT_EQ(count_params(hf).total, count_params(preset).total);
  EXPECT_EQ(count_params(hf).total, 6738415616LL);
  ModelSpec same = hf;  // architecture identical; only the labels differ
  same.name = preset.name;
  same.source = preset.source;
  EXPECT_EQ(same, preset);
  EXPECT_EQ(hf.name, path);
  EXPECT_EQ(hf.seq_length, 4096);  // min(max_position_embeddings, 4096), with a warning
}

// A config gives no training length (max_position_embeddings is a limit): the default is taken
// and said, naming the key, never silently.
TEST(modelJson, HfTrainingLengthIsDefaultedWithAWarning) {
  const std::string bloom = write_temp("bloom.json", kBloom560mConfig);
  std::vector<InputWarning> warnings;
  const ModelSpec m = model_from_json(bloom, "model", &warnings);
  EXPECT_EQ(m.seq_length, kDefaultHfSeqLength);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].key_path, "model(" + bloom + ").seq_length");
  EXPECT_NE(warnings[0].message.find("training.seq_length"), std::string::npos);
}

TEST(modelJson, HfGpt2AndBloomCounts) {
  const ModelSpec gpt2 = model_from_json(write_temp("gpt2.json", kGpt2Config), "model");
  EXPECT_EQ(count_params(gpt2).total, 124439808LL);
  EXPECT_TRUE(gpt2.tied_embeddings);
  // BLOOM configs carry no sequence length: give it inline.
  const std::string bloom_path = write_temp("bloom-560m.json", kBloom560mConfig);
  const ModelSpec bloom = model_from_json(json{{"hf_config", bloom_path}, {"seq_length", 2048}}, "model");
  EXPECT_EQ(count_params(bloom).total, 559214592LL);
  EXPECT_EQ(bloom.position, PositionKind::Alibi);
  EXPECT_TRUE(bloom.embedding_norm);
}

TEST(modelJson, InlineCaseFormatObject) {
  // Megatron SC21 Table 1, 1.7B row, as written in the published cases.
  const json j = json::parse(R"({"num_layers": 24, "hidden_size": 2304, "num_attention_heads": 24,
    "num_kv_heads": 24, "ffn_hidden_size": 9216, "mlp": "gelu", "vocab_size": 51200,
    "seq_length": 2048, "tied_embeddings": true})");
  const ModelSpec m = model_from_json(j, "cases[0].model");
  EXPECT_EQ(m.name, "inline");
  EXPECT_EQ(m.norm, NormKind::LayerNorm);
  EXPECT_EQ(m.position, PositionKind::Learned);
  EXPECT_EQ(m.max_position_embeddings, 2048);
  // 12*l*h^2*(1 + 13/(12h) + (V + s)/(12*l*h)) + final LayerNorm: the SC21 count, exact.
  const std::int64_t l = 24, h = 2304;
  EXPECT_EQ(count_params(m).total, l * (12 * h * h + 13 * h) + (51200 + 2048) * h + 2 * h);
}

TEST(modelJson, PresetWithOverrides) {
  const ModelSpec m = model_from_json(json{{"preset", "llama3-8b"}, {"seq_length", 4096}}, "model");
  EXPECT_EQ(m.seq_length, 4096);
  EXPECT_EQ(m.name, "llama3-8b-modified");
  EXPECT_EQ(count_params(m).total, count_params(model_preset("llama3-8b", "model")).total);
  const ModelSpec named = model_from_json(json{{"preset", "llama3-8b"}, {"name", "mine"}}, "model");
  EXPECT_EQ(named.name, "mine");
}

// Dropout rates are training settings on the model: Megatron-core's 0.1 each for an inline
// object, the base's for a preset (Llama 3: none), given ones replacing them without renaming the
// model; they echo back.
TEST(modelJson, DropoutRates) {
  const ModelSpec inline_model = model_from_json(
      json{{"num_layers", 2}, {"hidden_size", 256}, {"num_attention_heads", 8},
           {"vocab_size", 1000}, {"seq_length", 128}},
      "model");
  EXPECT_DOUBLE_EQ(inline_model.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(inline_model.attention_dropout, 0.1);
  const ModelSpec llama = model_from_json(json{{"preset", "llama3-8b"}}, "model");
  EXPECT_DOUBLE_EQ(llama.hidden_dropout, 0.0);
  const ModelSpec given =
      model_from_json(json{{"preset", "llama3-8b"}, {"hidden_dropout", 0.1}}, "model");
  EXPECT_DOUBLE_EQ(given.hidden_dropout, 0.1);
  EXPECT_EQ(given.name, "llama3-8b");
  EXPECT_EQ(model_from_json(model_to_json(given), "model"), given);
}

// Runs `f`, expecting an InputError whose key path is `key_path` and whose message contains
// `needle`.
void expect_input_error(const std::function<void()>& f, const std::string& key_path,
                        const std::string& needle = "") {
  try {
    f();
    ADD_FAILURE() << "expected InputError at " << key_path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), key_path) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError at " << key_path << ", got " << e.what();
  }
}

json base_inline() {
  return json::parse(R"({"num_layers": 2, "hidden_size": 256, "num_attention_heads": 8,
    "vocab_size": 1000, "seq_length": 128})");
}

TEST(modelJsonErrors, DropoutIsAProbability) {
  json j = base_inline();
  j["hidden_dropout"] = 1.0;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.hidden_dropout", "[0, 1)");
  j = base_inline();
  j["attention_dropout"] = "0.1";
  expect_input_error([&] { model_from_json(j, "model"); }, "model.attention_dropout", "[0, 1)");
}

TEST(modelJsonErrors, UnknownPresetSuggestsClosest) {
  expect_input_error([] { model_from_json("gpt3-175", "model"); }, "model", "did you mean 'gpt3-175b'");
  expect_input_error([] { model_preset("lama3-8b", "scenario.model"); }, "scenario.model", "llama3-8b");
}

TEST(modelJsonErrors, UnknownObjectKey) {
  json j = base_inline();
  j["hiden_size"] = 1;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.hiden_size", "did you mean 'hidden_size'");
}

TEST(modelJsonErrors, BadIntegers) {
  json j = base_inline();
  j["hidden_size"] = -4;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.hidden_size", "positive integer");
  j["hidden_size"] = "256";
  expect_input_error([&] { model_from_json(j, "model"); }, "model.hidden_size", "positive integer");
  j["hidden_size"] = 256.5;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.hidden_size", "positive integer");
  j = base_inline();
  j["num_layers"] = 1 << 20;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.num_layers", "no larger than");
}

// sliding_window_layers counts layers within a window: it needs the window and at most every
// layer; 0 is every layer.
TEST(modelJsonErrors, SlidingWindowLayersNeedTheWindow) {
  json j = base_inline();
  j["sliding_window_layers"] = 1;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.sliding_window_layers",
                     "needs sliding_window");
  j["sliding_window"] = 64;
  j["sliding_window_layers"] = 3;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.sliding_window_layers",
                     "num_layers (2)");
  j["sliding_window_layers"] = -1;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.sliding_window_layers",
                     "integer");
  j["sliding_window_layers"] = 1;
  EXPECT_EQ(model_from_json(j, "model").sliding_window_layers, 1);
  EXPECT_EQ(model_to_json(model_from_json(j, "model"))["sliding_window_layers"], 1);
}

// chunked_attention_layers likewise needs attention_chunk_size; a model has a window or chunks.
TEST(modelJsonErrors, ChunkedAttentionLayersNeedTheChunks) {
  json j = base_inline();
  j["chunked_attention_layers"] = 1;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.chunked_attention_layers",
                     "needs attention_chunk_size");
  j["attention_chunk_size"] = 64;
  j["chunked_attention_layers"] = 3;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.chunked_attention_layers",
                     "num_layers (2)");
  j["chunked_attention_layers"] = 1;
  EXPECT_EQ(model_from_json(j, "model").chunked_attention_layers, 1);
  const json echoed = model_to_json(model_from_json(j, "model"));
  EXPECT_EQ(echoed["attention_chunk_size"], 64);
  EXPECT_EQ(echoed["chunked_attention_layers"], 1);
  j["sliding_window"] = 32;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.attention_chunk_size",
                     "either");
}

// qk_norm_projection says how wide the q/k norms are, so it needs them.
TEST(modelJsonErrors, QkNormProjectionNeedsTheNorms) {
  json j = base_inline();
  j["qk_norm_projection"] = true;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.qk_norm_projection", "qk_norm");
  j["qk_norm"] = true;
  const ModelSpec m = model_from_json(j, "model");
  EXPECT_TRUE(m.qk_norm_projection);
  EXPECT_EQ(model_to_json(m)["qk_norm_projection"], true);
}

TEST(modelJsonErrors, HeadsMustDivide) {
  json j = base_inline();
  j["num_attention_heads"] = 7;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.num_attention_heads", "divide");
  j = base_inline();
  j["num_kv_heads"] = 3;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.num_kv_heads", "divide");
}

TEST(modelJsonErrors, EnumsBoolsAndMissingKeys) {
  json j = base_inline();
  j["mlp"] = "swigl";
  expect_input_error([&] { model_from_json(j, "model"); }, "model.mlp", "did you mean 'swiglu'");
  j["mlp"] = "swiglu";  // gated MLP: no 4h default
  expect_input_error([&] { model_from_json(j, "model"); }, "model.ffn_hidden_size", "missing");
  j = base_inline();
  j["tied_embeddings"] = 1;
  expect_input_error([&] { model_from_json(j, "model"); }, "model.tied_embeddings", "true or false");
  j = base_inline();
  j.erase("vocab_size");
  expect_input_error([&] { model_from_json(j, "model"); }, "model.vocab_size", "missing");
  expect_input_error([] { model_from_json(json(42), "model"); }, "model", "preset name");
  expect_input_error([] { model_from_json(json{{"preset", "llama3-8b"}, {"hf_config", "x.json"}}, "model"); },
                     "model.hf_config", "not both");
}

TEST(modelJsonErrors, LearnedPositionsLimitSequence) {
  expect_input_error([] { model_from_json(json{{"preset", "gpt3-175b"}, {"seq_length", 4096}}, "model"); },
                     "model.seq_length", "max_position_embeddings");
}

TEST(modelJsonErrors, FilesAndHfConfigs) {
  expect_input_error([] { model_from_json("no/such/config.json", "model"); }, "model", "cannot open");
  const std::string bad = write_temp("bad.json", "{ \"hidden_size\": 4096, ");
  expect_input_error([&] { model_from_json(bad, "model"); }, "model", "not valid JSON");

  json cfg = json::parse(kLlama2_7bConfig);
  cfg.erase("hidden_size");
  const std::string missing = write_temp("missing.json", cfg.dump());
  expect_input_error([&] { model_from_json(missing, "model"); }, "model(" + missing + ").hidden_size", "missing");

  cfg = json::parse(kLlama2_7bConfig);
  cfg["num_hidden_layers"] = "32";
  const std::string typed = write_temp("typed.json", cfg.dump());
  expect_input_error([&] { model_from_json(typed, "model"); }, "model(" + typed + ").num_hidden_layers",
                     "positive integer");

  cfg = json::parse(kLlama2_7bConfig);
  cfg["model_type"] = "lama";
  const std::string type = write_temp("type.json", cfg.dump());
  expect_input_error([&] { model_from_json(type, "model"); }, "model(" + type + ").model_type", "'llama'");

  cfg = json::parse(kLlama2_7bConfig);
  cfg["num_key_value_heads"] = 5;
  const std::string kv = write_temp("kv.json", cfg.dump());
  expect_input_error([&] { model_from_json(kv, "model"); }, "model(" + kv + ").num_key_value_heads", "divide");


  expect_input_error([] { model_from_hf_config(json::array(), "x"); }, "x", "JSON object");
}

}  // namespace
}  // namespace zerosim
