// Scenario resolution as DeepSpeed and the Hugging Face integration read a ds_config:
// the batch rule (deepspeed/runtime/config.py, _set_batch_related_parameters and
// _batch_assertion), "auto" bucket sizes (transformers/integrations/deepspeed.py,
// trainer_config_finalize) and zero_optimization defaults (deepspeed/runtime/zero/config.py).
#include <gtest/gtest.h>

#include <set>

#include <cstdlib>
#include <string>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"

namespace zerosim {
namespace {


using json = nlohmann::json;

// A small inline model of hidden size h, on 8 GPUs of one DGX A100 node: dp = 8.
json doc_with(int hidden = 64, json training = json::object(), json zero = json::object()) {
  json d = {{"model",
             {{"num_layers", 1},
              {"hidden_size", hidden},
              {"num_attention_heads", 8},
              {"vocab_size", 1000},
              {"seq_length", 128}}},
            {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 8}}}};
  if (!training.empty()) d["training"] = training;
  if (!zero.empty()) d["zero"] = zero;
  return d;
}

// The key path of the InputError `f` throws, or "" if it throws none.
template <class F>
std::string error_key(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.key_path();
  }
  return "";
}

Scenario with_deepspeed(json doc, const json& ds) {
  ScenarioDocument d;
  d.doc = std::move(doc);
  apply_deepspeed_config(d, ds, "ds.json");
  return resolve_scenario(d);
}

// ---- batch rule: train_batch_size = micro_batch x gradient_accumulation x dp ---------------

struct Batch {
  std::int64_t mbs, gas, gbs;
};
Batch batch_of(const Scenario& s) {
  return {s.training.micro_batch_size, s.training.gradient_accumulation_steps,
          s.training.global_batch_size};
}

TEST(scenarioBatch, AnyTwoDetermineTheThird) {
  // dp = 8.
  // gbs 64, mbs 2 -> gas = 64 / 2 / 8 = 4
  Batch b = batch_of(
      resolve_scenario(doc_with(64, {{"global_batch_size", 64}, {"micro_batch_size", 2}})));
  EXPECT_EQ(b.gas, 4);
  // gbs 64, gas 2 -> mbs = 64 / 8 / 2 = 4
  b = batch_of(resolve_scenario(
      doc_with(64, {{"global_batch_size", 64}, {"gradient_accumulation_steps", 2}})));
  EXPECT_EQ(b.mbs, 4);
  // mbs 2, gas 3 -> gbs = 2 * 3 * 8 = 48
  b = batch_of(resolve_scenario(
      doc_with(64, {{"micro_batch_size", 2}, {"gradient_accumulation_steps", 3}})));
  EXPECT_EQ(b.gbs, 48);
  // All three, consistent: 2 * 4 * 8 = 64.
  b = batch_of(resolve_scenario(doc_with(
      64,
      {{"micro_batch_size", 2}, {"gradient_accumulation_steps", 4}, {"global_batch_size", 64}})));
  EXPECT_EQ(b.gbs, 64);
  EXPECT_EQ(b.mbs, 2);
  EXPECT_EQ(b.gas, 4);
}

TEST(scenarioBatch, OneGivenDefaultsAccumulationToOne) {
  // Only train_batch_size 64: gas = 1, mbs = 64 / 8 = 8.
  Batch b = batch_of(resolve_scenario(doc_with(64, {{"global_batch_size", 64}})));
  EXPECT_EQ(b.gas, 1);
  EXPECT_EQ(b.mbs, 8);
  // Only micro-batch 3: gas = 1, gbs = 3 * 8 = 24.
  b = batch_of(resolve_scenario(doc_with(64, {{"micro_batch_size", 3}})));
  EXPECT_EQ(b.gas, 1);
  EXPECT_EQ(b.gbs, 24);
}

