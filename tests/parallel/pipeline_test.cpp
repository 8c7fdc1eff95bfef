// Pipeline schedules and tensor parallelism against closed forms (Narayanan et al. SC21 §2.2,
// Megatron-LM's TP collectives).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "sim/parallel/schedules.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"
#include "tests/parallel/common.h"
#include "tests/parallel/v_pipeline_replay.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// Uniform stages: every attention and MLP block costs the same in forward (tf) and twice as
// much in backward (a split backward: tf in its B and tf in its W); embedding, head and optimizer cost nothing, so the stages are identical.
class UniformCompute : public ComputeModel {
 public:
  explicit UniformCompute(const TrainingPlan& tp) : tp_(tp) {}
  SimTime duration(const Plan& plan, OpId op) override {
    switch (tp_.works[plan.ops[op].work].kind) {
      case WorkKind::AttentionForward:
      case WorkKind::MlpForward: return 10 * kPicosPerMicro;
      case WorkKind::AttentionBackward:
      case WorkKind::MlpBackward:
        // A zero-bubble schedule's B and W split the backward in half: tf = tb = tw.
        return (tp_.works[plan.ops[op].work].part == BackwardPart::Whole ? 20 : 10) *
               kPicosPerMicro;
      default: return 0;
    }
  }

 private:
  const TrainingPlan& tp_;
};

// Communication takes no time.
class InstantComm : public CommBackend {
 public:
  void start(const Plan&, std::uint32_t c, SimTime now) override { pending_.push_back({now, c}); }
  SimTime next_completion() const override {
    return pending_.empty() ? kNever : pending_.front().first;
  }
  void pop_completed(SimTime now, std::vector<std::uint32_t>& done) override {
    std::size_t i = 0;
    for (; i < pending_.size() && pending_[i].first == now; ++i) done.push_back(pending_[i].second);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }

 private:
  std::vector<std::pair<SimTime, std::uint32_t>> pending_;
};

json pipeline_doc(int pp, int m, int v, const std::string& schedule) {
  return {{"model",
           {{"num_layers", 16}, {"hidden_size", 64}, {"num_attention_heads", 4},
            {"vocab_size", 1000}, {"seq_length", 128}}},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", pp}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", m}}},
          {"parallel",
           {{"pp", pp},
            {"virtual_stages", v},
            {"pipeline_schedule", schedule},
            // ZB-H1 runs in the zero-bubble authors' Megatron-LM fork, dualpipev on a
            // Megatron-style model.
            {"framework", schedule == "zero-bubble" || schedule.starts_with("dualpipe")
                              ? "megatron"
                              : "deepspeed"}}},
          {"zero", {{"stage", 1}}}};
}

double bubble_fraction(const json& doc, int rank = 0) {
  Scenario s = resolve_scenario(doc);
  TrainingPlan tp = build_training_plan(s, true);
  UniformCompute compute(tp);
  InstantComm comm;
  EngineResult r = run_engine(tp.plan, compute, comm);
  StepBreakdown b = breakdown_of_rank(tp, r, rank);
  return b.bubble_s / ps_to_seconds(r.makespan);
}

TEST(parallelPipeline, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  // Each stage is busy m (tf + tb) and the step lasts (m + p - 1)(tf + tb): the bubble fraction
  // of any stage is (p - 1) / (m + p - 1).
  for (int p : {2, 4}) {
    for (int m : {1, 4, 8}) {
      EXPECT_NEAR(bubble_fraction(pipeline_doc(p, m, 1, "1f1b")),
                  static_cast<double>(p - 1) / (m + p - 1), 1e-9)
          << "p " << p << " m " << m;
    }
  }
}

TEST(parallelPipeline, GPipeHasTheSameBubbleAs1F1B) {
  // GPipe: all m forwards then all m backwards. Stage s waits s tf before its first forward,
  // (p - 1 - s)(tf + tb) between its last forward and first backward, and s tb after its last
  // backward: (p - 1)(tf + tb) in all, as with 1F1B; p = 4, m = 8: 3 / 11.
  EXPECT_NEAR(bubble_fraction(pipeline_doc(4, 8, 1, "gpipe")), 3.0 / 11.0, 1e-9);
}

TEST(parallelPipeline, InterleavedBubbleShrinksByV) {
  // v chunks per stage each cost (tf + tb) / v: the bubble is (p - 1)(tf + tb)/v against
  // m (tf + tb) of work, a fraction (p - 1) / (v m + p - 1).
  for (int v : {2, 4}) {
    const int p = 4, m = 8;
    EXPECT_NEAR(bubble_fraction(pipeline_doc(p, m, v, "interleaved")),
                static_cast<double>(p - 1) / (v * m + p - 1), 1e-9)
        << "v " << v;
  }
}

