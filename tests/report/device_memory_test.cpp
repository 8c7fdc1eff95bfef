// Memory beyond model states and activations, each mechanism against its closed form from the
// framework's or the library's code (sources in the comments of sim/parallel/*_policy.cpp,
// sim/memory/memory_constants.h and sim/cluster/gpu_generation.cpp), on the tiny model:
//   h = 64, L = 2, V = 1000, s = 128, micro-batch 1, Φ = 172288 (tests/parallel/common.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/collective/nccl_model.h"
#include "sim/run/published.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using json = nlohmann::json;
using testing_plan::kTinyPhi;
using testing_plan::tiny_model;

constexpr std::int64_t kLogits = 128 * 1 * 1000;  // s x b x V of one micro-batch, TP 1
constexpr Bytes kMiB = Bytes{1} << 20;

json doc(const std::string& framework, int gpus, int stage, const std::string& preset = "dgx-a100-80gb") {
  return {{"model", tiny_model()},
          {"cluster", {{"preset", preset}, {"num_gpus", gpus}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 1}}},
          {"parallel", {{"framework", framework}}},
          {"zero", {{"stage", stage}}}};
}

// Bytes allocated by rank 0's ops named `name` ("alloc X"), summed.
Bytes allocated(const TrainingPlan& tp, const std::string& name) {
  Bytes b = 0;
  for (const Op& op : tp.plan.ops) {
    if (op.rank == 0 && op.kind == OpKind::Alloc && tp.plan.names[op.name] == "alloc " + name) {
      b += op.bytes;
    }
  }
  return b;
}

// The sizes of rank 0's allocations named `name` ("alloc X"), one entry per allocation.
std::multiset<Bytes> allocations(const TrainingPlan& tp, const std::string& name) {
  std::multiset<Bytes> sizes;
  for (const Op& op : tp.plan.ops) {
    if (op.rank == 0 && op.kind == OpKind::Alloc && tp.plan.names[op.name] == "alloc " + name) {
      sizes.insert(op.bytes);
    }
  }
  return sizes;
}

Bytes cat(const MemoryUsage& m, MemCategory c) { return m.category_max[static_cast<int>(c)]; }

TEST(reportDeviceMemory, LossChainPerFramework) {
  // With one micro-batch and no pipeline the activations peak at the loss, when every layer's
  // activations are held: their maximum is the layers' plus the loss's peak per logit element.
  //   Megatron (and Megatron-DeepSpeed's models): 16-bit logits + in-place fp32 copy, 6 B in the
  //     forward; saved softmax 4 B + the cast's 16-bit gradient 2 B in the backward: 6.
  //   nanotron: fp32 cast 4 + `logits - max` 4 = 8 forward (the bf16 logits are gone by then);
  //     4 + 2 backward: 8.
  //   torchtitan (FSDP): bf16 2 + fp32 4 + log_softmax out 4 = 10 forward; saved output 4 +
  //     nll_loss grad 4 + log_softmax grad 4 = 12 backward: 12.
  const std::map<std::string, Bytes> peak_per_logit = {
      {"deepspeed", 6}, {"megatron", 6}, {"nanotron", 8}, {"fsdp", 12}};
  for (const auto& [framework, per_logit] : peak_per_logit) {
    Scenario s = resolve_scenario(doc(framework, 1, framework == "fsdp" ? 3 : 0));
    StepReport r = memory_report(s);
    const TrainingPlan tp = build_training_plan(s, true);
    const Bytes layers = allocated(tp, "activations");
    EXPECT_EQ(cat(r.memory, MemCategory::Activations) - layers, per_logit * kLogits) << framework;
    EXPECT_EQ(allocated(tp, "logits"), 4 * kLogits) << framework;  // the saved softmax
  }
}