TEST(scenarioBatch, InconsistentOrIndivisibleNamesGlobalBatchSize) {
  // 2 * 4 * 8 = 64 != 63.
  EXPECT_EQ(error_key([] {
              resolve_scenario(doc_with(64, {{"micro_batch_size", 2},
                                             {"gradient_accumulation_steps", 4},
                                             {"global_batch_size", 63}}));
            }),
            "training.global_batch_size");
  // 60 is not a multiple of mbs x dp = 16.
  EXPECT_EQ(error_key([] {
              resolve_scenario(doc_with(64, {{"global_batch_size", 60}, {"micro_batch_size", 2}}));
            }),
            "training.global_batch_size");
  // 60 is not a multiple of gas x dp = 24.
  EXPECT_EQ(error_key([] {
              resolve_scenario(
                  doc_with(64, {{"global_batch_size", 60}, {"gradient_accumulation_steps", 3}}));
            }),
            "training.global_batch_size");
  // 12 is not a multiple of dp = 8.
  EXPECT_EQ(error_key([] {
              resolve_scenario(doc_with(64, {{"global_batch_size", 12}}));
            }),
            "training.global_batch_size");
}

TEST(scenarioBatch, DeepSpeedConfigKeys) {
  // train_batch_size 64 + train_micro_batch_size_per_gpu 2 on dp = 8 -> gas 4.
  Batch b = batch_of(with_deepspeed(
      doc_with(), {{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 2}}));
  EXPECT_EQ(b.gas, 4);
  // train_batch_size 64 + gradient_accumulation_steps 2 -> micro-batch 4.
  b = batch_of(
      with_deepspeed(doc_with(), {{"train_batch_size", 64}, {"gradient_accumulation_steps", 2}}));
  EXPECT_EQ(b.mbs, 4);
  // "auto" leaves the key to the scenario (the HF integration fills it from its arguments).
  b = batch_of(
      with_deepspeed(doc_with(64, {{"micro_batch_size", 2}, {"gradient_accumulation_steps", 3}}),
                     {{"train_batch_size", "auto"},
                      {"train_micro_batch_size_per_gpu", "auto"},
                      {"gradient_accumulation_steps", "auto"}}));
  EXPECT_EQ(b.mbs, 2);
  EXPECT_EQ(b.gas, 3);
  EXPECT_EQ(b.gbs, 48);
  // All three, inconsistent: 2 * 2 * 8 = 32 != 64, refused on the user's key.
  EXPECT_EQ(error_key([] {
              with_deepspeed(doc_with(), {{"train_batch_size", 64},
                                          {"train_micro_batch_size_per_gpu", 2},
                                          {"gradient_accumulation_steps", 2}});
            }),
            "deepspeed(ds.json).train_batch_size");
}

TEST(scenarioBatch, DeepSpeedBatchKeysReplaceTheDocumentsBatchKeys) {
  // A scenario with micro-batch 2 and 8 accumulation steps on two DGX H100 nodes (dp = 16), then
  // a ds_config. DeepSpeed given only train_batch_size = 64 runs gas = 1 and micro-batch
  // 64 / 16 = 4; given 32 and micro-batch 2, gas = 32 / 2 / 16 = 1.
  const json two_nodes = {{"model", "llama2-7b"},
                          {"cluster", {{"preset", "dgx-h100"}, {"nodes", 2}}},
                          {"training", {{"micro_batch_size", 2}, {"gradient_accumulation_steps", 8}}},
                          {"zero", {{"stage", 2}}}};
  Scenario s = with_deepspeed(two_nodes, {{"train_batch_size", 64}});
  EXPECT_EQ(s.parallel.dp, 16);
  EXPECT_EQ(s.training.gradient_accumulation_steps, 1);
  EXPECT_EQ(s.training.micro_batch_size, 4);
  s = with_deepspeed(two_nodes, {{"train_batch_size", 32}, {"train_micro_batch_size_per_gpu", 2}});
  EXPECT_EQ(s.training.gradient_accumulation_steps, 1);
}

// ---- "auto" values of the Hugging Face integration ----------------------------------------

// reduce_bucket_size = h^2, stage3_prefetch_bucket_size = int(0.9 * h * h) (Python int()
// truncates), stage3_param_persistence_threshold = 10 h. With h = 4096:
//   16777216, int(15099494.4) = 15099494, 40960.
TEST(scenarioDeepSpeedAuto, HiddenSizeBasedValues) {
  json ds = {{"zero_optimization",
              {{"stage", 3},
               {"reduce_bucket_size", "auto"},
               {"stage3_prefetch_bucket_size", "auto"},
               {"stage3_param_persistence_threshold", "auto"}}}};
  Scenario s = with_deepspeed(doc_with(4096), ds);
  EXPECT_EQ(s.zero.reduce_bucket_size, 16777216);
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, 15099494);
  EXPECT_EQ(s.zero.stage3_param_persistence_threshold, 40960);
  // Numbers pass through unchanged.
  ds["zero_optimization"]["reduce_bucket_size"] = 12345;
  EXPECT_EQ(with_deepspeed(doc_with(4096), ds).zero.reduce_bucket_size, 12345);
}