// Megatron's overlap_p2p_comm: a pass's receive is posted with the send of the previous pass of
// its direction, so in the steady state its transfer (3 us here) runs under the other
// direction's compute (10 us per block) instead of after it. The step then lies strictly between
// the step without communication and the one whose every receive waits for the compute before
// it; the default follows Megatron-LM: on with the interleaved schedule, off with 1F1B.
TEST(parallelPipeline, OverlappedP2pHidesSteadyStateTransfers) {
  auto makespan = [](json doc, bool overlap, bool instant) {
    doc["parallel"]["framework"] = "megatron";
    doc["parallel"]["overlap_p2p_comm"] = overlap;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    UniformCompute compute(tp);
    InstantComm none;
    testing_plan::FixedComm fixed;
    return instant ? run_engine(tp.plan, compute, none).makespan
                   : run_engine(tp.plan, compute, fixed).makespan;
  };
  const json doc = pipeline_doc(4, 8, 2, "interleaved");
  const SimTime free = makespan(doc, false, true), blocking = makespan(doc, false, false);
  const SimTime overlapped = makespan(doc, true, false);
  EXPECT_LT(free, overlapped);
  EXPECT_LT(overlapped, blocking);
  EXPECT_EQ(makespan(doc, true, true), free);
  EXPECT_FALSE(resolve_scenario(doc).parallel.overlap_p2p_comm);  // deepspeed
  json megatron = doc;
  megatron["parallel"]["framework"] = "megatron";
  EXPECT_TRUE(resolve_scenario(megatron).parallel.overlap_p2p_comm);
  megatron["parallel"]["pipeline_schedule"] = "1f1b";
  megatron["parallel"]["virtual_stages"] = 1;
  EXPECT_FALSE(resolve_scenario(megatron).parallel.overlap_p2p_comm);
  // Asked for where Megatron-LM turns it off: a warning; under another framework: refused.
  megatron["parallel"]["overlap_p2p_comm"] = true;
  const Scenario unused = resolve_scenario(megatron);
  EXPECT_FALSE(unused.parallel.overlap_p2p_comm);
  ASSERT_EQ(unused.warnings.size(), 1u);
  EXPECT_EQ(unused.warnings[0].key_path, "parallel.overlap_p2p_comm");
  json deepspeed = doc;
  deepspeed["parallel"]["overlap_p2p_comm"] = true;
  EXPECT_EQ(testing_plan::input_error_key(deepspeed), "parallel.overlap_p2p_comm");
}

TEST(parallelPipeline, ZeroBubbleH1BubbleIsPMinusOneTimesTfPlusTbMinusTw) {
  // Qi et al. (ICLR 2024) section 2.1: ZB-H1 leaves (p - 1)(tf + tb - tw) of bubble against
  // 1F1B's (p - 1)(tf + tb + tw). With tf = tb = tw each stage is busy 3 m tf in a step of
  // (3 m + p - 1) tf: a fraction (p - 1) / (3 m + p - 1), a third of 1F1B's bubble time.
  for (int p : {2, 4}) {
    for (int m : {4, 8}) {
      EXPECT_NEAR(bubble_fraction(pipeline_doc(p, m, 1, "zero-bubble")),
                  static_cast<double>(p - 1) / (3 * m + p - 1), 1e-9)
          << "p " << p << " m " << m;
    }
  }
}

// A split backward defers each GEMM's weight gradient with the two operands it reads: the GEMM's
// input and its output's gradient, m x (k + n) elements. The pipeline model's layer (h 64, ffn
// 256, 128 tokens): attention QKV [64 -> 192] and output [64 -> 64], 128 x 384 elements; MLP
// [64 -> 256] and [256 -> 64], 128 x 640. Two bytes each in bf16; under FP8 one, as Transformer
// Engine's linears keep the quantized input and output gradient for the deferred wgrad.
TEST(parallelPipeline, ZeroBubbleDefersEachGemmsInputAndOutputGradient) {
  auto held = [](const std::string& precision) {
    json doc = pipeline_doc(2, 4, 1, "zero-bubble");
    doc["cluster"]["preset"] = "dgx-h100";
    doc["training"]["precision"] = precision;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    std::set<Bytes> sizes;
    for (const Op& op : tp.plan.ops) {
      if (op.kind == OpKind::Alloc && op.rank == 0 &&
          tp.plan.names[op.name].find("weight-gradient inputs") != std::string::npos)
        sizes.insert(op.bytes);
    }
    return sizes;
  };
  EXPECT_EQ(held("bf16"), (std::set<Bytes>{2 * 128 * 384, 2 * 128 * 640}));
  EXPECT_EQ(held("fp8"), (std::set<Bytes>{128 * 384, 128 * 640}));
}

TEST(parallelPipeline, DualPipeBubblesAreTheDualPipeReadmes) {
  // DeepSeek's DualPipe README: DualPipe on PP devices (two copies, stage s and PP - 1 - s on
  // device s) and DualPipeV on PP/2 (PP stages, two per device) both leave (PP/2 - 1)(F&B + B -
  // 3W) of bubble, F, B and W a chunk's forward, whole backward and weight backward, F&B an
  // overlapped forward and backward; without communication to hide, F&B = F + B.
  //  - DualPipe: a chunk is a whole 1F1B stage here (F = tf, B = 2 tf, W = tf): (p/2 - 1) 2 tf
  //    against m (F + B) = 3 m tf of work per device (m/2 micro-batches through each chunk), a
  //    fraction (p - 2) / (3 m + p - 2), none with two devices.
  //  - DualPipeV: a chunk is half a stage (F = tf/2): (p - 1) tf against 2 m (F + B) = 3 m tf,
  //    a fraction (p - 1) / (3 m + p - 1).
  // Every device idles as long.
  struct Case {
    const char* schedule;
    int virtual_stages, lost_stages;  // the fraction is (p - lost) / (3 m + p - lost)
  };
  for (const Case c : {Case{"dualpipe", 1, 2}, Case{"dualpipev", 2, 1}}) {
    for (int p : {2, 4, 8}) {
      for (int m : {2 * p, 2 * p + 2, 3 * p + 1, 4 * p}) {
        if (c.virtual_stages == 1 && m % 2 != 0) continue;  // DualPipe feeds m / 2 from each end
        const int lost = c.lost_stages;
        const double expected = static_cast<double>(p - lost) / (3 * m + p - lost);
        for (int rank = 0; rank < p; ++rank) {
          EXPECT_NEAR(bubble_fraction(pipeline_doc(p, m, c.virtual_stages, c.schedule), rank),
                      expected, 1e-9)
              << c.schedule << " p " << p << " m " << m << " rank " << rank;
        }
      }
    }
  }
}