TEST(reportDeviceMemory, TorchtitansLossParallelKeepsMoreFp32CopiesUnderTensorParallelism) {
  // With TP torchtitan runs its loss under loss_parallel(): the vocab-sharded log_softmax keeps
  // bf16 logits 2 + their fp32 copy 4 + `x - x_max` 4 beside exp() or its output 4 = 14 B per
  // logit in the forward; the fused backward zeros_like 4 + exp 4 + their sum 4 beside the saved
  // output 4 = 16. Over TP 2 the logits are s x b x V / 2.
  json two = doc("fsdp", 2, 3);
  two["parallel"]["tp"] = 2;
  Scenario s = resolve_scenario(two);
  const TrainingPlan tp = build_training_plan(s, true);
  const Bytes logits = kLogits / 2;
  EXPECT_EQ(allocations(tp, "loss forward temporaries"),
            (std::multiset<Bytes>{2 * logits, 4 * logits, 4 * logits}));
  EXPECT_EQ(allocations(tp, "loss backward temporaries"),
            (std::multiset<Bytes>{4 * logits, 4 * logits, 4 * logits}));
  EXPECT_EQ(allocated(tp, "logits"), 4 * logits);  // the saved log-softmax
  const StepReport r = memory_report(s);
  EXPECT_EQ(cat(r.memory, MemCategory::Activations) - allocated(tp, "activations"), 16 * logits);
}

TEST(reportDeviceMemory, LayerActivationsAndLossTemporariesAreTensorsForTheAllocator) {
  // Each layer's activations reach the caching allocator as the model's tensors (as torchtitan's
  // layer keeps them: no dropout masks), which sum to the allocation; torchtitan's loss
  // allocates its 16-bit logits and fp32 copy as two tensors (2 and 4 bytes per logit), its
  // backward two fp32 gradients.
  Scenario s = resolve_scenario(doc("fsdp", 1, 3));
  const TrainingPlan tp = build_training_plan(s, true);
  LayerSaves torchtitan;
  torchtitan.dropout_masks = false;
  const std::vector<double> tensors = activation_tensors_per_layer(
      s.model, s.training.micro_batch_size, s.parallel.tp, s.parallel.sequence_parallel,
      s.parallel.recompute, s.training.flash_attention, false, s.parallel.cp, 0, {}, false,
      torchtitan);
  int layers = 0;
  for (const Op& op : tp.plan.ops) {
    if (op.rank != 0 || op.kind != OpKind::Alloc) continue;
    if (tp.plan.names[op.name] == "alloc activations") {
      ++layers;
      const std::vector<Bytes>& sizes = tp.plan.alloc_tensors.at({op.name, op.bytes});
      EXPECT_EQ(sizes.size(), tensors.size());
      Bytes sum = 0;
      for (Bytes b : sizes) sum += b;
      EXPECT_EQ(sum, op.bytes);
    }
  }
  EXPECT_EQ(layers, s.model.num_layers);
  EXPECT_EQ(allocations(tp, "loss forward temporaries"),
            (std::multiset<Bytes>{2 * kLogits, 4 * kLogits}));
  EXPECT_EQ(allocations(tp, "loss backward temporaries"),
            (std::multiset<Bytes>{4 * kLogits, 4 * kLogits}));
}

TEST(reportDeviceMemory, NanotronKeepsDdpBucketsAtAnyStageWithDataParallelism) {
  // trainer.py wraps the model in DistributedDataParallel when DP > 1 at ZeRO-0 and ZeRO-1 alike;
  // gradient_as_bucket_view=False keeps a 16-bit bucket copy of every gradient: 2Φ.
  for (int stage : {0, 1}) {
    TrainingPlan dp8 = build_training_plan(resolve_scenario(doc("nanotron", 8, stage)), true);
    EXPECT_EQ(allocated(dp8, "ddp_buckets"), 2 * kTinyPhi) << "stage " << stage;
    TrainingPlan dp1 = build_training_plan(resolve_scenario(doc("nanotron", 1, stage)), true);
    EXPECT_EQ(allocated(dp1, "ddp_buckets"), 0) << "stage " << stage;
  }
}