TEST(scenarioDeepSpeedAuto, PrefetchBucketTruncatesLikePythonInt) {
  // h = 2048 (GPT-3 1.3B): 0.9 * 2048 * 2048 = 3774873.6, int() -> 3774873.
  Scenario s = with_deepspeed(
      doc_with(2048),
      {{"zero_optimization", {{"stage", 3}, {"stage3_prefetch_bucket_size", "auto"}}}});
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, 3774873);
}

// ---- zero_optimization defaults and precision ----------------------------------------------

TEST(scenarioDeepSpeedDefaults, OverlapCommIsTrueOnlyForStage3) {
  // DeepSpeedZeroConfig.overlap_comm: None -> stage == 3.
  for (int stage = 0; stage <= 3; ++stage) {
    Scenario s = resolve_scenario(doc_with(64, {}, {{"stage", stage}}));
    EXPECT_EQ(s.zero.overlap_comm, stage == 3) << "stage " << stage;
    Scenario d = with_deepspeed(doc_with(), {{"zero_optimization", {{"stage", stage}}}});
    EXPECT_EQ(d.zero.overlap_comm, stage == 3) << "ds_config stage " << stage;
  }
  // An explicit value wins.
  EXPECT_FALSE(resolve_scenario(doc_with(64, {}, {{"stage", 3}, {"overlap_comm", false}}))
                   .zero.overlap_comm);
  EXPECT_TRUE(
      with_deepspeed(doc_with(), {{"zero_optimization", {{"stage", 1}, {"overlap_comm", true}}}})
          .zero.overlap_comm);
}

TEST(scenarioDeepSpeedDefaults, BucketAllReduceAndBucketSizes) {
  Scenario s = resolve_scenario(doc_with(64, {}, {{"stage", 2}}));
  EXPECT_TRUE(s.zero.use_multi_rank_bucket_allreduce);  // DeepSpeed >= 0.12 default
  EXPECT_TRUE(s.zero.reduce_scatter);
  EXPECT_TRUE(s.zero.contiguous_gradients);
  EXPECT_EQ(s.zero.reduce_bucket_size, 500000000);  // DeepSpeed's 5e8
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, 50000000);
  EXPECT_EQ(s.zero.stage3_param_persistence_threshold, 100000);
  EXPECT_EQ(s.zero.stage3_max_live_parameters, 1000000000);
  EXPECT_EQ(s.zero.stage3_max_reuse_distance, 1000000000);
}

