// The binding table (sim/scenario/keys.cpp): one entry per key, each name given once, and the
// resolved echo is a complete scenario: resolving it again gives the same scenario and echo.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "sim/core/error.h"
#include "sim/scenario/keys.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

TEST(scenarioKeys, EveryNameIsDeclaredOnce) {
  std::set<std::string> paths, flags, deepspeed, cases;
  for (const KeySpec& k : scenario_keys()) {
    EXPECT_TRUE(paths.insert(k.path).second) << k.path;
    EXPECT_TRUE(k.read) << k.path;
    EXPECT_TRUE(k.echo) << k.path;
    EXPECT_FALSE(k.help.empty()) << k.path;
    for (const ScenarioFlag& f : k.flags) EXPECT_TRUE(flags.insert(f.name).second) << f.name;
    if (!k.deepspeed.empty()) {
      EXPECT_TRUE(deepspeed.insert(k.deepspeed).second) << k.deepspeed;
    }
    if (!k.case_key.empty()) {
      EXPECT_TRUE(cases.insert(k.case_key).second) << k.case_key;
    }
    if (k.type == "enum") {
      EXPECT_FALSE(k.allowed.empty()) << k.path;
      // A default is one of the allowed names.
      if (!k.default_value.is_null()) {
        EXPECT_NE(std::find(k.allowed.begin(), k.allowed.end(), k.default_value.get<std::string>()),
                  k.allowed.end())
            << k.path;
      }
    }
  }
}

// Resolving the echo again gives the same echo: the echo names every key (defaults and derived
// values included), so a report's scenario reproduces the run.
void expect_round_trip(const json& doc) {
  const Scenario s = resolve_scenario(doc);
  const Scenario again = resolve_scenario(s.resolved);
  EXPECT_EQ(again.resolved, s.resolved) << doc.dump();
  for (const KeySpec& k : scenario_keys()) {
    if (k.path == "sim.adam_params_per_s" && s.sim.adam_params_per_s == 0) continue;
    EXPECT_EQ(k.echo(again), k.echo(s)) << k.path;
  }
}

TEST(scenarioKeys, EchoResolvesToItself) {
  expect_round_trip(default_scenario_document());
  expect_round_trip(json::object());
  expect_round_trip({{"model", "llama2-7b"},
                     {"cluster", {{"preset", "dgx-h100"}, {"nodes", 4}}},
                     {"training", {{"global_batch_size", 256}, {"micro_batch_size", 2}}},
                     {"parallel", {{"tp", 2}, {"framework", "megatron"}}},
                     {"zero", {{"stage", 1}, {"reduce_bucket_size", "auto"}}},
                     {"sim", {{"network", "analytical"}, {"adam_params_per_s", 2e9}}},
                     {"whatif", {{"slow_ranks", "3,1"}, {"slowdown", 1.5}}}});
  expect_round_trip({{"model", "llama2-13b"},
                     {"cluster", {{"preset", "dgx-a100-40gb"}, {"nodes", 1}}},
                     {"zero", {{"stage", 3},
                               {"offload_optimizer", {{"device", "cpu"},
                                                      {"delayed_param_update", true}}},
                               {"offload_param", {{"device", "cpu"}}}}}});
}

TEST(scenarioKeys, ShortcutFlagsSetTheirKeys) {
  // --zero 3 --mbs 2 --nodes 4 --allow-oom on the registry's defaults.
  ScenarioInputs in;
  in.flags = {{"model", "llama2-7b"}, {"zero", "3"}, {"mbs", "2"}, {"nodes", "4"},
              {"allow-oom", "true"}};
  const Scenario s = resolve_scenario(scenario_document(in));
  EXPECT_EQ(s.zero.stage, 3);
  EXPECT_EQ(s.training.micro_batch_size, 2);
  EXPECT_EQ(s.cluster.nodes, 4);
  EXPECT_TRUE(s.sim.allow_oom);
  for (const BoundFlag& f : scenario_flags()) {
    EXPECT_TRUE(find_key(f.key) || f.key.rfind("cluster.", 0) == 0) << f.flag->name;
  }
}

// A scratch JSON file for scenario_document, which reads its inputs from files.
std::string scratch_file(const std::string& name, const json& content) {
  const std::string path = ::testing::TempDir() + "/zerosim_keys_" + name;
  std::ofstream(path) << content.dump();
  return path;
}

std::string warning_on(const ScenarioDocument& d, const std::string& key_path) {
  for (const InputWarning& w : d.warnings)
    if (w.key_path == key_path) return w.message;
  return "(none)";
}