TEST(parallelPipeline, DualPipeHoldsTwoCopiesAndSumsTheirGradients) {
  // Device s holds stage s of one copy and pp - 1 - s of the other (four layers each here), so
  // devices 0 and pp - 1 both hold the embedding and the head: the stages' parameters add up to
  // twice the model's. Before the step each DP rank all-reduces its ZeRO-1 partition of the
  // fp32 main gradients (Megatron's grad_reduce_in_fp32 with bf16) with the same DP index of
  // stage pp - 1 - s.
  for (bool tied : {true, false}) {
    json doc = pipeline_doc(4, 8, 1, "dualpipe");
    doc["model"]["tied_embeddings"] = tied;
    doc["cluster"]["num_gpus"] = 8;  // dp 2
    const Scenario s = resolve_scenario(doc);
    const TrainingPlan tp = build_training_plan(s, false);
    const ParamCounts pc = count_params(s.model);
    std::int64_t params = 0;
    for (int st = 0; st < 4; ++st) {
      const StagePlan& stage = tp.stages[static_cast<std::size_t>(st)];
      EXPECT_EQ(stage.layers, 8) << "stage " << st;
      const std::int64_t ends =
          st == 0 || st == 3 ? pc.embedding + pc.output + pc.final_norm : 0;
      EXPECT_EQ(stage.local_params, 8 * pc.per_layer + ends) << "stage " << st;
      params += stage.local_params;
    }
    EXPECT_EQ(params, 2 * pc.total) << "tied " << tied;
    int mirrored = 0;
    for (const Op& op : tp.plan.ops) {
      const bool sum = op.kind == OpKind::Collective &&
                       tp.plan.names[op.name] == "grad all_reduce (dualpipe copies)";
      if (!sum) continue;
      ++mirrored;
      const Collective& c = tp.plan.collectives[static_cast<std::size_t>(op.work)];
      EXPECT_EQ(c.kind, CollectiveKind::AllReduce);
      EXPECT_EQ(c.member_count, 2u);
      const int stage = tp.stage_of_rank[op.rank];
      // The stage's parameters from the model's counts (as checked above), halved by DP 2.
      const std::int64_t ends =
          stage == 0 || stage == 3 ? pc.embedding + pc.output + pc.final_norm : 0;
      EXPECT_EQ(c.bytes, 4 * ((8 * pc.per_layer + ends + 1) / 2));
      auto member_stage = [&](std::uint32_t i) {
        return tp.stage_of_rank[tp.plan.ops[tp.plan.members[c.member_begin + i]].rank];
      };
      EXPECT_EQ(member_stage(0) + member_stage(1), 3);  // stages s and pp - 1 - s
    }
    EXPECT_EQ(mirrored, 8);  // one per rank
  }
}

TEST(parallelPipeline, DualPipeVHoldsTwoVirtualStagesAndTheEmbeddingOnce) {
  // Stage s holds virtual stages s and 2p - 1 - s (two layers each here); the embedding and the
  // loss are both on stage 0, so a tied embedding is held once, where 1F1B's last stage keeps a
  // copy for the output layer (Megatron's word-embedding copy). TP 1: the stages' parameters
  // add up to the model's.
  for (bool tied : {true, false}) {
    json doc = pipeline_doc(4, 8, 2, "dualpipev");
    doc["model"]["tied_embeddings"] = tied;
    const Scenario s = resolve_scenario(doc);
    const TrainingPlan tp = build_training_plan(s, true);
    const ParamCounts pc = count_params(s.model);
    std::int64_t params = 0;
    for (int st = 0; st < 4; ++st) {
      const StagePlan& stage = tp.stages[static_cast<std::size_t>(st)];
      EXPECT_EQ(stage.layers, 4) << "stage " << st;
      const std::int64_t ends = st == 0 ? pc.embedding + pc.output + pc.final_norm : 0;
      EXPECT_EQ(stage.local_params, 4 * pc.per_layer + ends) << "stage " << st;
      params += stage.local_params;
    }
    EXPECT_EQ(params, pc.total) << "tied " << tied;
    if (tied) {
      json one = pipeline_doc(4, 8, 1, "1f1b");
      one["model"]["tied_embeddings"] = true;
      const TrainingPlan plain = build_training_plan(resolve_scenario(one), true);
      EXPECT_EQ(plain.stages[3].local_params, 4 * pc.per_layer + pc.final_norm + 1000 * 64);
    }
  }
}