TEST(scenarioDeepSpeedDefaults, Precision) {
  EXPECT_EQ(with_deepspeed(doc_with(), {{"fp16", {{"enabled", true}}}}).training.precision,
            Precision::Fp16);
  EXPECT_EQ(with_deepspeed(doc_with(), {{"bf16", {{"enabled", true}}}}).training.precision,
            Precision::Bf16);
  EXPECT_EQ(
      with_deepspeed(doc_with(), {{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", false}}}})
          .training.precision,
      Precision::Fp16);
  const std::string key = error_key([] {
    with_deepspeed(doc_with(), {{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}});
  });
  EXPECT_NE(key.find("fp16"), std::string::npos) << key;
  // Neither enabled: DeepSpeed trains in fp32, which is said where the file is silent or says
  // false; "auto" leaves it to the trainer, which is the scenario's precision.
  auto fp32_warning_on = [](const json& ds) {
    std::string where = "(none)";
    for (const auto& w : with_deepspeed(doc_with(), ds).warnings)
      if (w.message.find("trains in fp32") != std::string::npos) where = w.key_path;
    return where;
  };
  EXPECT_EQ(fp32_warning_on({{"zero_optimization", {{"stage", 1}}}}), "deepspeed(ds.json)");
  EXPECT_EQ(fp32_warning_on({{"fp16", {{"enabled", false}}}}), "deepspeed(ds.json).fp16");
  EXPECT_EQ(fp32_warning_on({{"bf16", {{"enabled", "auto"}}}}), "(none)");
  EXPECT_EQ(fp32_warning_on({{"bf16", {{"enabled", true}}}}), "(none)");
}

TEST(scenarioDeepSpeedDefaults, UnknownKeysNameTheirPath) {
  try {
    with_deepspeed(doc_with(), {{"zero_optimization", {{"stage", 2}, {"overlap_com", true}}}});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "deepspeed(ds.json).zero_optimization.overlap_com");
    EXPECT_NE(std::string(e.what()).find("did you mean 'overlap_comm'"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(error_key([] {
              with_deepspeed(doc_with(), {{"train_batch_sise", 8}});
            }),
            "deepspeed(ds.json).train_batch_sise");
}

TEST(scenarioDeepSpeedOffload, DeviceAndZeroPlusPlusKeysAreRead) {
  const Scenario s = with_deepspeed(
      doc_with(), {{"zero_optimization",
                    {{"stage", 3},
                     {"offload_optimizer", {{"device", "cpu"}, {"pin_memory", true}}},
                     {"offload_param", {{"device", "cpu"}, {"buffer_count", 5}}},
                     {"zero_quantized_weights", true},
                     {"zero_hpz_partition_size", 8}}}});
  EXPECT_EQ(s.zero.offload_optimizer, OffloadDevice::Cpu);
  EXPECT_EQ(s.zero.offload_param, OffloadDevice::Cpu);
  EXPECT_TRUE(s.zero.quantized_weights);
  EXPECT_EQ(s.zero.hpz_partition_size, 8);
  EXPECT_EQ(error_key([] {
              with_deepspeed(doc_with(), {{"zero_optimization",
                                           {{"stage", 2},
                                            {"offload_optimizer", {{"device", "cpu"},
                                                                   {"pin_memroy", true}}}}}});
            }),
            "deepspeed(ds.json).zero_optimization.offload_optimizer.pin_memroy");
  // ZeRO-Offload++'s partial offload is accepted and said; a ratio outside [0, 1] is an error.
  const Scenario partial = with_deepspeed(
      doc_with(), {{"zero_optimization",
                    {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}, {"ratio", 0.3}}}}}});
  bool said = false;
  for (const auto& w : partial.warnings)
    said = said || w.key_path == "deepspeed(ds.json).zero_optimization.offload_optimizer.ratio";
  EXPECT_TRUE(said);
  EXPECT_EQ(error_key([] {
              with_deepspeed(doc_with(), {{"zero_optimization",
                                           {{"stage", 2},
                                            {"offload_optimizer", {{"device", "cpu"},
                                                                   {"ratio", 1.5}}}}}});
            }),
            "deepspeed(ds.json).zero_optimization.offload_optimizer.ratio");
}

// The keys DeepSpeed reads beside "enabled": loss scaling costs nothing zerosim counts (silent);
// fp16 master weights and bf16's immediate update change what the step keeps (said); a key
// DeepSpeed does not read is ignored by it (said). Stage-3 settings at stage 2 are said too.
TEST(scenarioDeepSpeedDefaults, PrecisionKeysAndStageThreeSettingsElsewhereAreSaid) {
  const Scenario s = with_deepspeed(
      doc_with(), {{"fp16",
                    {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16},
                     {"fp16_master_weights_and_grads", true}, {"loss_scael", 0}}},
                   {"zero_optimization",
                    {{"stage", 2}, {"stage3_max_live_parameters", 1}}}});
  std::set<std::string> keys;
  for (const auto& w : s.warnings) keys.insert(w.key_path);
  const std::string ds = "deepspeed(ds.json).";
  EXPECT_TRUE(keys.count(ds + "fp16.fp16_master_weights_and_grads"));
  EXPECT_TRUE(keys.count(ds + "fp16.loss_scael"));
  EXPECT_FALSE(keys.count(ds + "fp16.loss_scale"));
  EXPECT_FALSE(keys.count(ds + "fp16.initial_scale_power"));
  EXPECT_TRUE(keys.count(ds + "zero_optimization.stage3_max_live_parameters"));
}

// DeepSpeed's stage 1/2 optimizer offloads to CPU memory for any device but none
// (runtime/zero/stage_1_and_2.py, cpu_offload); NVMe swapping is stage 3's (ZeRO-Infinity).
TEST(scenarioDeepSpeedOffload, NvmeAtStagesOneAndTwoIsCpuOffload) {
  const std::string device = "deepspeed(ds.json).zero_optimization.offload_optimizer.device";
  auto offload_to_nvme = [](int stage) {
    return with_deepspeed(doc_with(), {{"zero_optimization",
                                        {{"stage", stage},
                                         {"offload_optimizer", {{"device", "nvme"}}}}}});
  };
  for (int stage : {1, 2}) {
    const Scenario s = offload_to_nvme(stage);
    EXPECT_EQ(s.zero.offload_optimizer, OffloadDevice::Cpu) << stage;
    bool said = false;
    for (const auto& w : s.warnings) said = said || w.key_path == device;
    EXPECT_TRUE(said) << stage;
  }
  const Scenario infinity = offload_to_nvme(3);
  EXPECT_EQ(infinity.zero.offload_optimizer, OffloadDevice::Nvme);
  for (const auto& w : infinity.warnings) EXPECT_NE(w.key_path, device) << w.message;
}

// DeepSpeed's config model fills a stage-3 field by its own name or by its stage3_ alias
// (runtime/config_utils.py, populate by field name): both are read, and naming one twice is an
// error on the user's key.
TEST(scenarioDeepSpeedDefaults, Stage3FieldNamesAreTheirAliases) {
  const Scenario s = with_deepspeed(doc_with(), {{"zero_optimization",
                                                   {{"stage", 3},
                                                    {"prefetch_bucket_size", 1234},
                                                    {"max_live_parameters", 5678}}}});
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, 1234);
  EXPECT_EQ(s.zero.stage3_max_live_parameters, 5678);
  EXPECT_EQ(error_key([] {
              with_deepspeed(doc_with(), {{"zero_optimization",
                                           {{"stage", 3},
                                            {"prefetch_bucket_size", 1},
                                            {"stage3_prefetch_bucket_size", 2}}}});
            }),
            "deepspeed(ds.json).zero_optimization.prefetch_bucket_size");
}

