// Context parallelism against closed forms, on the tiny model of common.h (h = 64, 4 heads of 16,
// no GQA, s = 128, 2 layers) under Megatron. With cp ranks per sequence, each holds s / cp tokens
// and their keys and values, 2 x (s / cp) x b x (K + V width = 128) 16-bit values. The ring passes
// every chunk to the cp - 1 other ranks: per layer and micro-batch a rank sends
//   forward:  (cp - 1) chunks (the keys and values around the ring),
//   backward: 2 (cp - 1) chunks (the keys and values again, and their gradients),
//   plus (cp - 1) more when the backward recomputes the forward.
// a2a (Ulysses) instead trades each rank's s / cp tokens of all 4 heads for all s tokens of
// 4 / cp heads: an all-to-all of a buffer of the rank's own size, of which it sends (cp - 1) / cp.
// Per layer and micro-batch the buffers hold Q, K, V (192 wide) and the output (64) forward, the
// output and its gradient (128) and dQ, dK, dV (192) backward: 576 values per token, 832 when the
// backward recomputes the forward.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "sim/cost/work_kernels.h"
#include "sim/run/simulate.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using namespace testing_plan;

json cp_doc(int gpus, int cp, int gas, const char* recompute = "none") {
  json doc = tiny_doc(gpus, {{"stage", 1}}, gas);
  doc["parallel"]["cp"] = cp;
  doc["parallel"]["framework"] = "megatron";
  doc["parallel"]["recompute"] = recompute;
  return doc;
}

TEST(contextParallel, KeyValueBytesPerGpuFollowTheRing) {
  const double layers = 2, micro_batches = 3;
  for (const char* comm : {"p2p", "all_gather"}) {
    for (const char* recompute : {"none", "full"}) {
      for (int cp : {2, 4}) {
        json doc = cp_doc(8, cp, 3, recompute);
        doc["parallel"]["cp_comm_type"] = comm;
        const Simulation sim = simulate_step(resolve_scenario(doc));
        const double chunk = 2.0 * (128.0 / cp) * 128;
        const double chunks = std::string(recompute) == "full" ? 4 : 3;
        EXPECT_NEAR(sim.report.comm_bytes_per_gpu[4],
                    micro_batches * layers * chunks * (cp - 1) * chunk, 1e-6)
            << comm << " " << recompute << " cp " << cp;
      }
    }
  }
}

// Ulysses under Megatron-core (Transformer Engine) and under DeepSpeed, whose DistributedAttention
// is autograd over its all-to-alls: its backward exchanges the output's gradient, not the output
// again: 192 + 64 + 64 + 192 = 512 values per token, 768 when the backward recomputes the forward.
TEST(contextParallel, UlyssesAllToAllBytesPerGpu) {
  struct Case {
    const char* framework;
    double width, recomputed_width;
  };
  const double layers = 2, micro_batches = 3;
  for (const Case& c : {Case{"megatron", 576, 832}, Case{"deepspeed", 512, 768}}) {
    for (const char* recompute : {"none", "full"}) {
      for (int cp : {2, 4}) {
        json doc = cp_doc(8, cp, 3, recompute);
        doc["parallel"]["framework"] = c.framework;
        doc["parallel"]["cp_comm_type"] = "a2a";
        const Simulation sim = simulate_step(resolve_scenario(doc));
        const double width = std::string(recompute) == "full" ? c.recomputed_width : c.width;
        const double buffers = 2.0 * (128.0 / cp) * width;
        EXPECT_NEAR(sim.report.comm_bytes_per_gpu[4],
                    micro_batches * layers * buffers * (cp - 1) / cp, 1e-6)
            << c.framework << " " << recompute << " cp " << cp;
      }
    }
  }
}