TEST(parallelPipeline, DualPipeVRefusesWhatItDoesNotSimulate) {
  auto key = [](const std::function<void(json&)>& edit) {
    return testing_plan::input_error_key(pipeline_doc(4, 8, 2, "dualpipev"), edit);
  };
  EXPECT_EQ(key([](json&) {}), "(accepted)");
  // Two chunks per stage, V-shaped; at least 2 p micro-batches (dualpipev.py asserts it).
  EXPECT_EQ(key([](json& d) { d["parallel"]["virtual_stages"] = 1; }), "parallel.virtual_stages");
  EXPECT_EQ(key([](json& d) { d["training"]["gradient_accumulation_steps"] = 7; }),
            "training.gradient_accumulation_steps");
  EXPECT_EQ(key([](json& d) { d["parallel"]["pp"] = 1; }), "parallel.pipeline_schedule");
  // A Megatron-style model with DDP or the distributed optimizer, gradients reduced after the
  // step; Megatron-core's own layouts and combined 1F1B are for its own schedules.
  EXPECT_EQ(key([](json& d) { d["parallel"]["framework"] = "deepspeed"; }),
            "parallel.pipeline_schedule");
  EXPECT_EQ(key([](json& d) { d["zero"]["stage"] = 2; }), "parallel.pipeline_schedule");
  EXPECT_EQ(key([](json& d) { d["parallel"]["overlap_grad_reduce"] = true; }),
            "parallel.overlap_grad_reduce");
  EXPECT_EQ(key([](json& d) {
              d["parallel"]["pipeline_model_parallel_layout"] = "Et|tttt|tttt|tt|t|t|tt|tL";
            }),
            "parallel.pipeline_model_parallel_layout");
  // DualPipe proper: pp stages, two copies; an even pp (dualpipe.py asserts it) and an even
  // number of micro-batches, half fed from each end.
  auto dualpipe = [&](const std::function<void(json&)>& edit) {
    return key([&](json& d) {
      d["parallel"]["pipeline_schedule"] = "dualpipe";
      d["parallel"]["virtual_stages"] = 1;
      edit(d);
    });
  };
  EXPECT_EQ(dualpipe([](json&) {}), "(accepted)");
  EXPECT_EQ(dualpipe([](json& d) { d["parallel"]["virtual_stages"] = 2; }),
            "parallel.virtual_stages");
  EXPECT_EQ(dualpipe([](json& d) {
              d["parallel"]["pp"] = 3;
              d["cluster"]["num_gpus"] = 3;
            }),
            "parallel.pipeline_schedule");
  EXPECT_EQ(dualpipe([](json& d) { d["training"]["gradient_accumulation_steps"] = 9; }),
            "training.gradient_accumulation_steps");
  EXPECT_EQ(dualpipe([](json& d) { d["training"]["gradient_accumulation_steps"] = 6; }),
            "training.gradient_accumulation_steps");
}

// nanotron has two pipeline engines, afab (every forward, then every backward: gpipe) and 1f1b
// (parallelism.pp_engine; config/utils_config.py at huggingface/nanotron 2411b022), and its
// ParallelismArgs runs afab when the engine is not set: that default, said on the key, and
// neither interleaving nor the other schedules.
TEST(parallelPipeline, NanotronRunsItsTwoEnginesAndDefaultsToAfab) {
  json doc = pipeline_doc(4, 8, 1, "1f1b");
  doc["parallel"]["framework"] = "nanotron";
  EXPECT_EQ(resolve_scenario(doc).parallel.pipeline_schedule, PipelineSchedule::OneFOneB);
  EXPECT_TRUE(resolve_scenario(doc).warnings.empty());
  doc["parallel"]["pipeline_schedule"] = "gpipe";
  EXPECT_EQ(resolve_scenario(doc).parallel.pipeline_schedule, PipelineSchedule::GPipe);
  doc["parallel"].erase("pipeline_schedule");
  const Scenario unset = resolve_scenario(doc);
  EXPECT_EQ(unset.parallel.pipeline_schedule, PipelineSchedule::GPipe);
  ASSERT_EQ(unset.warnings.size(), 1u);
  EXPECT_EQ(unset.warnings[0].key_path, "parallel.pipeline_schedule");
  // Without a pipeline there is no engine to choose, and nothing to say.
  json single = doc;
  single["parallel"]["pp"] = 1;
  single["cluster"]["num_gpus"] = 1;
  EXPECT_TRUE(resolve_scenario(single).warnings.empty());
  auto key = [&](const char* schedule, int virtual_stages) {
    json d = doc;
    d["parallel"]["pipeline_schedule"] = schedule;
    d["parallel"]["virtual_stages"] = virtual_stages;
    return testing_plan::input_error_key(d);
  };
  EXPECT_EQ(key("interleaved", 2), "parallel.pipeline_schedule");
  EXPECT_EQ(key("1f1b", 2), "parallel.virtual_stages");
  EXPECT_EQ(key("zero-bubble", 1), "parallel.pipeline_schedule");
}

// A model whose window is in some layers only is costed at the layers' average: exact for the
// step, not for a stage's own layers, which matters only with stages; said on parallel.pp.
TEST(parallelPipeline, WindowInSomeLayersIsAveragedAndSaidWithStages) {
  json doc = pipeline_doc(4, 8, 1, "1f1b");
  doc["model"]["sliding_window"] = 32;
  doc["model"]["sliding_window_layers"] = 8;
  const Scenario s = resolve_scenario(doc);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0].key_path, "parallel.pp");
  EXPECT_NE(s.warnings[0].message.find("8 of 16 layers"), std::string::npos) << s.warnings[0].message;
  json all = doc;  // every layer windowed, or a window as long as the sequence: nothing to say
  all["model"]["sliding_window_layers"] = 16;
  EXPECT_TRUE(resolve_scenario(all).warnings.empty());
  all["model"]["sliding_window_layers"] = 8;
  all["model"]["sliding_window"] = 128;
  EXPECT_TRUE(resolve_scenario(all).warnings.empty());
  json single = doc;
  single["parallel"]["pp"] = 1;
  single["cluster"]["num_gpus"] = 1;
  EXPECT_TRUE(resolve_scenario(single).warnings.empty());
  // Attention chunks in some layers (Llama 4) likewise.
  json chunked = pipeline_doc(4, 8, 1, "1f1b");
  chunked["model"]["attention_chunk_size"] = 32;
  chunked["model"]["chunked_attention_layers"] = 12;
  const Scenario c = resolve_scenario(chunked);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].key_path, "parallel.pp");
  EXPECT_NE(c.warnings[0].message.find("12 of 16 layers attend within chunks of 32"),
            std::string::npos) << c.warnings[0].message;
  chunked["model"]["chunked_attention_layers"] = 0;
  EXPECT_TRUE(resolve_scenario(chunked).warnings.empty());
  // Under Megatron, whose frameworks chunk every layer (NeMo) or none (Megatron-LM), some layers
  // chunked is said on the model's key, stages or not.
  json megatron = pipeline_doc(1, 8, 1, "1f1b");
  megatron["parallel"]["framework"] = "megatron";
  megatron["model"]["attention_chunk_size"] = 32;
  megatron["model"]["chunked_attention_layers"] = 12;
  const Scenario w = resolve_scenario(megatron);
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_EQ(w.warnings[0].key_path, "model.chunked_attention_layers");
  megatron["model"]["chunked_attention_layers"] = 0;
  EXPECT_TRUE(resolve_scenario(megatron).warnings.empty());
}