// Keys of recent DeepSpeed configs (DeepSpeedConfig, DeepSpeedZeroConfig) are accepted, each with
// a warning on its path, never refused as unknown.
TEST(scenarioDeepSpeedDefaults, RecentKeysAreAcceptedWithAWarning) {
  const Scenario s = with_deepspeed(
      doc_with(), {{"disable_python_gc", true},
                   {"zero_optimization",
                    {{"stage", 3},
                     {"enable_sanity_checks", true},
                     {"stage3_allgather_sequential", true},
                     {"save_muon_momentum_buffer_in_memory", true},
                     {"leaf_module", {{"classes", json::array()}}},
                     {"zenflow", {{"topk_ratio", 0.1}}}}}});
  for (const char* key : {"disable_python_gc", "zero_optimization.enable_sanity_checks",
                          "zero_optimization.stage3_allgather_sequential",
                          "zero_optimization.save_muon_momentum_buffer_in_memory",
                          "zero_optimization.leaf_module", "zero_optimization.zenflow"}) {
    bool warned = false;
    for (const InputWarning& w : s.warnings) {
      if (w.key_path == std::string("deepspeed(ds.json).") + key) warned = true;
    }
    EXPECT_TRUE(warned) << key;
  }
}

// No warning names the ds_config option `key`: it was read, not accepted as not simulated.
void expect_not_warned(const Scenario& s, const char* key) {
  for (const InputWarning& w : s.warnings) {
    EXPECT_EQ(w.key_path.find(key), std::string::npos) << w.message;
  }
}

