// The engine playing the ZeRO plan against fixed durations, checked op by op against timelines
// derived by hand from DeepSpeed's rules; deadlock freedom over the configuration space; and
// when gradient reductions may start.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using namespace testing_plan;

struct Expect {
  const char* name;
  double s0, e0, s1, e1;  // microseconds: start and end on rank 0, then on rank 1
};

// Where the IPG bucket buffer is allocated and freed is checked on its own
// (parallelMemoryPlacement below): the timelines leave those two zero-time ops out.
bool ipg_op(const std::string& name) {
  return name == "alloc ipg_buffer" || name == "free ipg_buffer";
}

// Checks that every rank runs exactly the ops of `table` (but the IPG buffer's), in plan order,
// with those times.
void check_timeline(const TrainingPlan& tp, const EngineResult& r,
                    const std::vector<Expect>& table) {
  const Plan& plan = tp.plan;
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    std::vector<OpId> ops;
    for (OpId id = 0; id < plan.ops.size(); ++id) {
      if (plan.ops[id].rank == rank && !ipg_op(plan.names[plan.ops[id].name])) ops.push_back(id);
    }
    ASSERT_EQ(ops.size(), table.size()) << "rank " << rank;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Expect& e = table[i];
      const OpId id = ops[i];
      EXPECT_EQ(plan.names[plan.ops[id].name], e.name) << "rank " << rank << " op " << i;
      const double s = rank == 0 ? e.s0 : e.s1, en = rank == 0 ? e.e0 : e.e1;
      EXPECT_EQ(r.start[id], static_cast<SimTime>(s * kPicosPerMicro))
          << "rank " << rank << " op " << i << " '" << e.name << "' start";
      EXPECT_EQ(r.end[id], static_cast<SimTime>(en * kPicosPerMicro))
          << "rank " << rank << " op " << i << " '" << e.name << "' end";
    }
  }
}