// Hierarchical CP (a2a+p2p, sizes [a, r], a x r = cp): the a2a level's all-to-alls as Ulysses'
// over a ranks (forward Q, K, V and the output; backward the output's gradient alone, 64, and
// dQ, dK, dV: 512 values per token, 768 recomputing), then the ring over r ranks of the
// exchanged keys and values, a times the tokens of 1 / a of the heads: the rank's own 2 x (s /
// cp) x 128 bytes, (r - 1) of them sent forward and 2 (r - 1) backward (once more recomputing).
TEST(contextParallel, HierarchicalAllToAllThenRingBytesPerGpu) {
  const double layers = 2, micro_batches = 3, cp = 4;
  for (const char* recompute : {"none", "full"}) {
    const bool full = std::string(recompute) == "full";
    for (const auto& [a, r] : {std::pair{2, 2}, std::pair{1, 4}, std::pair{4, 1}}) {
      json doc = cp_doc(8, 4, 3, recompute);
      doc["parallel"]["cp_comm_type"] = "a2a+p2p";
      doc["parallel"]["hierarchical_context_parallel_sizes"] = {a, r};
      const Simulation sim = simulate_step(resolve_scenario(doc));
      const double tokens = 128.0 / cp;
      const double a2a = 2.0 * tokens * (full ? 768 : 512) * (a - 1) / a;
      const double ring = 2.0 * tokens * 128 * (full ? 4 : 3) * (r - 1);
      EXPECT_NEAR(sim.report.comm_bytes_per_gpu[4], micro_batches * layers * (a2a + ring), 1e-6)
          << recompute << " [" << a << ", " << r << "]";
    }
  }
}

// Megatron's hierarchical groups (parallel_state.py create_hierarchical_groups): the first level
// consecutive ranks, the second the ranks at the same place in each first-level group. CP 4 as
// [2, 2] over dp 2 (TP 1, one stage): rank 0 exchanges all-to-all with 1 and rings with 2.
TEST(contextParallel, HierarchicalGroupsAreConsecutiveThenStrided) {
  json doc = cp_doc(8, 4, 1);
  doc["parallel"]["cp_comm_type"] = "a2a+p2p";
  doc["parallel"]["hierarchical_context_parallel_sizes"] = {2, 2};
  const TrainingPlan tp = build_training_plan(resolve_scenario(doc), false);
  std::set<std::vector<int>> a2a, ring;
  for (const Op& op : tp.plan.ops) {
    if (op.kind != OpKind::Collective || op.rank != 0) continue;
    const std::string& name = tp.plan.names[op.name];
    const Collective& c = tp.plan.collectives[static_cast<std::size_t>(op.work)];
    std::vector<int> ranks;
    for (std::uint32_t i = 0; i < c.member_count; ++i)
      ranks.push_back(tp.plan.ops[tp.plan.members[c.member_begin + i]].rank);
    if (name.starts_with("cp qkv all_to_all")) a2a.insert(ranks);
    if (name.starts_with("cp kv all_gather")) ring.insert(ranks);
  }
  EXPECT_EQ(a2a, (std::set<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(ring, (std::set<std::vector<int>>{{0, 2}}));
}

// DeepSpeed's engine reduces gradients in seq_parallel_communication_data_type (fp32 unless set)
// when sequence parallelism is on, in place of communication_data_type: dp 4 x cp 2 sends what
// dp 8 sends with the same dtype named as communication_data_type.
TEST(contextParallel, DeepSpeedUlyssesReducesGradientsInItsOwnDtype) {
  auto dp_bytes = [](int cp, const json& zero) {
    json doc = cp_doc(8, cp, 2);
    doc["parallel"]["framework"] = "deepspeed";
    doc["parallel"]["cp_comm_type"] = "a2a";
    doc["zero"].update(zero);
    return simulate_step(resolve_scenario(doc)).report.comm_bytes_per_gpu[0];
  };
  const double fp32 = dp_bytes(1, {{"communication_data_type", "fp32"}});
  const double bf16 = dp_bytes(1, {{"communication_data_type", "bf16"}});
  EXPECT_GT(fp32, bf16);
  EXPECT_DOUBLE_EQ(dp_bytes(2, json::object()), fp32);
  EXPECT_DOUBLE_EQ(dp_bytes(2, {{"communication_data_type", "bf16"}}), fp32);
  EXPECT_DOUBLE_EQ(dp_bytes(2, {{"seq_parallel_communication_data_type", "bf16"}}), bf16);
}

// Gradients are reduced over the dp x cp ranks that hold the same weights: 8 GPUs as dp 4 x
// cp 2 send what dp 8 sends.
TEST(contextParallel, GradientsAreReducedOverDpTimesCp) {
  const Simulation with_cp = simulate_step(resolve_scenario(cp_doc(8, 2, 2)));
  const Simulation without = simulate_step(resolve_scenario(cp_doc(8, 1, 1)));
  EXPECT_GT(with_cp.report.comm_bytes_per_gpu[0], 0);
  EXPECT_DOUBLE_EQ(with_cp.report.comm_bytes_per_gpu[0], without.report.comm_bytes_per_gpu[0]);
  EXPECT_EQ(with_cp.plan.stages[0].dp_partition, without.plan.stages[0].dp_partition);
}

// A rank computes its s / cp tokens: every GEMM has s / cp rows, the attention core and the
// elementwise traffic are 1 / cp of a whole sequence's, and so are the activations it keeps.
TEST(contextParallel, WorkAndActivationsDivideByCp) {
  const ModelSpec m = model_preset("llama2-7b", "model");
  const LayerWork one = layer_forward_work(m, 2, 2, true, true, false, 1, 1.0, 1);
  const LayerWork four = layer_forward_work(m, 2, 2, true, true, false, 1, 1.0, 4);
  ASSERT_EQ(one.gemms.size(), four.gemms.size());
  for (std::size_t i = 0; i < one.gemms.size(); ++i) {
    EXPECT_EQ(four.gemms[i].m * 4, one.gemms[i].m);
    EXPECT_EQ(four.gemms[i].n, one.gemms[i].n);
  }
  EXPECT_DOUBLE_EQ(four.attention_flops * 4, one.attention_flops);
  EXPECT_DOUBLE_EQ(four.elementwise_bytes * 4, one.elementwise_bytes);
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    for (bool flash : {true, false}) {
      EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, 2, 2, true, r, flash, false, 4) * 4,
                       activation_bytes_per_layer(m, 2, 2, true, r, flash, false, 1));
    }
  }
}