// activation_checkpointing.synchronize_checkpoint_boundary synchronizes the device at every
// checkpointed layer (DeepSpeed's checkpointing.py, SYNCHRONIZE): timing, not numerics, and not
// simulated, so the warning on the user's key says what is left out.
TEST(scenarioDeepSpeedCheckpointing, SynchronizeCheckpointBoundaryIsWarnedAsASync) {
  const json ds = {{"zero_optimization", {{"stage", 1}}},
                   {"activation_checkpointing", {{"synchronize_checkpoint_boundary", true}}}};
  const Scenario s = with_deepspeed(doc_with(), ds);
  int warned = 0;
  for (const InputWarning& w : s.warnings) {
    if (w.key_path != "deepspeed(ds.json).activation_checkpointing.synchronize_checkpoint_boundary")
      continue;
    ++warned;
    EXPECT_NE(w.message.find("not simulated"), std::string::npos) << w.message;
    EXPECT_NE(w.message.find("synchronize"), std::string::npos) << w.message;
    EXPECT_EQ(w.message.find("numerics"), std::string::npos) << w.message;
  }
  EXPECT_EQ(warned, 1);
  expect_not_warned(with_deepspeed(doc_with(), {{"activation_checkpointing",
                                                 {{"synchronize_checkpoint_boundary", false}}}}),
                    "synchronize_checkpoint_boundary");
}

// activation_checkpointing.cpu_checkpointing is DeepSpeed's checkpoint offload: read into
// parallel.cpu_checkpointing with the recomputation it implies, not warned about; a value that is
// not a bool, or the offload without full recomputation, is an error on the user's key.
TEST(scenarioDeepSpeedCheckpointing, CpuCheckpointingIsRead) {
  const json ds = {{"zero_optimization", {{"stage", 3}}},
                   {"activation_checkpointing", {{"cpu_checkpointing", true}}}};
  const Scenario s = with_deepspeed(doc_with(), ds);
  EXPECT_TRUE(s.parallel.cpu_checkpointing);
  EXPECT_EQ(s.parallel.recompute, Recompute::Full);
  expect_not_warned(s, "cpu_checkpointing");
  EXPECT_FALSE(with_deepspeed(doc_with(), {{"activation_checkpointing",
                                            {{"cpu_checkpointing", false}}}})
                   .parallel.cpu_checkpointing);
  EXPECT_EQ(error_key([&] {
              json bad = ds;
              bad["activation_checkpointing"]["cpu_checkpointing"] = "yes";
              with_deepspeed(doc_with(), bad);
            }),
            "deepspeed(ds.json).activation_checkpointing.cpu_checkpointing");
  EXPECT_EQ(error_key([&] {
              json selective = doc_with();
              selective["parallel"] = {{"recompute", "selective"}};
              with_deepspeed(selective, ds);
            }),
            "deepspeed(ds.json).activation_checkpointing.cpu_checkpointing");
}

// activation_checkpointing.partition_activations (the checkpoints split over the TP group) is
// read the same way: no warning, a non-bool refused on the user's key.
TEST(scenarioDeepSpeedCheckpointing, PartitionActivationsIsRead) {
  const json ds = {{"zero_optimization", {{"stage", 1}}},
                   {"activation_checkpointing", {{"partition_activations", true}}}};
  const Scenario s = with_deepspeed(doc_with(), ds);
  EXPECT_TRUE(s.parallel.partition_activations);
  EXPECT_EQ(s.parallel.recompute, Recompute::Full);
  expect_not_warned(s, "partition_activations");
  EXPECT_EQ(error_key([&] {
              json bad = ds;
              bad["activation_checkpointing"]["partition_activations"] = 1;
              with_deepspeed(doc_with(), bad);
            }),
            "deepspeed(ds.json).activation_checkpointing.partition_activations");
  EXPECT_EQ(error_key([&] {
              json typo = ds;
              typo["activation_checkpointing"]["partition_activation"] = true;
              with_deepspeed(doc_with(), typo);
            }),
            "deepspeed(ds.json).activation_checkpointing.partition_activation");
}

