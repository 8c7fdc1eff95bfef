// Parameter counts against published totals (papers, model cards, Hugging Face model pages).
#include <gtest/gtest.h>

#include "sim/model/model.h"

namespace zerosim {
namespace {

double total(const std::string& preset) {
  return static_cast<double>(count_params(model_preset(preset, "model")).total);
}

void expect_within(double got, double published, double rel, const std::string& what) {
  EXPECT_NEAR(got / published, 1.0, rel) << what << ": got " << got << ", published " << published;
}

TEST(modelParams, PublishedTotalsWithinHalfPercent) {
  // GPT-3 175B: 174.6e9 (Narayanan et al. SC21 and common re-derivations of Table 2.1's "175.0B").
  expect_within(total("gpt3-175b"), 174.6e9, 0.005, "gpt3-175b");
  // Hugging Face model pages / Llama papers.
  expect_within(total("llama2-7b"), 6.74e9, 0.005, "llama2-7b");
  expect_within(total("llama2-13b"), 13.0e9, 0.005, "llama2-13b");
  expect_within(total("llama2-70b"), 69.0e9, 0.005, "llama2-70b");
  expect_within(total("llama3-8b"), 8.03e9, 0.005, "llama3-8b");
  expect_within(total("llama3-70b"), 70.6e9, 0.005, "llama3-70b");
  expect_within(total("llama3-405b"), 405.9e9, 0.005, "llama3-405b");
  // BLOOM model card: 176,247,271,424 parameters.
  expect_within(total("bloom-176b"), 176.2e9, 0.005, "bloom-176b");
}

TEST(modelParams, ExactCountsKnownFromCheckpoints) {
  // safetensors / PyTorch parameter counts of the released checkpoints.
  EXPECT_EQ(count_params(model_preset("llama2-7b", "model")).total, 6738415616LL);
  EXPECT_EQ(count_params(model_preset("llama3-8b", "model")).total, 8030261248LL);
  EXPECT_EQ(count_params(model_preset("bloom-176b", "model")).total, 176247271424LL);
}

TEST(modelParams, Gpt3SmallerModelsMatchTable21Rounding) {
  // Table 2.1 gives totals rounded to two significant digits, so allow 3%.
  expect_within(total("gpt3-1.3b"), 1.3e9, 0.03, "gpt3-1.3b");
  expect_within(total("gpt3-2.7b"), 2.7e9, 0.03, "gpt3-2.7b");
  expect_within(total("gpt3-6.7b"), 6.7e9, 0.03, "gpt3-6.7b");
  expect_within(total("gpt3-13b"), 13.0e9, 0.03, "gpt3-13b");
}

TEST(modelParams, PartsAddUp) {
  for (const auto& name : model_preset_names()) {
    const ModelSpec m = model_preset(name, "model");
    const ParamCounts c = count_params(m);
    EXPECT_EQ(c.total, c.per_layer * m.num_layers + c.embedding + c.output + c.final_norm) << name;
    EXPECT_EQ(c.output, m.tied_embeddings ? 0 : m.vocab_size * m.hidden_size) << name;
    // The token embedding is the largest single matrix of every preset.
    EXPECT_EQ(c.largest_module, m.vocab_size * m.hidden_size) << name;
  }
}

TEST(modelParams, GqaShrinksOnlyKeyValueProjections) {
  ModelSpec m = model_preset("llama3-8b", "model");
  const std::int64_t h = m.hidden_size, d = m.head_dim();
  const std::int64_t gqa = count_params(m).per_layer;
  m.num_kv_heads = m.num_attention_heads;
  const std::int64_t mha = count_params(m).per_layer;
  EXPECT_EQ(mha - gqa, 2 * h * (32 - 8) * d);
}

}  // namespace
}  // namespace zerosim