// Batch flags change what they name: with the accumulation steps and no global batch in the
// file, --mbs keeps the steps (the global batch follows); with a global batch, or --gbs, the
// steps are derived anew and the file's are said to be dropped.
TEST(scenarioKeys, BatchFlagsChangeWhatTheyNameAndSayWhatTheyDrop) {
  ScenarioInputs in;
  in.scenario_file = scratch_file(
      "batch.json", {{"model", "llama2-7b"},
                     {"cluster", {{"preset", "dgx-h100"}, {"nodes", 1}}},
                     {"training", {{"micro_batch_size", 2}, {"gradient_accumulation_steps", 4}}}});
  in.flags = {{"mbs", "1"}};
  ScenarioDocument d = scenario_document(in);
  Scenario s = resolve_scenario(d);
  EXPECT_EQ(s.training.gradient_accumulation_steps, 4);
  EXPECT_EQ(s.training.global_batch_size, 1 * 4 * 8);
  EXPECT_EQ(warning_on(d, "training.gradient_accumulation_steps"), "(none)");
  in.flags = {{"gbs", "32"}};
  d = scenario_document(in);
  s = resolve_scenario(d);
  EXPECT_EQ(s.training.micro_batch_size, 2);
  EXPECT_EQ(s.training.gradient_accumulation_steps, 32 / (2 * 8));
  EXPECT_NE(warning_on(d, "training.gradient_accumulation_steps").find("--gbs"), std::string::npos);
}

TEST(scenarioKeys, NodesAndNumGpusAreOneOrTheOther) {
  ScenarioInputs in;
  in.flags = {{"model", "llama2-7b"}, {"nodes", "2"}, {"num-gpus", "3"}};
  try {
    scenario_document(in);
    ADD_FAILURE() << "--nodes and --num-gpus together were accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "--num-gpus");
  }
  in.flags = {{"model", "llama2-7b"}, {"num-gpus", "3"}};
  EXPECT_EQ(resolve_scenario(scenario_document(in)).cluster.num_gpus(), 3);
}

// A key given twice in a ds_config keeps its last value, as DeepSpeed's json reader keeps it, and
// is said; in zerosim's own scenario file it is an error.
TEST(scenarioKeys, RepeatedKeysAreSaidInConfigsAndRefusedInScenarios) {
  ScenarioInputs in;
  in.deepspeed_file = ::testing::TempDir() + "/zerosim_keys_repeated_ds.json";
  std::ofstream(in.deepspeed_file)
      << R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1, "stage": 2}})";
  in.flags = {{"model", "llama2-7b"}, {"cluster", "dgx-h100"}};
  const ScenarioDocument d = scenario_document(in);
  EXPECT_NE(warning_on(d, "deepspeed(" + in.deepspeed_file + ").zero_optimization.stage"), "(none)");
  EXPECT_EQ(resolve_scenario(d).zero.stage, 2);
  ScenarioInputs own;
  own.scenario_file = ::testing::TempDir() + "/zerosim_keys_repeated.json";
  std::ofstream(own.scenario_file) << R"({"model": "llama2-7b", "zero": {"stage": 1, "stage": 2}})";
  try {
    scenario_document(own);
    ADD_FAILURE() << "a repeated key in a scenario was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "scenario.zero.stage");
  }
}

// A flag or --set that replaces a ds_config value is said on the config's key; one that leaves
// it as it was says nothing.
TEST(scenarioKeys, FlagsOverADeepSpeedConfigAreSaidOnItsKeys) {
  ScenarioInputs in;
  in.deepspeed_file = scratch_file(
      "ds.json", {{"train_micro_batch_size_per_gpu", 2},
                  {"bf16", {{"enabled", true}}},
                  {"zero_optimization", {{"stage", 3}, {"reduce_bucket_size", 1000}}}});
  in.flags = {{"model", "llama2-7b"}, {"zero", "2"}, {"precision", "bf16"}};
  in.sets = {"zero.reduce_bucket_size=5000"};
  const ScenarioDocument d = scenario_document(in);
  const std::string ds = "deepspeed(" + in.deepspeed_file + ")";
  EXPECT_NE(warning_on(d, ds + ".zero_optimization.stage").find("--zero"), std::string::npos);
  EXPECT_NE(warning_on(d, ds + ".zero_optimization.reduce_bucket_size").find("--set"),
            std::string::npos);
  EXPECT_EQ(warning_on(d, ds + ".bf16"), "(none)");
  EXPECT_EQ(resolve_scenario(d).zero.stage, 2);
}

// ---- training.seq_length: the run's sequence length, for any model ---------------------------

std::string hf_config(const std::string& file) {
  return std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/" + file;
}

bool warns_on(const Scenario& s, const std::string& key_path) {
  for (const InputWarning& w : s.warnings) {
    if (w.key_path == key_path) return true;
  }
  return false;
}