// A folded plan times a context-parallel step as the full plan does (the CP pairs stay in a
// node here, the DP reduction crosses the fabric).
TEST(contextParallel, FoldedStepEqualsTheFullOne) {
  for (const char* comm : {"p2p", "all_gather", "a2a"}) {
    json doc = cp_doc(16, 2, 2);
    doc["parallel"]["cp_comm_type"] = comm;
    doc["cluster"] = {{"preset", "dgx-h100"}, {"nodes", 2}};
    doc["sim"] = {{"ranks", "folded"}};
    const double folded = simulate_step(resolve_scenario(doc)).report.step_time_s;
    doc["sim"]["ranks"] = "all";
    EXPECT_EQ(folded, simulate_step(resolve_scenario(doc)).report.step_time_s) << comm;
  }
  json doc = cp_doc(16, 4, 2);
  doc["parallel"]["cp_comm_type"] = "a2a+p2p";
  doc["parallel"]["hierarchical_context_parallel_sizes"] = {2, 2};
  doc["cluster"] = {{"preset", "dgx-h100"}, {"nodes", 2}};
  doc["sim"] = {{"ranks", "folded"}};
  const double folded = simulate_step(resolve_scenario(doc)).report.step_time_s;
  doc["sim"]["ranks"] = "all";
  EXPECT_EQ(folded, simulate_step(resolve_scenario(doc)).report.step_time_s) << "a2a+p2p";
}