TEST(parallelPipeline, ZeroBubbleRefusesWhatItDoesNotSimulate) {
  auto key = [](const std::function<void(json&)>& edit) {
    return testing_plan::input_error_key(pipeline_doc(4, 8, 1, "zero-bubble"), edit);
  };
  EXPECT_EQ(key([](json&) {}), "(accepted)");
  // DeepSpeed's pipeline engine has no zero-bubble schedule; ZeRO-2/3 are not simulated with it.
  EXPECT_EQ(key([](json& d) { d["parallel"]["framework"] = "deepspeed"; }),
            "parallel.pipeline_schedule");
  EXPECT_EQ(key([](json& d) { d["zero"]["stage"] = 2; }), "parallel.pipeline_schedule");
  // ZB-V: two chunks per stage, V-shaped, split as Megatron splits (the fork's README: an even
  // number of layers per stage); not three, nor Megatron-core's layouts.
  EXPECT_EQ(key([](json& d) { d["parallel"]["virtual_stages"] = 2; }), "(accepted)");
  EXPECT_EQ(key([](json& d) { d["parallel"]["virtual_stages"] = 4; }), "parallel.virtual_stages");
  // Its order is searched with times zerosim approximates: said on the schedule's key.
  json v = pipeline_doc(4, 8, 2, "zero-bubble");
  const Scenario zbv = resolve_scenario(v);
  ASSERT_EQ(zbv.warnings.size(), 1u);
  EXPECT_EQ(zbv.warnings[0].key_path, "parallel.pipeline_schedule");
  EXPECT_TRUE(resolve_scenario(pipeline_doc(4, 8, 1, "zero-bubble")).warnings.empty());
  // The key ZB-V (two virtual stages) refuses a document on, after `field` = `value`.
  auto zbv_key = [&](const char* section, const char* field, const json& value) {
    return key([&](json& d) {
      d["parallel"]["virtual_stages"] = 2;
      d[section][field] = value;
    });
  };
  EXPECT_EQ(zbv_key("model", "num_layers", 12), "parallel.virtual_stages");
  EXPECT_EQ(zbv_key("parallel", "pipeline_model_parallel_layout", "Et|tttt|tttt|tt|t|t|tt|tL"),
            "parallel.pipeline_model_parallel_layout");
  EXPECT_EQ(zbv_key("parallel", "num_layers_in_first_pipeline_stage", 4),
            "parallel.num_layers_in_first_pipeline_stage");
  EXPECT_EQ(zbv_key("parallel", "framework", "deepspeed"), "parallel.pipeline_schedule");
}

// Layer blocks priced in proportion to the times ZB-V orders its passes by (zero_bubble_v_costs:
// a forward block `forward` ns, its B `input_backward`, its W `weight_backward`); nothing else
// takes time.
constexpr SimTime kPicosPerNs = 1000;

class ZeroBubbleVCompute : public ComputeModel {
 public:
  ZeroBubbleVCompute(const TrainingPlan& tp, const plan_detail::ZeroBubbleVCosts& c)
      : tp_(tp), c_(c) {}
  SimTime duration(const Plan& plan, OpId op) override {
    const Work& w = tp_.works[plan.ops[op].work];
    if (w.kind == WorkKind::AttentionForward || w.kind == WorkKind::MlpForward)
      return c_.forward * kPicosPerNs;
    if (w.kind == WorkKind::AttentionBackward || w.kind == WorkKind::MlpBackward)
      return (w.part == BackwardPart::Weight ? c_.weight_backward : c_.input_backward) *
             kPicosPerNs;
    return 0;
  }

 private:
  const TrainingPlan& tp_;
  plan_detail::ZeroBubbleVCosts c_;
};