// sequence_parallel_size (DeepSpeed's Ulysses degree) becomes context parallelism with the
// all-to-all exchange, each value reported against the user's key; 1 leaves it off; a scenario
// that gives parallel.cp itself keeps it.
TEST(scenarioDeepSpeedUlysses, SequenceParallelSizeIsContextParallelismByAllToAll) {
  const Scenario s = with_deepspeed(doc_with(), {{"sequence_parallel_size", 2}});
  EXPECT_EQ(s.parallel.cp, 2);
  EXPECT_EQ(s.parallel.cp_comm_type, CpCommType::A2a);
  EXPECT_EQ(s.parallel.dp, 4);
  int reported = 0;
  for (const InputWarning& w : s.warnings) {
    if (w.key_path == "deepspeed(ds.json).sequence_parallel_size") ++reported;
  }
  EXPECT_EQ(reported, 2);
  EXPECT_EQ(with_deepspeed(doc_with(), {{"sequence_parallel_size", 1}}).parallel.cp, 1);
  json given = doc_with();
  given["parallel"] = {{"cp", 4}};
  const Scenario kept = with_deepspeed(given, {{"sequence_parallel_size", 2}});
  EXPECT_EQ(kept.parallel.cp, 4);
  EXPECT_EQ(kept.parallel.cp_comm_type, CpCommType::A2a);
  // Its gradient dtype (DeepSpeed lowercases it), which replaces communication_data_type, with
  // a warning on the key it replaces; without sequence parallelism a warning that it does
  // nothing.
  const Scenario typed = with_deepspeed(doc_with(), {{"sequence_parallel_size", 2},
                                                     {"communication_data_type", "fp16"},
                                                     {"seq_parallel_communication_data_type", "BF16"}});
  EXPECT_EQ(typed.zero.seq_parallel_communication_dtype, CommDtype::Bf16);
  const auto warned = [](const Scenario& sc, const std::string& key) {
    for (const InputWarning& w : sc.warnings) {
      if (w.key_path == key) return true;
    }
    return false;
  };
  EXPECT_TRUE(warned(typed, "deepspeed(ds.json).communication_data_type"));
  EXPECT_TRUE(warned(with_deepspeed(doc_with(), {{"seq_parallel_communication_data_type", "fp32"}}),
                     "deepspeed(ds.json).seq_parallel_communication_data_type"));
  EXPECT_EQ(error_key([] { with_deepspeed(doc_with(), {{"sequence_parallel_size", 0}}); }),
            "deepspeed(ds.json).sequence_parallel_size");
  EXPECT_EQ(error_key([] { with_deepspeed(doc_with(), {{"sequence_parallel_size", "2"}}); }),
            "deepspeed(ds.json).sequence_parallel_size");
}

}  // namespace
}  // namespace zerosim

namespace zerosim {
namespace {

// pipeline.pipe_partitioned / grad_partitioned (DeepSpeed's PipelineEngine, default true) are
// parallel.scatter_gather_tensors_in_pipeline; one of them off splits neither direction, with a
// warning on that key; the engine's other keys are accepted with a warning, and DeepSpeed takes
// any key there (get_pipeline_config), so none is refused.
TEST(scenarioDeepSpeedPipeline, PartitionedKeysAreTheScatterGather) {
  json doc = doc_with();
  doc["model"]["num_layers"] = 2;
  doc["parallel"] = {{"tp", 2}, {"pp", 2}};
  auto scatter_gather = [&](const json& pipeline) {
    return with_deepspeed(doc, {{"pipeline", pipeline}});
  };
  const auto warned = [](const Scenario& sc, const std::string& key) {
    for (const InputWarning& w : sc.warnings) {
      if (w.key_path == key) return true;
    }
    return false;
  };
  EXPECT_TRUE(scatter_gather(json::object()).parallel.scatter_gather_tensors_in_pipeline);
  const Scenario off = scatter_gather({{"pipe_partitioned", false}, {"grad_partitioned", false}});
  EXPECT_FALSE(off.parallel.scatter_gather_tensors_in_pipeline);
  EXPECT_FALSE(warned(off, "deepspeed(ds.json).pipeline.pipe_partitioned"));
  const Scenario half = scatter_gather({{"grad_partitioned", false}});
  EXPECT_FALSE(half.parallel.scatter_gather_tensors_in_pipeline);
  EXPECT_TRUE(warned(half, "deepspeed(ds.json).pipeline.grad_partitioned"));
  const Scenario other = scatter_gather({{"activation_checkpoint_interval", 1}, {"any_key", 3}});
  EXPECT_TRUE(other.parallel.scatter_gather_tensors_in_pipeline);
  EXPECT_TRUE(warned(other, "deepspeed(ds.json).pipeline.activation_checkpoint_interval"));
  EXPECT_TRUE(warned(other, "deepspeed(ds.json).pipeline.any_key"));
  EXPECT_EQ(error_key([&] { scatter_gather({{"pipe_partitioned", "no"}}); }),
            "deepspeed(ds.json).pipeline.pipe_partitioned");
}

}  // namespace
}  // namespace zerosim