TEST(reportDeviceMemory, NanotronHoldsEveryBf16GradientUntilTheBackwardEnds) {
  // FP32GradientAccumulator.backward: loss.backward() leaves a bf16 param.grad on every
  // parameter (2Φ at its end) before _accumulate_grad folds them into the fp32 buffer. On one GPU
  // (no DDP buckets, nothing at the fused step) the buffers peak at the cuBLAS workspace + 2Φ.
  Scenario s = resolve_scenario(doc("nanotron", 1, 0));
  StepReport r = memory_report(s);
  const Bytes workspace = 2 * 4096 * 1024 + 8 * 16 * 1024;  // Ampere (CublasHandlePool.cpp)
  EXPECT_EQ(cat(r.memory, MemCategory::Buffers), workspace + 2 * kTinyPhi);
}

TEST(reportDeviceMemory, OptimizerStepTemporariesPerFramework) {
  // Bytes per updated parameter allocated for the step, on 8 GPUs (partition Φ/8):
  //   DeepSpeed ZeRO-1: flat 16-bit partition + its fp32 copy = 6;
  //   Megatron bf16: main_grad is already fp32, FusedAdam keeps nothing = 0; fp16: the fp32 copy
  //     of the 16-bit main_grad = 4;
  //   nanotron: the fp32 accumulator is the gradient, fused AdamW = 0;
  //   torchtitan FSDP: foreach AdamW's sqrt of the second moments = 4.
  const std::int64_t part = kTinyPhi / 8;
  struct Case {
    std::string framework;
    int stage;
    std::string precision;
    Bytes bytes;
  };
  for (const Case& c : {Case{"deepspeed", 1, "bf16", 6 * part}, Case{"megatron", 1, "bf16", 0},
                        Case{"megatron", 1, "fp16", 4 * part}, Case{"nanotron", 1, "bf16", 0},
                        Case{"fsdp", 3, "bf16", 4 * part}}) {
    json d = doc(c.framework, 8, c.stage);
    d["training"]["precision"] = c.precision;
    const TrainingPlan tp = build_training_plan(resolve_scenario(d), true);
    EXPECT_EQ(allocated(tp, "fp32 step gradients"), c.bytes) << c.framework << " " << c.precision;
  }
}

TEST(reportDeviceMemory, MegatronDistributedOptimizerBytesPerParameter) {
  // Megatron-LM README, bytes per parameter with the distributed optimizer over d ranks:
  //   bf16 params, fp32 grads: 6 + 12/d;  fp16 params, fp16 grads: 4 + 16/d (the 16/d includes the
  //   fp32 gradient copy the step makes).
  const std::int64_t d = 8;
  for (const std::string precision : {"bf16", "fp16"}) {
    json j = doc("megatron", 8, 1);
    j["training"]["precision"] = precision;
    const TrainingPlan tp = build_training_plan(resolve_scenario(j), true);
    const ModelStateBytes& ms = tp.stages.at(0).model_states;
    const Bytes at_step = ms.params + ms.grads + ms.optimizer_states +
                          allocated(tp, "fp32 step gradients");
    const Bytes readme = precision == "bf16" ? 6 * kTinyPhi + 12 * kTinyPhi / d
                                             : 4 * kTinyPhi + 16 * kTinyPhi / d;
    EXPECT_EQ(at_step, readme) << precision;
  }
}

TEST(reportDeviceMemory, CublasWorkspacePerGeneration) {
  // CublasHandlePool.cpp: ":4096:8" = 32 MiB on sm90, ":4096:2:16:8" = 8.125 MiB before.
  const TrainingPlan a100 = build_training_plan(resolve_scenario(doc("deepspeed", 1, 0)), true);
  EXPECT_EQ(allocated(a100, "cublas_workspace"), 8 * kMiB + kMiB / 8);
  const TrainingPlan h100 =
      build_training_plan(resolve_scenario(doc("deepspeed", 8, 0, "dgx-h100")), true);
  EXPECT_EQ(allocated(h100, "cublas_workspace"), 32 * kMiB);
}