TEST(parallelPipeline, ZeroBubbleVRunsEachStageAsTheVPipelineTimesItsOrder) {
  // Stage s holds virtual stages s and 2p - 1 - s (16 / 2p layers each here), the embedding and
  // the loss both on stage 0. Its passes timed as the schedule orders them and no communication
  // time: the engine's step, and each rank's idle time, are what the reference V executor gives
  // for the same orders.
  for (int p : {2, 4}) {
    for (int m : {2, 2 * p, 3 * p + 1}) {
      const json doc = pipeline_doc(p, m, 2, "zero-bubble");
      const Scenario s = resolve_scenario(doc);
      const TrainingPlan tp = build_training_plan(s, true);
      EXPECT_EQ(tp.stages[0].layers, 16 / p);
      const plan_detail::ZeroBubbleVCosts c = plan_detail::zero_bubble_v_costs(s);
      std::vector<std::vector<plan_detail::PassStep>> orders;
      for (int st = 0; st < p; ++st) orders.push_back(plan_detail::zero_bubble_v_schedule(m, p, st, c));
      const std::int64_t blocks = 2 * 16 / (2 * p);  // attention and MLP of each layer of a chunk
      const plan_detail::VReplay ref = plan_detail::replay_v_pipeline(
          orders, blocks * c.forward, blocks * c.input_backward, blocks * c.weight_backward);
      ZeroBubbleVCompute compute(tp, c);
      InstantComm comm;
      const EngineResult r = run_engine(tp.plan, compute, comm);
      EXPECT_EQ(r.makespan, ref.makespan * kPicosPerNs) << "p " << p << " m " << m;
      for (int rank = 0; rank < p; ++rank) {
        const StepBreakdown b = breakdown_of_rank(tp, r, rank);
        EXPECT_NEAR(b.bubble_s, static_cast<double>(ref.idle[static_cast<std::size_t>(rank)]) * 1e-9,
                    1e-12)
            << "p " << p << " m " << m << " rank " << rank;
      }
    }
  }
}

// Bytes rank 0 sends on its TP group in the forward of layer 0: two all-reduces of the s x b x h
// 16-bit activation, each 2(t - 1)/t of it.
TEST(parallelTensor, TwoAllReducesPerLayerForward) {
  for (int t : {2, 4, 8}) {
    json doc = {{"model", "gpt3-6.7b"},
                {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}}},
                {"training", {{"micro_batch_size", 2}, {"gradient_accumulation_steps", 1}}},
                {"parallel", {{"tp", t}}},
                {"sim", {{"allow_oom", true}}}};
    Scenario s = resolve_scenario(doc);
    TrainingPlan tp = build_training_plan(s, true);
    const Plan& plan = tp.plan;
    double bytes = 0;
    int count = 0;
    for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
      const Op& op = plan.ops[id];
      const std::string& name = plan.names[op.name];
      if (op.kind != OpKind::Collective || name.find("tp ") != 0) continue;
      if (name.find("fwd") == std::string::npos || name.find(" L0") == std::string::npos) continue;
      const Collective& c = plan.collectives[op.work];
      bytes += ring_bytes_sent(c.kind, plan.cost_size(c.group), c.bytes);
      ++count;
    }
    const double sbh = 2.0 * 2048 * 4096;  // b = 2, s = 2048, h = 4096 (GPT-3 6.7B)
    EXPECT_EQ(count, 2);
    EXPECT_DOUBLE_EQ(bytes, 2 * 2.0 * (t - 1) / t * sbh * 2);
  }
}

// FP8 under sequence parallelism: Transformer Engine quantizes a column-parallel linear's input
// before the all-gather and, in backward, a row-parallel linear's output gradient; torchao gathers
// FP8 inputs in forward only. The reduce-scatters stay 16-bit. A dense layer's two blocks each
// gather s b h elements once per pass: 1 byte each in FP8 (tensorwise: one scale per tensor).
// Megatron's backward also gathers each block's saved input again for its wgrad, in FP8 as in
// forward; torchtitan saved the gathered input and gathers none.
TEST(parallelTensor, Fp8GathersTheLinearInputsInOneByte) {
  auto buffers = [](const std::string& framework, const char* precision, const char* pass) {
    json doc = testing_plan::llama8b_one_node(framework, framework == "fsdp" ? 3 : 1, 2);
    doc["parallel"]["tp"] = 4;
    doc["parallel"]["sequence_parallel"] = true;
    doc["training"]["precision"] = precision;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    std::map<std::string, double> bytes;  // per collective kind, layer 0's blocks
    for (OpId id = 0; id < tp.plan.ops.size() && tp.plan.ops[id].rank == 0; ++id) {
      const Op& op = tp.plan.ops[id];
      const std::string& name = tp.plan.names[op.name];
      if (op.kind != OpKind::Collective || name.find("tp ") != 0) continue;
      if (name.find(pass) == std::string::npos || name.find(" L0") == std::string::npos) continue;
      const bool input = name.find(" input ") != std::string::npos;
      bytes[name.substr(0, name.find(' ', 3)) + (input ? " input" : "")] +=
          tp.plan.collectives[op.work].bytes;
    }
    return bytes;
  };
  const double sbh = 2.0 * 8192 * 4096;  // llama3-8b: b = 2, s = 8192, h = 4096
  for (const char* pass : {"fwd", "bwd"}) {
    auto bf16 = buffers("megatron", "bf16", pass), fp8 = buffers("megatron", "fp8", pass);
    EXPECT_DOUBLE_EQ(bf16["tp all_gather"], 2 * 2 * sbh) << pass;
    EXPECT_DOUBLE_EQ(fp8["tp all_gather"], 2 * 1 * sbh) << pass;
    EXPECT_DOUBLE_EQ(fp8["tp reduce_scatter"], bf16["tp reduce_scatter"]) << pass;
  }
  auto bf16 = buffers("megatron", "bf16", "bwd"), fp8 = buffers("megatron", "fp8", "bwd");
  EXPECT_DOUBLE_EQ(bf16["tp all_gather input"], 2 * 2 * sbh);
  EXPECT_DOUBLE_EQ(fp8["tp all_gather input"], 2 * 1 * sbh);
  EXPECT_DOUBLE_EQ(buffers("fsdp", "fp8", "fwd")["tp all_gather"], 2 * 1 * sbh);
  EXPECT_DOUBLE_EQ(buffers("fsdp", "fp8", "bwd")["tp all_gather"], 2 * 2 * sbh);
  EXPECT_EQ(buffers("fsdp", "fp8", "bwd").count("tp all_gather input"), 0u);
}