TEST(contextParallel, RefusesWhatItDoesNotSimulate) {
  auto with = [](const std::function<void(json&)>& edit) {
    return input_error_key(cp_doc(8, 2, 1), edit);
  };
  EXPECT_EQ(with([](json&) {}), "(accepted)");
  // DeepSpeed's is Ulysses: a2a only, on contiguous pieces (cp, not 2 x cp, divides s).
  EXPECT_EQ(with([](json& d) { d["parallel"]["framework"] = "deepspeed"; }),
            "parallel.cp_comm_type");
  EXPECT_EQ(with([](json& d) {
              d["parallel"]["framework"] = "deepspeed";
              d["parallel"]["cp_comm_type"] = "a2a";
              d["model"]["seq_length"] = 126;
              d["model"]["max_position_embeddings"] = 128;
            }),
            "(accepted)");
  EXPECT_EQ(with([](json& d) {
              d["parallel"]["framework"] = "deepspeed";
              d["parallel"]["cp_comm_type"] = "a2a";
              d["model"]["seq_length"] = 127;
              d["model"]["max_position_embeddings"] = 128;
            }),
            "parallel.cp");
  EXPECT_EQ(with([](json& d) { d["parallel"]["framework"] = "nanotron"; }), "parallel.cp");
  EXPECT_EQ(with([](json& d) { d["parallel"]["cp_comm_type"] = "a2a"; }), "(accepted)");
  // a2a+p2p: Megatron asserts the hierarchical sizes, two levels multiplying to cp; the a2a level
  // splits the heads as a2a does.
  EXPECT_EQ(with([](json& d) { d["parallel"]["cp_comm_type"] = "a2a+p2p"; }),
            "parallel.cp_comm_type");
  auto hierarchical = [&](const json& sizes, const std::function<void(json&)>& more = {}) {
    return with([&](json& d) {
      d["parallel"]["cp_comm_type"] = "a2a+p2p";
      d["parallel"]["hierarchical_context_parallel_sizes"] = sizes;
      if (more) more(d);
    });
  };
  EXPECT_EQ(hierarchical({2, 1}), "(accepted)");
  EXPECT_EQ(hierarchical({2, 2}), "parallel.hierarchical_context_parallel_sizes");
  EXPECT_EQ(hierarchical({2}), "parallel.hierarchical_context_parallel_sizes");
  EXPECT_EQ(hierarchical({8, 1}, [](json& d) { d["parallel"]["cp"] = 8; }),
            "parallel.hierarchical_context_parallel_sizes");
  EXPECT_EQ(hierarchical({2, 4}, [](json& d) { d["parallel"]["cp"] = 8; }), "(accepted)");
  EXPECT_EQ(hierarchical({2, 1}, [](json& d) { d["parallel"]["framework"] = "fsdp"; }),
            "parallel.cp_comm_type");
  // Given without a2a+p2p they change nothing: said on their key.
  json unused = cp_doc(8, 2, 1);
  unused["parallel"]["hierarchical_context_parallel_sizes"] = {2, 1};
  const Scenario s = resolve_scenario(unused);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0].key_path, "parallel.hierarchical_context_parallel_sizes");
  EXPECT_EQ(with([](json& d) {
              d["parallel"]["cp_comm_type"] = "a2a";
              d["parallel"]["framework"] = "fsdp";
            }),
            "parallel.cp_comm_type");
  // Transformer Engine's a2a attention needs cp to divide the 4 heads of a rank (2 with tp 2).
  EXPECT_EQ(with([](json& d) {
              d["parallel"]["cp_comm_type"] = "a2a";
              d["parallel"]["cp"] = 8;
            }),
            "parallel.cp_comm_type");
  EXPECT_EQ(with([](json& d) {
              d["parallel"]["cp_comm_type"] = "a2a";
              d["parallel"]["cp"] = 4;
              d["parallel"]["tp"] = 2;
            }),
            "parallel.cp_comm_type");
  EXPECT_EQ(with([](json& d) { d["parallel"]["cp"] = 3; }), "parallel");  // 3 does not divide 8 GPUs
  EXPECT_EQ(with([](json& d) {
              d["model"]["seq_length"] = 102;
              d["model"]["max_position_embeddings"] = 128;
            }),
            "parallel.cp");  // 2 x cp = 4 does not divide 102
}

}  // namespace
}  // namespace zerosim
