// The framework policies (sim/parallel/framework_policy.h) against what each framework's code and
// documentation say it does; each expectation names its source.
#include <gtest/gtest.h>

#include <limits>

#include "sim/parallel/framework_policy.h"
#include "tests/parallel/common.h"

namespace zerosim::plan_detail {
namespace {

using json = nlohmann::json;
using testing_plan::tiny_doc;

FrameworkPolicy policy_of(json doc, int stage = 0) {
  return framework_policy(resolve_scenario(doc), stage);
}

TEST(frameworkPolicy, PyTorchDdpBuckets) {
  // torch.nn.parallel.DistributedDataParallel: bucket_cap_mb = 25, and the first bucket is capped
  // at 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES); in 16-bit elements: 2^19 and 25 * 2^19.
  const FrameworkPolicy p = policy_of(tiny_doc(8, {{"stage", 0}}));
  EXPECT_EQ(p.grads.when, ReduceWhen::LastBackward);
  EXPECT_EQ(p.grads.first_bucket_limit, 1 << 19);
  EXPECT_EQ(p.grads.bucket_limit, 25 * (1 << 19));
  EXPECT_EQ(p.grads.rule, BucketRule::CloseAtCap);
  EXPECT_TRUE(p.grads.bucket_copy);  // gradient_as_bucket_view defaults to False
  EXPECT_EQ(p.grads.stream, Stream::DpComm);
}

TEST(frameworkPolicy, DeepSpeedStagesReduceWhenTheEngineDoes) {
  // stage_1_and_2.py: stage 2 reduces in the backward hooks of every micro-batch; stage 1 without
  // overlap_comm reduces once, after the last backward (reduce_gradients), on the main stream.
  json doc = tiny_doc(8, {{"stage", 2}});
  EXPECT_EQ(policy_of(doc).grads.when, ReduceWhen::EveryBackward);
  EXPECT_TRUE(policy_of(doc).grads.accumulate_in_temporary);
  doc["zero"] = {{"stage", 1}, {"overlap_comm", false}};
  EXPECT_EQ(policy_of(doc).grads.when, ReduceWhen::AfterBackward);
  EXPECT_EQ(policy_of(doc).grads.stream, Stream::Compute);
  // DeepSpeed >= 0.12 reduces a stage-1/2 bucket with one all-reduce
  // (use_multi_rank_bucket_allreduce); stage 3 reduce-scatters.
  EXPECT_EQ(policy_of(doc).grads.collective, CollectiveKind::AllReduce);
  doc["zero"] = {{"stage", 3}};
  EXPECT_EQ(policy_of(doc).grads.collective, CollectiveKind::ReduceScatter);
  EXPECT_EQ(policy_of(doc).grads.throttle_depth, 2);  // max_param_reduce_events = 2
}

TEST(frameworkPolicy, MegatronReducesFp32GradientsInItsBuckets) {
  // Megatron-LM: bf16 training accumulates and all-reduces gradients in fp32
  // (accumulate_allreduce_grads_in_fp32); buckets of max(40M, 1M x dp) elements; with
  // --overlap-grad-reduce, pipeline stages after the first use a single bucket.
  json doc = tiny_doc(8, {{"stage", 1}});
  doc["parallel"] = {{"framework", "megatron"}, {"pp", 2}};
  EXPECT_EQ(policy_of(doc).grads.bytes_per_element, 4);
  // Without --overlap-grad-reduce Megatron-core sets bucket_size None: one bucket.
  EXPECT_EQ(policy_of(doc).grads.bucket_limit, std::numeric_limits<std::int64_t>::max());
  doc["parallel"]["overlap_grad_reduce"] = true;
  EXPECT_EQ(policy_of(doc, 1).grads.bucket_limit, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(policy_of(doc, 0).grads.bucket_limit, 40'000'000);
  doc["training"]["precision"] = "fp16";
  EXPECT_EQ(policy_of(doc).grads.bytes_per_element, 2);
  // --ddp-bucket-size replaces the default on the first stage; the later ones keep one bucket.
  doc["parallel"]["ddp_bucket_size"] = 1'000'000;
  EXPECT_EQ(policy_of(doc, 0).grads.bucket_limit, 1'000'000);
  EXPECT_EQ(policy_of(doc, 1).grads.bucket_limit, std::numeric_limits<std::int64_t>::max());
  EXPECT_TRUE(resolve_scenario(doc).warnings.empty());
  // Without --overlap-grad-reduce Megatron-core ignores it: said, not silent.
  doc["parallel"]["overlap_grad_reduce"] = false;
  const Scenario unused = resolve_scenario(doc);
  ASSERT_EQ(unused.warnings.size(), 1u);
  EXPECT_EQ(unused.warnings[0].key_path, "parallel.ddp_bucket_size");
  EXPECT_EQ(policy_of(doc, 0).grads.bucket_limit, std::numeric_limits<std::int64_t>::max());
  doc["parallel"]["overlap_grad_reduce"] = true;
  doc["parallel"]["ddp_bucket_size"] = 0;
  EXPECT_EQ(testing_plan::input_error_key(doc), "parallel.ddp_bucket_size");
  doc["parallel"]["ddp_bucket_size"] = 1'000'000;
  doc["parallel"]["framework"] = "deepspeed";
  EXPECT_EQ(testing_plan::input_error_key(doc), "parallel.ddp_bucket_size");
}

// Megatron-core's DDP (distributed_data_parallel.py, training.py get_model at d98e8a6): each model
// chunk has its own gradient buffer; --overlap-grad-reduce splits the first chunk of the first
// pipeline rank into buckets (here every unit its own, --ddp-bucket-size 1) and keeps each later
// chunk in one (disable_bucketing); without it every chunk is one bucket (bucket_size None).
// Four tiny layers over PP 2: the first rank holds the embedding (72192) and layers 0 and 2 with
// the interleaved schedule, layers 0 and 1 without, each layer an attention unit (16768) and an
// MLP unit (33216); its reductions carry every one of its fp32 gradients once.
TEST(frameworkPolicy, MegatronBucketsOnlyTheFirstChunkOfTheFirstStage) {
  const auto reductions = [](json doc) {
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    std::pair<int, Bytes> out{0, 0};
    for (const Op& op : tp.plan.ops) {
      const std::string& name = tp.plan.names[op.name];
      const bool reduction = name.rfind("grad reduce_scatter #", 0) == 0;
      if (op.rank != 0 || op.kind != OpKind::Collective || !reduction) continue;
      ++out.first;
      out.second += op.bytes;
    }
    return out;
  };
  json doc = tiny_doc(4, {{"stage", 1}}, 2);
  doc["model"]["num_layers"] = 4;
  doc["parallel"] = {{"framework", "megatron"}, {"pp", 2}, {"virtual_stages", 2},
                     {"overlap_grad_reduce", true}, {"ddp_bucket_size", 1}};
  const Bytes first_rank = 4 * (72192 + 2 * (16768 + 33216));
  EXPECT_EQ(reductions(doc), std::make_pair(3 + 1, first_rank));  // 3 units, then one bucket
  doc["parallel"]["virtual_stages"] = 1;
  EXPECT_EQ(reductions(doc), std::make_pair(5, first_rank));
  doc["parallel"]["overlap_grad_reduce"] = false;
  EXPECT_EQ(reductions(doc), std::make_pair(1, first_rank));
  doc["parallel"]["virtual_stages"] = 2;
  EXPECT_EQ(reductions(doc), std::make_pair(2, first_rank));  // one per chunk
}

TEST(frameworkPolicy, MegatronGradientsIn16BitsWhenTheUserSaysSo) {
  // Megatron-core's DDP config grad_reduce_in_fp32 = False (Megatron-LM --grad-reduce-in-bf16;
  // Megatron-Bridge's performance recipes set it): main_grad is bf16 and reduced in bf16, and the
  // optimizer step makes the fp32 copy of each updated gradient (.float() of a bf16 buffer: 4
  // bytes per element), which the fp32 buffer did not need.
  json doc = tiny_doc(8, {{"stage", 1}});
  doc["parallel"] = {{"framework", "megatron"}};
  EXPECT_EQ(policy_of(doc).memory.step_bytes_per_element, 0);
  doc["parallel"]["grad_reduce_in_fp32"] = false;
  EXPECT_EQ(policy_of(doc).grads.bytes_per_element, 2);
  EXPECT_EQ(policy_of(doc).grads.reduce_bytes_per_element, 2);
  EXPECT_EQ(policy_of(doc).memory.step_bytes_per_element, 4);
  // fp16 with fp32 reduction asked for (--accumulate-allreduce-grads-in-fp32).
  doc["training"]["precision"] = "fp16";
  doc["parallel"]["grad_reduce_in_fp32"] = true;
  EXPECT_EQ(policy_of(doc).grads.bytes_per_element, 4);
  // Another framework's reduction dtype is its own key.
  doc["parallel"]["framework"] = "deepspeed";
  EXPECT_EQ(testing_plan::input_error_key(doc), "parallel.grad_reduce_in_fp32");
}

TEST(frameworkPolicy, HybridShardingCombinesReplicasAsEachFrameworkDoes) {
  // PyTorch FSDP HYBRID_SHARD all-reduces each reduced shard across replicas right away
  // (_runtime_utils._reduce_grad); DeepSpeed MiCS once per step (mics.py, all_reduce_coalesced
  // over the replication group at the accumulation boundary).
  json fsdp = tiny_doc(16, {{"stage", 3}, {"mics_shard_size", 8}});
  fsdp["parallel"] = {{"framework", "fsdp"}};
  EXPECT_EQ(policy_of(fsdp).grads.replicas, ReplicaReduce::EachBucket);
  json mics = tiny_doc(16, {{"stage", 3}, {"mics_shard_size", 8}});
  EXPECT_EQ(policy_of(mics).grads.replicas, ReplicaReduce::OncePerStep);
  // One shard group spanning the whole DP group leaves nothing to combine.
  mics["zero"]["mics_shard_size"] = 16;
  EXPECT_EQ(policy_of(mics).grads.replicas, ReplicaReduce::None);
}

// nanotron's FP32GradientAccumulator.backward (optim/gradient_accumulator.py): after each
// micro-batch's loss.backward(), fp32_grad.add_(param.grad) for every parameter: 2 bytes read,
// 4 read and 4 written per element, one kernel per tensor. The tiny GPT has 28 tensors (the
// embedding's 2, each layer's 6 + 6, the final LayerNorm's 2). Megatron accumulates in the
// wgrad GEMMs (gradient_accumulation_fusion): no pass of its own.
TEST(frameworkPolicy, NanotronAddsEachMicroBatchsGradientsIntoItsFp32Buffer) {
  const auto folds = [](const json& doc) {
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    int n = 0;
    for (const Op& op : tp.plan.ops) {
      if (op.kind != OpKind::Compute || tp.works[op.work].kind != WorkKind::GradAccumulate) continue;
      ++n;
      EXPECT_EQ(tp.works[op.work].elements, 10 * testing_plan::kTinyPhi);
      EXPECT_EQ(tp.works[op.work].host_ops, 28);
      EXPECT_EQ(op.stream, Stream::Compute);
    }
    return n / tp.plan.num_ranks;
  };
  json doc = tiny_doc(2, {{"stage", 1}}, 3);
  doc["training"]["precision"] = "bf16";
  doc["parallel"]["framework"] = "nanotron";
  EXPECT_EQ(folds(doc), 3);
  // In fp16 nanotron keeps no fp32 accumulator: autograd accumulates into param.grad.
  doc["training"]["precision"] = "fp16";
  EXPECT_EQ(folds(doc), 0);
  doc["training"]["precision"] = "bf16";
  doc["parallel"]["framework"] = "megatron";
  EXPECT_EQ(folds(doc), 0);
}

// DeepSpeed's stage 3 reduces gradients with reduce_scatter_coalesced
// (runtime/comm/coalesced_collectives.py, v0.6.0 to the newest release), which slices every
// tensor of a bucket once per rank in Python before the collective. So a backward slices each of
// the model's tensors once per rank, however the buckets group them: the tiny GPT's 28 tensors
// (see the nanotron test above) x 16 ranks, with buckets smaller than every weight (each weight
// alone, its biases and norms after it) and with one bucket larger than the model.
TEST(frameworkPolicy, DeepSpeedStage3SlicesEveryGradientTensorOncePerRank) {
  const auto slices = [](std::int64_t bucket) {
    json doc = tiny_doc(16, {{"stage", 3}, {"reduce_bucket_size", bucket}});
    doc["parallel"]["framework"] = "deepspeed";
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    std::int64_t ops = 0;
    int buckets = 0;
    for (const Op& op : tp.plan.ops) {
      if (op.rank != 0 || tp.plan.names[op.name].rfind("tensor slices", 0) != 0) continue;
      EXPECT_EQ(tp.works[op.work].kind, WorkKind::HostOverhead);
      ops += tp.works[op.work].elements;
      ++buckets;
    }
    return std::make_pair(ops, buckets);
  };
  const auto [small_ops, small_buckets] = slices(100);
  const auto [one_ops, one_buckets] = slices(1'000'000'000);
  EXPECT_EQ(small_ops, 28 * 16);
  EXPECT_EQ(one_ops, 28 * 16);
  EXPECT_GT(small_buckets, 10);  // the grouping differs, the slices do not
  EXPECT_EQ(one_buckets, 1);
}

// A scenario's layer is priced as its framework's model code runs it (LayerCodePolicy): nanotron's
// Llama layer moves 4 f + 4 (h + 2 kv) + 16 kv - 2 h bytes per token more than the fused layer
// (its eager SwiGLU, the Q, K, V copies, no dropout masks; models/llama.py at 2411b022), Megatron
// and DeepSpeed run the same fused kernels, torchtitan's eager code more unless compiled.
TEST(frameworkPolicy, EachFrameworksLayerCodeIsPricedAsItRuns) {
  const auto bytes = [](const std::string& framework, bool compile) {
    const int stage = framework == "fsdp" ? 3 : 1;
    const Scenario s =
        resolve_scenario(testing_plan::llama8b_one_node(framework, stage, 2, compile));
    return layer_work(s, false).elementwise_bytes;
  };
  const ModelSpec m = model_preset("llama3-8b", "model");
  const double h = m.hidden_size, f = m.ffn_hidden_size, kv = 8 * 128;
  const double tokens = 2.0 * static_cast<double>(m.seq_length);
  const double fused = bytes("deepspeed", false);
  EXPECT_DOUBLE_EQ(bytes("nanotron", false) - fused,
                   tokens * (4 * f + 4 * (h + 2 * kv) + 16 * kv - 2 * h));
  EXPECT_DOUBLE_EQ(bytes("megatron", false), fused);
  EXPECT_GT(bytes("fsdp", false), fused);
  EXPECT_DOUBLE_EQ(bytes("fsdp", true), fused);
}

}  // namespace
}  // namespace zerosim::plan_detail