// torchtitan's op-level checkpointing (recompute selective-op) replays each transformer block's
// forward in the backward and returns only the saved ops' outputs: matmuls, attention and
// reduce-scatters (models/llama3/parallelize_llama.py _save_list at 820504e2, 2025-06). The
// sequence-parallel all-gather of each block's input is replayed, so the backward gathers both
// blocks' inputs again: 2 blocks x s b h elements x 2 bytes per layer. Without checkpointing
// autograd keeps the gathered inputs and gathers none; the head is not checkpointed.
TEST(parallelTensor, TorchtitansOpCheckpointGathersTheBlockInputsAgain) {
  auto input_gathers = [](const char* recompute) {
    json doc = testing_plan::llama8b_one_node("fsdp", 3, 2);
    doc["parallel"]["tp"] = 4;
    doc["parallel"]["sequence_parallel"] = true;
    doc["parallel"]["recompute"] = recompute;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    double layer0 = 0;
    int all = 0;
    for (OpId id = 0; id < tp.plan.ops.size() && tp.plan.ops[id].rank == 0; ++id) {
      const Op& op = tp.plan.ops[id];
      const std::string& name = tp.plan.names[op.name];
      if (op.kind != OpKind::Collective || name.rfind("tp all_gather input ", 0) != 0) continue;
      ++all;
      if (name.find(" L0") != std::string::npos) layer0 += tp.plan.collectives[op.work].bytes;
    }
    return std::make_pair(layer0, all);
  };
  const double sbh = 2.0 * 8192 * 4096;  // llama3-8b: b = 2, s = 8192, h = 4096
  const auto [op_bytes, op_count] = input_gathers("selective-op");
  EXPECT_DOUBLE_EQ(op_bytes, 2 * 2 * sbh);
  EXPECT_EQ(op_count, 2 * 32);  // every layer's two blocks, none for the head
  EXPECT_EQ(input_gathers("none").second, 0);
}

TEST(parallelTensor, SequenceParallelMovesTheSameBytes) {
  // A reduce-scatter plus an all-gather each send (t - 1)/t of the activation: together what
  // one all-reduce sends.
  auto tp_bytes = [](bool sp) {
    json doc = {{"model", "gpt3-6.7b"},
                {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}}},
                {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 1}}},
                {"parallel", {{"tp", 4}, {"sequence_parallel", sp}}},
                {"sim", {{"allow_oom", true}}}};
    Scenario s = resolve_scenario(doc);
    return bytes_of_rank0(s.cluster, build_training_plan(s, true)).sent[1];
  };
  EXPECT_DOUBLE_EQ(tp_bytes(true), tp_bytes(false));
}

// Full recomputation reruns each layer's forward in the backward (Megatron-core's
// CheckpointFunction.backward calls the layer's forward again), so each of a layer's two blocks
// moves its forward collective once more: 2 L all-reduces of the s x b x h activation more per
// micro-batch, each sending 2 (t - 1) / t of it from a ring member. Selective recomputation
// reruns only the attention core, which has none.
TEST(parallelTensor, FullRecomputationReplaysTheForwardCollectives) {
  const int t = 4, layers = 32;                // GPT-3 6.7B: 32 layers, hidden 4096
  const double sbh_bytes = 2.0 * 2048 * 4096;  // 16-bit, s = 2048, b = 1, h = 4096
  for (bool sp : {false, true}) {
    auto tp_bytes = [&](const char* recompute) {
      json doc = {{"model", "gpt3-6.7b"},
                  {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}}},
                  {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 1}}},
                  {"parallel", {{"tp", t}, {"sequence_parallel", sp}, {"recompute", recompute}}},
                  {"sim", {{"allow_oom", true}}}};
      Scenario s = resolve_scenario(doc);
      return bytes_of_rank0(s.cluster, build_training_plan(s, true)).sent[1];
    };
    const double none = tp_bytes("none");
    EXPECT_DOUBLE_EQ(tp_bytes("full") - none, 2.0 * layers * 2.0 * (t - 1) / t * sbh_bytes)
        << "sequence_parallel " << sp;
    EXPECT_DOUBLE_EQ(tp_bytes("selective"), none) << "sequence_parallel " << sp;
  }
}

// DP bytes with ZeRO-2 under PP: every micro-batch reduces its gradients (m reduce-to-owner
// passes of F) and the step all-gathers once (F); ZeRO-1 reduces once and gathers once (2F):
// the ratio is (m + 1) / 2 (reduce to owners, the paper's accounting).
TEST(parallelPipeline, ZeroTwoUnderPipelineMultipliesDpBytes) {
  for (int m : {4, 8, 16}) {
    auto dp_bytes = [&](int stage) {
      json doc = pipeline_doc(4, m, 1, "1f1b");
      doc["cluster"]["num_gpus"] = 16;  // dp = 4
      doc["zero"] = {{"stage", stage}, {"use_multi_rank_bucket_allreduce", false}};
      Scenario s = resolve_scenario(doc);
      return bytes_of_rank0(s.cluster, build_training_plan(s, true)).sent[0];
    };
    EXPECT_NEAR(dp_bytes(2) / dp_bytes(1), (m + 1) / 2.0, 1e-12) << "m " << m;
  }
}

