// Memory timeline invariants on random small scenarios: the allocations the engine played on
// every rank never go negative, every temporary allocation is freed, the peak is the timeline's
// maximum, and what is left at the end of the step is exactly what a rank holds between steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>

#include "sim/run/simulate.h"
#include "sim/cluster/gpu_generation.h"
#include "sim/scenario/scenario.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {


using json = nlohmann::json;

json random_scenario(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<json> v) {
    std::uniform_int_distribution<std::size_t> d(0, v.size() - 1);
    return *(v.begin() + d(rng));
  };
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int hidden = pick({32, 64, 96}).get<int>();
  json model = {{"num_layers", uni(1, 3)},
                {"hidden_size", hidden},
                {"num_attention_heads", pick({2, 4})},
                {"vocab_size", uni(100, 2000)},
                {"seq_length", pick({32, 64, 128})},
                {"mlp", pick({"gelu", "swiglu"})},
                {"ffn_hidden_size", 4 * hidden}};
  const int gpus = pick({1, 2, 4, 8}).get<int>();
  const int tp = gpus >= 2 && uni(0, 1) ? 2 : 1;
  const int stage = uni(0, 3);
  json zero = {{"stage", stage},
               {"contiguous_gradients", uni(0, 1) == 1},
               {"reduce_bucket_size", pick({3000, 20000, 500000000})}};
  // overlap_comm with stages 1/2 is checked on its own below (a known bug makes it throw).
  if (stage == 1 || stage == 2) {
    zero["overlap_comm"] = false;
  } else if (uni(0, 2) > 0) {
    zero["overlap_comm"] = uni(0, 1) == 1;
  }
  if (stage == 3) {
    // Nothing persistent here: persistent parameters are checked on their own below.
    zero["stage3_param_persistence_threshold"] = 0;
    // Prefetching across the end of the forward pass is checked on its own below; here either
    // every unit stays gathered until its backward (reuse distance above the model size) or
    // nothing is prefetched.
    if (uni(0, 1)) {
      zero["stage3_max_reuse_distance"] = 1000000000;
      zero["stage3_prefetch_bucket_size"] = pick({0, 20000, 50000000});
    } else {
      zero["stage3_max_reuse_distance"] = pick({0, 50000});
      zero["stage3_prefetch_bucket_size"] = 0;
    }
  }
  return {{"model", model},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", gpus}}},
          {"training",
           {{"micro_batch_size", uni(1, 3)},
            {"gradient_accumulation_steps", uni(1, 4)},
            {"flash_attention", uni(0, 1) == 1}}},
          {"parallel",
           {{"tp", tp},
            {"sequence_parallel", tp == 2 && uni(0, 1) == 1},
            {"recompute", pick({"none", "selective", "full"})}}},
          {"zero", zero},
          {"sim", {{"allow_oom", true}}}};
}

// "alloc X" / "free X" -> "X".
std::string object_of(const std::string& op_name) { return op_name.substr(op_name.find(' ') + 1); }

// The cuBLAS workspace PyTorch allocates for the compute stream: 8.125 MiB before Hopper
// (CublasHandlePool.cpp; the tests' dgx-a100-80gb is Ampere).
constexpr Bytes kAmpereWorkspace = 2 * 4096 * 1024 + 8 * 16 * 1024;

// What a rank holds between steps (DeepSpeed / PyTorch DDP):
//   model states (16-bit params, 16-bit grads, fp32 optimizer states, partitioned by stage),
//   the cuBLAS workspace,
//   stage 0: DDP's bucket buffers, a second 16-bit copy of every gradient (2Φ),
//   stage 3 with contiguous_gradients: the flat IPG buffer of reduce_bucket_size 16-bit elements.
Bytes between_steps(const Scenario& s, const TrainingPlan& tp) {
  const std::int64_t phi = tp.stages.at(0).local_params;
  const std::int64_t n = s.parallel.dp;
  const std::int64_t part = (phi + n - 1) / n;  // DeepSpeed pads partitions to ceil(Φ/N)
  const int stage = s.zero.stage;
  Bytes b = 2 * (stage == 3 ? part : phi) + 2 * (stage >= 2 ? part : phi) +
            12 * (stage >= 1 ? part : phi) +
            generation_constants(s.cluster.gpu.generation).cublas_workspace_bytes;
  if (stage == 0) b += 2 * phi;
  if (stage == 3 && s.zero.contiguous_gradients) b += 2 * s.zero.reduce_bucket_size;
  return b;
}