// ZeRO-2, overlap_comm false, one micro-batch, 2 ranks, the tiny model (embedding, 2 x
// (attention, MLP), head), every gradient in one bucket (Φ = 172288 < reduce_bucket_size 5e8).
// DeepSpeed's order on each rank, all on the compute stream (no overlap_comm: average_tensor
// runs on the current stream):
//   model states and the cuBLAS workspace allocated at start;
//   forward: embedding, then per layer [alloc activations] attention, MLP; [alloc the loss's
//   forward temporaries, then the logits it saves] head [free the temporaries]; the head's
//   backward has its own;
//   backward in reverse; stage 2 hooks: each unit's param.grad exists from its backward until
//   the hook copies it into the IPG bucket;
//   epilogue: the bucket is all-reduced (use_multi_rank_bucket_allreduce);
//   step: fp32 gradient temp, optimizer step, one all-gather of the updated 16-bit parameters.
// Durations (common.h): rank 0 forward 1+2+3+2+3+4 = 15, backward 8+6+4+6+4+2 = 30; rank 1 twice.
//   rank 0 reaches the all-reduce at 45, rank 1 at 90: it runs [90, 100] on both;
//   optimizer step rank 0 [100, 105], rank 1 [100, 110];
//   the all-gather waits for rank 1: [110, 116].
TEST(parallelTimeline, Zero2WithoutOverlapOneMicroBatch) {
  Scenario s = resolve_scenario(tiny_doc(2, {{"stage", 2}, {"overlap_comm", false}}));
  TrainingPlan tp = build_training_plan(s);
  FixedCompute compute(tp);
  FixedComm comm;
  EngineResult r = run_engine(tp.plan, compute, comm);
  const std::vector<Expect> table = {
      {"alloc params", 0, 0, 0, 0},
      {"alloc grads", 0, 0, 0, 0},
      {"alloc optimizer_states", 0, 0, 0, 0},
      {"alloc cublas_workspace", 0, 0, 0, 0},
      {"fwd embedding mb0", 0, 1, 0, 2},
      {"alloc activations", 1, 1, 2, 2},
      {"fwd attention L0 mb0", 1, 3, 2, 6},
      {"fwd mlp L0 mb0", 3, 6, 6, 12},
      {"alloc activations", 6, 6, 12, 12},
      {"fwd attention L1 mb0", 6, 8, 12, 16},
      {"fwd mlp L1 mb0", 8, 11, 16, 22},
      {"alloc loss forward temporaries", 11, 11, 22, 22},
      {"alloc logits", 11, 11, 22, 22},
      {"fwd head mb0", 11, 15, 22, 30},
      {"free loss forward temporaries", 15, 15, 30, 30},
      {"alloc param.grad head", 15, 15, 30, 30},
      {"alloc loss backward temporaries", 15, 15, 30, 30},
      {"bwd head mb0", 15, 23, 30, 46},
      {"free logits", 23, 23, 46, 46},
      {"free loss backward temporaries", 23, 23, 46, 46},
      {"free param.grad head", 23, 23, 46, 46},
      {"alloc param.grad mlp", 23, 23, 46, 46},
      {"bwd mlp L1 mb0", 23, 29, 46, 58},
      {"free param.grad mlp", 29, 29, 58, 58},
      {"alloc param.grad attention", 29, 29, 58, 58},
      {"bwd attention L1 mb0", 29, 33, 58, 66},
      {"free activations", 33, 33, 66, 66},
      {"free param.grad attention", 33, 33, 66, 66},
      {"alloc param.grad mlp", 33, 33, 66, 66},
      {"bwd mlp L0 mb0", 33, 39, 66, 78},
      {"free param.grad mlp", 39, 39, 78, 78},
      {"alloc param.grad attention", 39, 39, 78, 78},
      {"bwd attention L0 mb0", 39, 43, 78, 86},
      {"free activations", 43, 43, 86, 86},
      {"free param.grad attention", 43, 43, 86, 86},
      {"alloc param.grad embedding", 43, 43, 86, 86},
      {"bwd embedding mb0", 43, 45, 86, 90},
      {"free param.grad embedding", 45, 45, 90, 90},
      {"grad all_reduce #0", 90, 100, 90, 100},
      {"alloc fp32 step gradients", 100, 100, 100, 100},
      {"optimizer step", 100, 105, 100, 110},
      {"free fp32 step gradients", 105, 105, 110, 110},
      {"param all_gather", 110, 116, 110, 116},
  };
  check_timeline(tp, r, table);
  EXPECT_EQ(r.makespan, 116 * kPicosPerMicro);
}