TEST(reportDeviceMemory, OutsideTheAllocatorContextAndNcclBuffers) {
  // The CUDA context with lazy loading: PyTorch PR #86509's 287,047,680 bytes less the 20 MiB
  // segment its 6.4 MB test tensor took. NCCL: LL 512 KiB + LL128 4.6875 MiB + Simple 4 MiB =
  // 9,633,792 bytes per connection, one connection's worth per ring channel of every
  // communicator the rank runs collectives on.
  json j = doc("megatron", 8, 1);
  j["parallel"]["tp"] = 2;  // TP groups of 2, DP groups of 4 on one DGX A100
  Scenario s = resolve_scenario(j);
  StepReport r = memory_report(s);
  EXPECT_EQ(r.cuda_context_bytes, 287'047'680 - 20 * kMiB);
  const nccl::NcclModel model(s.cluster);
  const std::int32_t tp_group[] = {0, 1}, dp_group[] = {0, 2, 4, 6};
  const Bytes connection = 512 * 1024 + 120 * 640 * 8 * 8 + 4 * kMiB;
  ASSERT_EQ(connection, 9'633'792);
  EXPECT_EQ(r.nccl_buffer_bytes, (model.comm(tp_group).comm_channels +
                                  model.comm(dp_group).comm_channels) * connection);
  EXPECT_EQ(r.memory.outside_allocator, r.cuda_context_bytes + r.nccl_buffer_bytes);
  EXPECT_EQ(r.memory.nvidia_smi_peak(), r.memory.reserved_peak + r.memory.outside_allocator);
  // One GPU runs no collective; a pipeline's send/recv pairs are not counted.
  EXPECT_EQ(memory_report(resolve_scenario(doc("megatron", 1, 0))).nccl_buffer_bytes, 0);
  json pp = doc("megatron", 2, 0);
  pp["parallel"]["pp"] = 2;
  EXPECT_EQ(memory_report(resolve_scenario(pp)).nccl_buffer_bytes, 0);
}

TEST(reportDeviceMemory, ReservedKeepsEachStreamsPeak) {
  // The caching allocator caches a freed block for the stream that allocated it. Two blocks of
  // 10 MiB, one allocated on the DP stream and freed, then one on the compute stream: 10 MiB
  // allocated at most, 20 MiB reserved.
  Plan plan;
  plan.num_ranks = 1;
  plan.names = {"alloc a", "free a", "alloc b", "free b"};
  auto op = [](OpKind k, Stream st, std::int32_t name) {
    Op o;
    o.kind = k;
    o.stream = st;
    o.name = name;
    o.bytes = 10 * kMiB;
    return o;
  };
  plan.ops = {op(OpKind::Alloc, Stream::DpComm, 0), op(OpKind::Free, Stream::Compute, 1),
              op(OpKind::Alloc, Stream::Compute, 2), op(OpKind::Free, Stream::Compute, 3)};
  EngineResult r;
  r.order = {0, 1, 2, 3};
  r.start = r.end = {0, 1, 2, 3};
  MemoryUsage u = replay_memory(plan, r, 0, false);
  EXPECT_EQ(u.peak, 10 * kMiB);
  EXPECT_EQ(u.reserved_peak, 20 * kMiB);
  // On one stream the second allocation reuses the cached block. A request of 10 MiB or more
  // gets a segment rounded up to 2 MiB (caching_allocator.h).
  plan.ops[0].stream = Stream::Compute;
  plan.ops[0].bytes = plan.ops[1].bytes = 10 * kMiB + 1;
  u = replay_memory(plan, r, 0, false);
  EXPECT_EQ(u.reserved_peak, 12 * kMiB);
}

TEST(reportDeviceMemory, FitsUsesWhatTheGpuReallyHolds) {
  // A GPU one byte larger than the reserved peak holds the tensors but not the CUDA context.
  json j = doc("deepspeed", 1, 0);
  j["sim"] = {{"allow_oom", true}};
  const StepReport first = memory_report(resolve_scenario(j));
  j["cluster"]["gpu"] = {{"hbm_bytes", std::to_string(first.memory.reserved_peak + 1) + "B"}};
  const StepReport small = memory_report(resolve_scenario(j));
  EXPECT_EQ(small.memory.reserved_peak, first.memory.reserved_peak);
  EXPECT_FALSE(small.fits_in_memory);
  j["cluster"]["gpu"] = {{"hbm_bytes", std::to_string(first.memory.nvidia_smi_peak()) + "B"}};
  EXPECT_TRUE(memory_report(resolve_scenario(j)).fits_in_memory);
}