std::set<std::string> persistent_objects(const Scenario& s) {
  std::set<std::string> p = {"params", "grads", "optimizer_states", "cublas_workspace"};
  if (s.zero.stage == 0) p.insert("ddp_buckets");
  if (s.zero.stage == 3) p.insert("ipg_buffer");
  return p;
}

void check_rank(const Scenario& s, const TrainingPlan& tp, const EngineResult& r, int rank,
                const std::string& where) {
  const Plan& plan = tp.plan;
  MemoryUsage u = replay_memory(plan, r, rank, true);  // throws if a category goes negative
  ASSERT_FALSE(u.timeline.empty()) << where;
  Bytes max_total = 0;
  for (const auto& [t, total] : u.timeline) {
    ASSERT_GE(total, 0) << where;
    max_total = std::max(max_total, total);
  }
  EXPECT_EQ(u.peak, max_total) << where;
  EXPECT_GE(u.peak, u.end) << where;
  EXPECT_EQ(u.timeline.back().second, u.end) << where;
  Bytes at_peak = 0;
  for (int c = 0; c < kNumMemCategories; ++c) {
    at_peak += u.at_peak[c];
    EXPECT_LE(u.category_max[c], u.peak) << where;
    EXPECT_GE(u.category_max[c], u.at_peak[c]) << where;
  }
  EXPECT_EQ(at_peak, u.peak) << where;
  EXPECT_EQ(u.end, between_steps(s, tp)) << where;

  // Every allocation of a temporary is matched by frees of the same object and category.
  std::map<std::pair<std::string, int>, Bytes> net;
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.rank != rank || (op.kind != OpKind::Alloc && op.kind != OpKind::Free)) continue;
    EXPECT_GE(op.bytes, 0) << where << " " << plan.names[op.name];
    net[{object_of(plan.names[op.name]), static_cast<int>(op.category)}] +=
        op.kind == OpKind::Alloc ? op.bytes : -op.bytes;
  }
  const std::set<std::string> keep = persistent_objects(s);
  for (const auto& [key, bytes] : net) {
    if (keep.count(key.first)) {
      EXPECT_GT(bytes, 0) << where << " persistent '" << key.first << "'";
    } else {
      EXPECT_EQ(bytes, 0) << where << " '" << key.first << "' is not freed";
    }
  }
}

TEST(reportMemoryTimeline, RandomScenariosKeepTheInvariants) {
  std::mt19937 rng(20240611);
  for (int i = 0; i < 60; ++i) {
    json doc = random_scenario(rng);
    const std::string where = "scenario " + std::to_string(i) + ": " + doc.dump();
    Scenario s = resolve_scenario(doc);
    Simulation sim;
    try {
      sim = simulate_step(s);  // replays memory: throws if a category goes negative
    } catch (const std::exception& e) {
      FAIL() << where << ": " << e.what();
    }
    for (int rank = 0; rank < sim.plan.plan.num_ranks; ++rank) {
      check_rank(s, sim.plan, sim.result, rank, where);
    }
    // The memory-only replay of the report agrees with the timed step on the model states and
    // on what is left at the end.
    StepReport m = memory_report(s);
    EXPECT_EQ(m.memory.end, sim.report.memory.end) << where;
    for (MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::OptimizerStates}) {
      EXPECT_EQ(m.memory.category_max[static_cast<int>(c)],
                sim.report.memory.category_max[static_cast<int>(c)])
          << where;
    }
    if (HasFatalFailure() || HasNonfatalFailure()) return;  // one scenario's report is enough
  }
}