// The workload is the user's to name: a model or a cluster taken from the defaults is said.
TEST(scenarioKeys, DefaultModelAndClusterAreSaid) {
  ScenarioInputs in;
  in.deepspeed_file = scratch_file("ds_only.json", {{"train_micro_batch_size_per_gpu", 1}});
  const Scenario s = resolve_scenario(scenario_document(in));
  EXPECT_TRUE(warns_on(s, "model"));
  EXPECT_TRUE(warns_on(s, "cluster.preset"));
  in.flags = {{"model", "llama2-7b"}, {"cluster", "dgx-h100"}};
  const Scenario named = resolve_scenario(scenario_document(in));
  EXPECT_FALSE(warns_on(named, "model"));
  EXPECT_FALSE(warns_on(named, "cluster.preset"));
  EXPECT_TRUE(warns_on(resolve_scenario(json{{"model", "llama2-7b"}}), "cluster"));
}

TEST(scenarioSeqLength, OverridesAPresetsLengthAndIsEchoed) {
  const json doc = {{"model", "llama2-7b"}, {"training", {{"seq_length", 2048}}}};
  const Scenario s = resolve_scenario(doc);
  EXPECT_EQ(s.model.seq_length, 2048);
  EXPECT_EQ(s.model.name, "llama2-7b");  // the architecture is the preset's
  EXPECT_EQ(s.resolved["training"]["seq_length"], 2048);
  EXPECT_EQ(s.resolved["model"]["seq_length"], 2048);
  expect_round_trip(doc);
  // Without the key the echo still says which length the run has.
  EXPECT_EQ(resolve_scenario(json{{"model", "llama2-7b"}}).resolved["training"]["seq_length"], 4096);
}

TEST(scenarioSeqLength, HfConfigDefaultIsWarnedUntilTheKeyGivesIt) {
  const std::string path = hf_config("qwen2-7b.json");
  const std::string warned = "model(" + path + ").seq_length";
  const Scenario defaulted = resolve_scenario(json{{"model", path}});
  EXPECT_EQ(defaulted.model.seq_length, 4096);  // not max_position_embeddings = 131072
  EXPECT_TRUE(warns_on(defaulted, warned));

  const json doc = {{"model", path}, {"training", {{"seq_length", 8192}}}};
  const Scenario given = resolve_scenario(doc);
  EXPECT_EQ(given.model.seq_length, 8192);
  EXPECT_FALSE(warns_on(given, warned));
  expect_round_trip(doc);
}

TEST(scenarioSeqLength, FlagAndSetReachAnHfModel) {
  const std::string path = hf_config("qwen2-7b.json");
  ScenarioInputs in;
  in.flags = {{"model", path}, {"seq-length", "8192"}};
  EXPECT_EQ(resolve_scenario(scenario_document(in)).model.seq_length, 8192);

  // --set model.seq_length on a config path: the path becomes the object's hf_config base.
  in.flags = {{"model", path}, {"cluster", "dgx-h100"}};
  in.sets = {"model.seq_length=2048"};
  const ScenarioDocument d = scenario_document(in);
  EXPECT_EQ(d.doc["model"], (json{{"hf_config", path}, {"seq_length", 2048}}));
  const Scenario s = resolve_scenario(d);
  EXPECT_EQ(s.model.seq_length, 2048);
  EXPECT_EQ(s.model.name, path);  // giving the length the config lacks changes no architecture
  EXPECT_TRUE(s.warnings.empty());
}

TEST(scenarioSeqLength, LearnedPositionTableBoundsIt) {
  try {
    (void)resolve_scenario(json{{"model", "gpt3-175b"}, {"training", {{"seq_length", 4096}}}});
    ADD_FAILURE() << "4096 tokens past GPT-3's 2048 positions was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "training.seq_length");
  }
}

TEST(scenarioKeys, CaseKeysLandOnTheirScenarioKeys) {
  // Every case key of the table, given in a case, lands on its scenario key.
  const json c = {{"model", "llama2-7b"},
                  {"cluster", {{"preset", "dgx-h100"}, {"num_gpus", 16}}},
                  {"training", {{"global_batch_size", 64}, {"micro_batch_size", 2}}},
                  {"parallel", {{"tp", 2}, {"zero_stage", 3}, {"offload_optimizer", "cpu"},
                                {"zero_hpz_partition_size", 4}}}};
  const json doc = case_scenario(c, "cases[0]");
  EXPECT_EQ(doc["zero"]["stage"], 3);
  EXPECT_EQ(doc["zero"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(doc["zero"]["zero_hpz_partition_size"], 4);
  EXPECT_EQ(doc["parallel"]["tp"], 2);
  EXPECT_EQ(doc["training"]["micro_batch_size"], 2);
  try {
    (void)case_scenario({{"model", "llama2-7b"},
                         {"cluster", {{"preset", "dgx-h100"}}},
                         {"training", json::object()},
                         {"parallel", {{"zero_stag", 3}}}},
                        "cases[4]");
    ADD_FAILURE() << "an unknown case key was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "cases[4].parallel.zero_stag");
    EXPECT_NE(std::string(e.what()).find("zero_stage"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zerosim