TEST(reportDeviceMemory, PublishedCaseComparesTheMetricItsSourceMeasured) {
  // validate-published reads measured.peak_memory_metric and .peak_memory_rank and compares the
  // matching prediction; here a made-up measurement of 1 GiB on a nanotron run with PP 2.
  json c = {{"id", "test-memory"},
            {"model", tiny_model()},
            {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 2}}},
            {"training", {{"global_batch_size", 2}, {"micro_batch_size", 1}, {"precision", "bf16"}}},
            {"parallel", {{"tp", 1}, {"pp", 2}, {"dp", 1}, {"zero_stage", 0}, {"framework", "nanotron"}}},
            {"measured", {{"step_time_s", 1.0}, {"peak_memory_gb", 1.0}}}};
  json cases = {{"format", "zerosim-published-cases/1"}, {"cases", json::array()}};
  json scenario = {{"model", tiny_model()},
                   {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 2}}},
                   {"training", {{"global_batch_size", 2}, {"micro_batch_size", 1}}},
                   {"parallel", {{"pp", 2}, {"framework", "nanotron"}}},
                   {"zero", {{"stage", 0}}},
                   {"sim", {{"allow_oom", true}}}};
  const Simulation sim = simulate_step(resolve_scenario(scenario));
  const auto& stages = sim.report.memory_per_stage;
  for (const auto& [metric, rank] : std::map<std::string, std::string>{
           {"allocated", "max"}, {"reserved", "0"}, {"nvidia-smi", "0"}}) {
    c["measured"]["peak_memory_metric"] = metric;
    c["measured"]["peak_memory_rank"] = rank;
    cases["cases"] = json::array({c});
    const CaseResult r = validate_published(cases).cases.at(0);
    ASSERT_FALSE(r.skipped) << r.skip_reason;
    Bytes expect = 0;
    if (metric == "allocated") {
      expect = std::max(stages.at(0).peak, stages.at(1).peak);
    } else if (metric == "reserved") {
      expect = stages.at(0).reserved_peak;
    } else {
      expect = stages.at(0).nvidia_smi_peak();
    }
    EXPECT_DOUBLE_EQ(r.predicted_peak_matching_gib, static_cast<double>(expect) / kGiB) << metric;
    EXPECT_EQ(r.peak_metric, metric);
    EXPECT_DOUBLE_EQ(r.memory_error_pct, 100.0 * (r.predicted_peak_matching_gib - 1.0)) << metric;
  }
}