TEST(reportMemoryTimeline, OverlapCommStages1And2KeepTheInvariants) {
  // DeepSpeed stages 1/2 with overlap_comm: the reduction stream waits for the compute stream
  // (average_tensor: reduction_stream.wait_stream(current_stream)) before reducing a bucket, so
  // the IPG buffer is allocated before any reduction reads it and freed after the last one.
  // Tiny model, all gradients in one bucket (Φ = 172288 < reduce_bucket_size = 5e8).
  for (int stage : {1, 2}) {
    for (int gas : {1, 2, 3}) {
      json doc = {{"model", testing_plan::tiny_model()},
                  {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 2}}},
                  {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", gas}}},
                  {"sim", {{"ranks", "all"}}},
                  {"zero", {{"stage", stage}, {"overlap_comm", true}}}};
      const std::string where = doc.dump();
      Scenario s = resolve_scenario(doc);
      Simulation sim;
      try {
        sim = simulate_step(s);
      } catch (const std::exception& e) {
        ADD_FAILURE() << where << ": " << e.what();
        continue;
      }
      for (int rank = 0; rank < 2; ++rank) check_rank(s, sim.plan, sim.result, rank, where);
    }
  }
}

TEST(reportMemoryTimeline, Stage3PrefetchIntoBackwardIsReleased) {
  // ZeRO-3 releases every gathered (non-persistent) parameter after its last use of the step,
  // so a step must end holding exactly what it started with. Tiny model on 2 GPUs with
  // stage3_max_reuse_distance = 0 (nothing kept from forward to backward) and a prefetch
  // bucket of 20000 elements: the pre-hooks at the end of the forward already prefetch the
  // first backward uses (the units of 16768 and 33216 elements), which is where the leak shows.
  //   end = 16Φ/N + cuBLAS workspace + 2 * reduce_bucket_size (IPG buffer), Φ = 172288, N = 2.
  json doc = {{"model", testing_plan::tiny_model()},
              {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 2}}},
              {"training", {{"micro_batch_size", 1}}},
              {"sim", {{"ranks", "all"}}},
              {"zero",
               {{"stage", 3},
                {"stage3_param_persistence_threshold", 0},
                {"stage3_max_reuse_distance", 0},
                {"stage3_prefetch_bucket_size", 20000},
                {"reduce_bucket_size", 20000}}}};
  Scenario s = resolve_scenario(doc);
  const std::int64_t phi = 172288, n = 2;
  Simulation sim = simulate_step(s);
  for (int rank = 0; rank < 2; ++rank) {
    MemoryUsage u = replay_memory(sim.plan.plan, sim.result, rank, false);
    EXPECT_EQ(u.end, 16 * phi / n + kAmpereWorkspace + 2 * 20000) << "rank " << rank;
  }
  // And every backward compute starts only after the gather of its unit has ended: each
  // "bwd <unit>" op starts at or after the end of the latest "gather(bwd) <unit>" before it.
  const Plan& plan = sim.plan.plan;
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const std::string& name = plan.names[plan.ops[id].name];
    if (plan.ops[id].rank != 0 || name.rfind("bwd ", 0) != 0) continue;
    const std::string unit = name.substr(4, name.rfind(" mb") - 4);
    OpId gather = kNoOp;
    for (OpId g = 0; g < plan.ops.size(); ++g) {
      if (plan.ops[g].rank == 0 && plan.names[plan.ops[g].name] == "gather(bwd) " + unit)
        gather = g;
    }
    if (gather != kNoOp) {
      EXPECT_GE(sim.result.start[id], sim.result.end[gather]) << name;
    }
  }
}

TEST(reportMemoryTimeline, Stage3PersistentParametersStayGathered) {
  // DeepSpeed stage 3 marks parameters with ds_numel <= stage3_param_persistence_threshold
  // persistent (ds_persist): they are gathered once and never released, so every rank holds
  // their full 16-bit copy (2 bytes each) besides its partition, between steps too. In the tiny
  // model every parameter tensor (the largest is the 1000 x 64 token table, 64000) is below the
  // default threshold of 100000, so all Φ = 172288 parameters persist:
  //   end = 16Φ/N + cuBLAS workspace + 2 * reduce_bucket_size (IPG buffer) + 2Φ.
  json doc = {{"model", testing_plan::tiny_model()},
              {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 2}}},
              {"training", {{"micro_batch_size", 1}}},
              {"zero", {{"stage", 3}}}};
  Scenario s = resolve_scenario(doc);
  ASSERT_EQ(s.zero.stage3_param_persistence_threshold, 100000);
  const std::int64_t phi = 172288, n = 2;
  StepReport r = memory_report(s);
  EXPECT_EQ(r.memory.end,
            16 * phi / n + kAmpereWorkspace + 2 * s.zero.reduce_bucket_size + 2 * phi);
}

}  // namespace
}  // namespace zerosim