// Megatron-LM's scatter/gather optimisation (SC21 section 4.1) and DeepSpeed's partitioned pipe:
// without sequence parallelism each TP rank sends 1 / t of the s x b x h activation (and of its
// gradient) and the receiver all-gathers the whole tensor over TP. Stage 0 sends m activations
// and receives m gradients; each receive is followed by one all-gather of 2 s b h bytes.
TEST(parallelPipeline, ScatterGatherSendsATensorParallelShareAndGathersItAfterTheReceive) {
  const int t = 4, m = 3;
  const double sbh_bytes = 2.0 * 2048 * 4096;  // 16-bit, s = 2048, b = 1, h = 4096 (GPT-3 6.7B)
  struct Traffic {
    double sent = 0, received = 0, gathered = 0;
    int gathers = 0;
  };
  auto stage0 = [&](const std::string& framework, const json& scatter_gather) {
    json doc = {{"model", "gpt3-6.7b"},
                {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}}},
                {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", m}}},
                {"parallel", {{"tp", t}, {"pp", 2}, {"framework", framework}}},
                {"sim", {{"allow_oom", true}}}};
    if (!scatter_gather.is_null())
      doc["parallel"]["scatter_gather_tensors_in_pipeline"] = scatter_gather;
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    Traffic out;
    for (OpId id = 0; id < tp.plan.ops.size() && tp.plan.ops[id].rank == 0; ++id) {
      const Op& op = tp.plan.ops[id];
      if (op.kind != OpKind::Collective) continue;
      const std::string& name = tp.plan.names[op.name];
      const Collective& c = tp.plan.collectives[op.work];
      if (name.starts_with("send activations")) out.sent += c.bytes;
      if (name.starts_with("recv gradients")) out.received += c.bytes;
      if (name.starts_with("gather gradients")) {
        EXPECT_EQ(c.kind, CollectiveKind::AllGather) << name;
        EXPECT_EQ(tp.plan.cost_size(c.group), t) << name;
        out.gathered += c.bytes;
        ++out.gathers;
      }
    }
    return out;
  };
  const Traffic whole = stage0("megatron", nullptr), split = stage0("megatron", true);
  EXPECT_DOUBLE_EQ(whole.sent, m * sbh_bytes);
  EXPECT_DOUBLE_EQ(whole.received, m * sbh_bytes);
  EXPECT_EQ(whole.gathers, 0);
  EXPECT_DOUBLE_EQ(split.sent, m * sbh_bytes / t);
  EXPECT_DOUBLE_EQ(split.received, m * sbh_bytes / t);
  EXPECT_EQ(split.gathers, m);
  EXPECT_DOUBLE_EQ(split.gathered, m * sbh_bytes);
  // DeepSpeed's PipelineEngine partitions by default (pipe_partitioned, grad_partitioned).
  EXPECT_DOUBLE_EQ(stage0("deepspeed", nullptr).sent, split.sent);
  EXPECT_EQ(stage0("deepspeed", false).gathers, 0);
}

TEST(parallelPipeline, ScatterGatherIsRefusedOrUnusedWhereNoPipelineSplitsItsTensors) {
  json doc = pipeline_doc(2, 4, 1, "1f1b");
  doc["cluster"]["num_gpus"] = 4;
  doc["parallel"]["tp"] = 2;
  doc["parallel"]["framework"] = "nanotron";
  doc["parallel"]["scatter_gather_tensors_in_pipeline"] = true;
  try {
    resolve_scenario(doc);
    ADD_FAILURE() << "nanotron's pipeline accepted a scatter-gather";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "parallel.scatter_gather_tensors_in_pipeline");
  }
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["sequence_parallel"] = true;
  const Scenario sp = resolve_scenario(doc);
  ASSERT_EQ(sp.warnings.size(), 1u);
  EXPECT_EQ(sp.warnings[0].key_path, "parallel.scatter_gather_tensors_in_pipeline");
  EXPECT_FALSE(sp.splits_pipeline_tensors_over_tp());
}

}  // namespace
}  // namespace zerosim

namespace zerosim {
namespace {

// Korthikanti et al. 2022, eq. 5 and §4.2.3: under 1F1B stage 0 holds p micro-batches in flight
// of L/p layers each, i.e. L layers' activations whatever p; the interleaved schedule multiplies
// this by (1 + (p - 1)/(p v)). The engine's allocation timeline must peak there.
TEST(parallelPipelineMemory, StageZeroHoldsKorthikantisActivations) {
  for (int v : {1, 2, 4}) {
    const int p = 4, m = 8, layers = 16;
    json doc = {{"model",
                 {{"num_layers", layers}, {"hidden_size", 256}, {"num_attention_heads", 8},
                  {"vocab_size", 1000}, {"seq_length", 512}}},
                {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", p}}},
                {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", m}}},
                {"parallel", {{"pp", p}, {"virtual_stages", v}}},
                {"zero", {{"stage", 1}}}};
    Scenario s = resolve_scenario(doc);
    const StepReport rep = memory_report(s);
    const double per_layer = activation_bytes_per_layer(s.model, 1, 1, false, Recompute::None,
                                                        s.training.flash_attention);
    const double factor = v == 1 ? 1.0 : 1.0 + static_cast<double>(p - 1) / (p * v);
    const double expected = layers * per_layer * factor;
    const double got = static_cast<double>(
        rep.memory_per_stage.at(0).category_max[static_cast<int>(MemCategory::Activations)]);
    EXPECT_NEAR(got, expected, 1e-9 * expected) << "v " << v;
  }
}

}  // namespace
}  // namespace zerosim