// ZeRO-1, overlap_comm false, two micro-batches. Stage 1 keeps whole gradients, so no hook
// reduces during backward; after the last backward DeepSpeed's reduce_gradients reduces every
// bucket once on the compute stream.
//   rank 0: mb0 forward [0, 15], backward [15, 45]; mb1 forward [45, 60], backward [60, 90];
//   rank 1: twice as slow, mb1 backward ends at 180.
//   all-reduce [180, 190]; step rank 0 [190, 195], rank 1 [190, 200]; all-gather [200, 206].
TEST(parallelTimeline, Zero1WithoutOverlapTwoMicroBatches) {
  Scenario s = resolve_scenario(tiny_doc(2, {{"stage", 1}, {"overlap_comm", false}}, 2));
  TrainingPlan tp = build_training_plan(s);
  FixedCompute compute(tp);
  FixedComm comm;
  EngineResult r = run_engine(tp.plan, compute, comm);
  const std::vector<Expect> table = {
      {"alloc params", 0, 0, 0, 0},
      {"alloc grads", 0, 0, 0, 0},
      {"alloc optimizer_states", 0, 0, 0, 0},
      {"alloc cublas_workspace", 0, 0, 0, 0},
      // micro-batch 0
      {"fwd embedding mb0", 0, 1, 0, 2},
      {"alloc activations", 1, 1, 2, 2},
      {"fwd attention L0 mb0", 1, 3, 2, 6},
      {"fwd mlp L0 mb0", 3, 6, 6, 12},
      {"alloc activations", 6, 6, 12, 12},
      {"fwd attention L1 mb0", 6, 8, 12, 16},
      {"fwd mlp L1 mb0", 8, 11, 16, 22},
      {"alloc loss forward temporaries", 11, 11, 22, 22},
      {"alloc logits", 11, 11, 22, 22},
      {"fwd head mb0", 11, 15, 22, 30},
      {"free loss forward temporaries", 15, 15, 30, 30},
      {"alloc loss backward temporaries", 15, 15, 30, 30},
      {"bwd head mb0", 15, 23, 30, 46},
      {"free logits", 23, 23, 46, 46},
      {"free loss backward temporaries", 23, 23, 46, 46},
      {"bwd mlp L1 mb0", 23, 29, 46, 58},
      {"bwd attention L1 mb0", 29, 33, 58, 66},
      {"free activations", 33, 33, 66, 66},
      {"bwd mlp L0 mb0", 33, 39, 66, 78},
      {"bwd attention L0 mb0", 39, 43, 78, 86},
      {"free activations", 43, 43, 86, 86},
      {"bwd embedding mb0", 43, 45, 86, 90},
      // micro-batch 1: rank 0 starts at 45, rank 1 at 90
      {"fwd embedding mb1", 45, 46, 90, 92},
      {"alloc activations", 46, 46, 92, 92},
      {"fwd attention L0 mb1", 46, 48, 92, 96},
      {"fwd mlp L0 mb1", 48, 51, 96, 102},
      {"alloc activations", 51, 51, 102, 102},
      {"fwd attention L1 mb1", 51, 53, 102, 106},
      {"fwd mlp L1 mb1", 53, 56, 106, 112},
      {"alloc loss forward temporaries", 56, 56, 112, 112},
      {"alloc logits", 56, 56, 112, 112},
      {"fwd head mb1", 56, 60, 112, 120},
      {"free loss forward temporaries", 60, 60, 120, 120},
      {"alloc loss backward temporaries", 60, 60, 120, 120},
      {"bwd head mb1", 60, 68, 120, 136},
      {"free logits", 68, 68, 136, 136},
      {"free loss backward temporaries", 68, 68, 136, 136},
      {"bwd mlp L1 mb1", 68, 74, 136, 148},
      {"bwd attention L1 mb1", 74, 78, 148, 156},
      {"free activations", 78, 78, 156, 156},
      {"bwd mlp L0 mb1", 78, 84, 156, 168},
      {"bwd attention L0 mb1", 84, 88, 168, 176},
      {"free activations", 88, 88, 176, 176},
      {"bwd embedding mb1", 88, 90, 176, 180},
      // reduce_gradients at the accumulation boundary
      {"grad all_reduce #0", 180, 190, 180, 190},
      {"alloc fp32 step gradients", 190, 190, 190, 190},
      {"optimizer step", 190, 195, 190, 200},
      {"free fp32 step gradients", 195, 195, 200, 200},
      {"param all_gather", 200, 206, 200, 206},
  };
  check_timeline(tp, r, table);
  EXPECT_EQ(r.makespan, 206 * kPicosPerMicro);
}

// ---- where the IPG buffer lives -------------------------------------------------------------