TEST(reportDeviceMemory, DeepSpeedStage3GathersThroughAFlatBufferAndCopiesEachParameterOut) {
  // DeepSpeed's stage 3 (partition_parameters.py, all_gather_coalesced and
  // AllGatherCoalescedHandle.wait, v0.6.0 to the newest release): a call of several parameters
  // all-gathers into one flat buffer of partition_sz x world elements, partition_sz the sum of
  // their pieces ceil(numel / world), then copies each parameter out into a tensor of its own
  // (torch.cat) and drops the buffer, all on the all-gather stream; autograd leaves one gradient
  // tensor per parameter. Tiny model on 5 GPUs (pieces padded), nothing persistent, a prefetch
  // bucket that spans modules. FSDP's flat parameters are one block each.
  json d = doc("deepspeed", 5, 3);
  d["zero"]["stage3_param_persistence_threshold"] = 0;
  d["zero"]["stage3_prefetch_bucket_size"] = 40000;
  const TrainingPlan ds = build_training_plan(resolve_scenario(d), true);
  const Plan& plan = ds.plan;
  const std::int64_t world = 5;
  int flats = 0;
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& flat = plan.ops[id];
    if (flat.rank != 0 || flat.kind != OpKind::Alloc ||
        plan.names[flat.name] != "alloc gather flat buffer")
      continue;
    ++flats;
    // The parameters it holds are copied out (alloc gathered <unit>, one tensor each) before it
    // is released, later on the same stream.
    Bytes padded = 0;
    std::size_t tensors = 0;
    OpId release = kNoOp;
    for (OpId j = id + 1; j < plan.ops.size() && release == kNoOp; ++j) {
      const Op& op = plan.ops[j];
      if (op.rank != 0 || op.stream != flat.stream) continue;
      const std::string& name = plan.names[op.name];
      if (name == "free gather flat buffer") release = j;
      if (op.kind != OpKind::Alloc || name.rfind("alloc gathered ", 0) != 0) continue;
      const auto split = plan.alloc_tensors.find({op.name, op.bytes});
      const std::vector<Bytes> sizes = split == plan.alloc_tensors.end()
                                           ? std::vector<Bytes>{op.bytes}
                                           : split->second;
      Bytes sum = 0;
      for (Bytes t : sizes) {
        ASSERT_EQ(t % 2, 0) << name;
        padded += 2 * ((t / 2 + world - 1) / world) * world;
        sum += t;
      }
      EXPECT_EQ(sum, op.bytes) << name;
      tensors += sizes.size();
    }
    ASSERT_NE(release, kNoOp);
    EXPECT_EQ(plan.ops[release].bytes, flat.bytes);
    EXPECT_GE(tensors, 2u);
    EXPECT_EQ(flat.bytes, padded);
  }
  EXPECT_GT(flats, 0);
  // Without prefetching each pre-hook gathers only its own module's parameter: one tensor per
  // call, no flat buffer.
  json own = d;
  own["zero"]["stage3_prefetch_bucket_size"] = 0;
  const TrainingPlan alone = build_training_plan(resolve_scenario(own), true);
  EXPECT_TRUE(allocations(alone, "gather flat buffer").empty());
  EXPECT_FALSE(allocations(alone, "gathered attention").empty());
  // A layer's 16-bit gradients: one tensor per module weight and one for its small tensors (the
  // head's final norm is one tensor, the allocation itself).
  int grads = 0;
  for (const Op& op : plan.ops) {
    const std::string& name = plan.names[op.name];
    if (op.rank != 0 || op.kind != OpKind::Alloc || name.rfind("alloc param.grad ", 0) != 0 ||
        name.find("head") != std::string::npos)
      continue;
    ++grads;
    const auto tensors = plan.alloc_tensors.find({op.name, op.bytes});
    ASSERT_NE(tensors, plan.alloc_tensors.end()) << name;
    EXPECT_GE(tensors->second.size(), 2u) << name;
    Bytes sum = 0;
    for (Bytes t : tensors->second) sum += t;
    EXPECT_EQ(sum, op.bytes) << name;
  }
  EXPECT_GE(grads, 4);  // attention and MLP of two layers, and the embedding

  // MiCS gathers each parameter into an output tensor of its own: no flat buffer.
  json m = doc("deepspeed", 8, 3);
  m["zero"]["stage3_param_persistence_threshold"] = 0;
  m["zero"]["stage3_prefetch_bucket_size"] = 40000;
  m["zero"]["mics_shard_size"] = 4;
  const TrainingPlan mics = build_training_plan(resolve_scenario(m), true);
  int split = 0;
  for (const Op& op : mics.plan.ops) {
    const std::string& name = mics.plan.names[op.name];
    EXPECT_EQ(name.find("gather flat buffer"), std::string::npos) << name;
    if (op.kind == OpKind::Alloc && name.rfind("alloc gathered ", 0) == 0)
      split += static_cast<int>(mics.plan.alloc_tensors.count({op.name, op.bytes}));
  }
  EXPECT_GT(split, 0);

  json f = d;
  f["parallel"]["framework"] = "fsdp";
  const TrainingPlan fsdp = build_training_plan(resolve_scenario(f), true);
  for (const Op& op : fsdp.plan.ops) {
    const std::string& name = fsdp.plan.names[op.name];
    EXPECT_EQ(name.find("gather flat buffer"), std::string::npos) << name;
    if (op.kind == OpKind::Alloc && name.rfind("alloc gathered ", 0) == 0)
      EXPECT_EQ(fsdp.plan.alloc_tensors.count({op.name, op.bytes}), 0u) << name;
  }
}

}  // namespace
}  // namespace zerosim