// DeepSpeed stages 1 and 2 with contiguous_gradients allocate the IPG bucket buffer
// (reduce_bucket_size 16-bit elements, two with overlap_comm) in optimizer.backward(), before
// autograd runs the micro-batch's backward (stage_1_and_2.py, backward(): "self.ipg_buffer =
// [] ... torch.empty(int(self.reduce_bucket_size) ..."). So it is live while every backward
// runs, alongside that micro-batch's activations: checked here at the end of each micro-batch's
// first backward op ("bwd head mb<j>"), with the engine's completion order at zero durations.
class parallelMemoryPlacement : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(parallelMemoryPlacement, IpgBufferLiveDuringEveryBackward) {
  auto [stage, overlap] = GetParam();
  const int m = 2;
  Scenario s = resolve_scenario(tiny_doc(2, {{"stage", stage}, {"overlap_comm", overlap}}, m));
  TrainingPlan tp = build_training_plan(s);
  FixedCompute compute(tp, true);
  FixedComm comm(true);
  EngineResult r = run_engine(tp.plan, compute, comm);
  const Plan& plan = tp.plan;
  const Bytes ipg = 2 * s.zero.reduce_bucket_size * (overlap ? 2 : 1);
  Bytes live = 0;
  int checked = 0;
  for (OpId id : r.order) {
    const Op& op = plan.ops[id];
    if (op.rank != 0) continue;
    const std::string& name = plan.names[op.name];
    if (name == "alloc ipg_buffer") live += op.bytes;
    if (name == "free ipg_buffer") live -= op.bytes;
    if (name.rfind("bwd head mb", 0) == 0) {
      EXPECT_GE(live, ipg) << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, m);
}

INSTANTIATE_TEST_SUITE_P(parallelStages, parallelMemoryPlacement,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

// ---- deadlock freedom ----------------------------------------------------------------------

struct SweepCase {
  int stage, gas;
  bool overlap;
  int tp;
  bool small_buckets;  // several buckets; stage 3: prefetch, no reuse, nothing persistent
};

std::string case_name(const SweepCase& c) {
  return "stage" + std::to_string(c.stage) + " gas" + std::to_string(c.gas) +
         (c.overlap ? " overlap" : " no-overlap") + " tp" + std::to_string(c.tp) +
         (c.small_buckets ? " small-buckets" : "");
}

std::vector<SweepCase> sweep() {
  std::vector<SweepCase> out;
  for (int stage = 0; stage <= 3; ++stage)
    for (int gas = 1; gas <= 4; ++gas)
      for (bool overlap : {false, true})
        for (int tp : {1, 2})
          for (bool small : {false, true}) out.push_back({stage, gas, overlap, tp, small});
  return out;
}

json sweep_zero(const SweepCase& c) {
  json zero = {{"stage", c.stage}, {"overlap_comm", c.overlap}};
  if (c.small_buckets) {
    // Units of 16768 .. 72192 elements (tp 1): buckets of one or two units, and a ZeRO-3
    // prefetch window of about one unit.
    zero["reduce_bucket_size"] = 40000;
    zero["stage3_prefetch_bucket_size"] = 20000;
    zero["stage3_param_persistence_threshold"] = 0;
    zero["stage3_max_reuse_distance"] = 0;
  }
  return zero;
}

// With zero durations every op must still be released (no cycle, every collective complete):
// the engine throws on a deadlock. The step then takes no time at all.
TEST(parallelDeadlock, NoConfigurationDeadlocksWithZeroDurations) {
  for (const SweepCase& c : sweep()) {
    Scenario s = resolve_scenario(tiny_doc(2 * c.tp, sweep_zero(c), c.gas, c.tp));
    TrainingPlan tp = build_training_plan(s);
    FixedCompute compute(tp, true);
    FixedComm comm(true);
    EngineResult r;
    ASSERT_NO_THROW(r = run_engine(tp.plan, compute, comm)) << case_name(c);
    EXPECT_EQ(r.order.size(), tp.plan.ops.size()) << case_name(c);
    EXPECT_EQ(r.makespan, 0) << case_name(c);
  }
}

// The same sweep with the fixed, rank-skewed durations: no deadlock either, every op ends no
// earlier than it starts, and no op starts before the previous op of its (rank, stream) ended.
TEST(parallelDeadlock, NoConfigurationDeadlocksWithDurations) {
  for (const SweepCase& c : sweep()) {
    Scenario s = resolve_scenario(tiny_doc(2 * c.tp, sweep_zero(c), c.gas, c.tp));
    TrainingPlan tp = build_training_plan(s);
    FixedCompute compute(tp);
    FixedComm comm;
    EngineResult r;
    ASSERT_NO_THROW(r = run_engine(tp.plan, compute, comm)) << case_name(c);
    const Plan& plan = tp.plan;
    std::vector<SimTime> stream_end(static_cast<std::size_t>(plan.num_ranks) * kNumStreams, 0);
    for (OpId id = 0; id < plan.ops.size(); ++id) {
      const Op& o = plan.ops[id];
      EXPECT_LE(r.start[id], r.end[id]) << case_name(c);
      SimTime& prev =
          stream_end[static_cast<std::size_t>(o.rank) * kNumStreams + static_cast<int>(o.stream)];
      EXPECT_GE(r.start[id], prev) << case_name(c) << " " << plan.names[o.name];
      prev = r.end[id];
      for (std::uint32_t i = 0; i < o.dep_count; ++i) {
        EXPECT_GE(r.start[id], r.end[plan.deps[o.dep_begin + i]]) << case_name(c);
      }
    }
  }
}

// ---- when gradient reductions may start ------------------------------------------------------

// A bucket is reduced only once all its gradients exist: DDP launches a bucket's all-reduce
// when its last gradient's hook fires; DeepSpeed's average_tensor makes the reduction stream
// wait for the compute stream (reduction_stream.wait_stream(current_stream)) and stage 3 does
// the same. With the tiny model every gradient fits one bucket (Φ = 172288 < 5e8 elements and
// < DDP's first 1 MiB bucket), so the bucket holds the embedding's gradient, the last one the
// backward produces: its reduction cannot start before "bwd embedding mb<j>" has ended on
// every rank. Stages 2 and 3 reduce after each micro-batch (j = 0 .. m-1), stages 0 and 1 once
// after the last (j = m - 1).
class parallelGradReduction : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(parallelGradReduction, BucketReductionWaitsForItsGradients) {
  auto [stage, overlap] = GetParam();
  // Reductions on the dp-comm stream: DDP always, DeepSpeed with overlap_comm.
  if (stage == 0 || overlap) {
  }
  const int m = 2;
  Scenario s = resolve_scenario(tiny_doc(2, {{"stage", stage}, {"overlap_comm", overlap}}, m));
  TrainingPlan tp = build_training_plan(s);
  FixedCompute compute(tp);
  FixedComm comm;
  EngineResult r = run_engine(tp.plan, compute, comm);
  const Plan& plan = tp.plan;
  std::vector<OpId> reductions;  // rank 0, plan order
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    if (plan.ops[id].rank == 0 && plan.names[plan.ops[id].name].rfind("grad ", 0) == 0) {
      reductions.push_back(id);
    }
  }
  const bool every_micro_batch = stage >= 2;
  ASSERT_EQ(reductions.size(), every_micro_batch ? static_cast<std::size_t>(m) : 1u);
  for (std::size_t k = 0; k < reductions.size(); ++k) {
    const int j = every_micro_batch ? static_cast<int>(k) : m - 1;
    const std::string last_backward = "bwd embedding mb" + std::to_string(j);
    for (OpId id = 0; id < plan.ops.size(); ++id) {
      if (plan.names[plan.ops[id].name] != last_backward) continue;
      EXPECT_GE(r.start[reductions[k]], r.end[id])
          << plan.names[plan.ops[reductions[k]].name] << " vs " << last_backward << " on rank "
          << plan.ops[id].rank;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(parallelStages, parallelGradReduction,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Bool()));

// ---- Megatron tensor-parallel collectives ----------------------------------------------------

// Megatron-LM: the vocab-parallel embedding all-reduces its output in forward and nothing in
// backward (its input is token ids); the output layer is column-parallel behind
// copy_to_tensor_model_parallel_region: nothing in forward, an all-reduce of its input gradient
// in backward, before the last layer's MLP backward can start. Each transformer layer
// all-reduces twice in forward (attention and MLP row-parallel outputs) and twice in backward
// (their column-parallel input gradients).
TEST(parallelTensorParallel, BackwardAllReducePlacement) {
  Scenario s = resolve_scenario(tiny_doc(4, {{"stage", 1}}, 1, 2));
  TrainingPlan tp = build_training_plan(s);
  const Plan& plan = tp.plan;
  std::vector<std::string> names;  // rank 0, plan order
  for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
    if (plan.ops[id].kind == OpKind::Compute || plan.ops[id].stream == Stream::TpComm) {
      names.push_back(plan.names[plan.ops[id].name]);
    }
  }
  auto at = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  auto tp_between = [&](std::ptrdiff_t a, std::ptrdiff_t b) {
    int count = 0;
    for (std::ptrdiff_t i = a + 1; i < b; ++i) count += names[i].rfind("tp ", 0) == 0;
    return count;
  };
  EXPECT_EQ(tp_between(at("bwd head mb0"), at("bwd mlp L1 mb0")), 1);
  EXPECT_EQ(tp_between(at("bwd embedding mb0"), at("optimizer step")), 0);
}

}  // namespace
}  // namespace zerosim
