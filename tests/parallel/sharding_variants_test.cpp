// ZeRO++ (Wang et al. 2023, arXiv:2306.10209) and hybrid sharding (MiCS, PyTorch FSDP
// HYBRID_SHARD) against closed forms, on two DGX A100 nodes (16 GPUs, DP 16) with the tiny model
// and persistence off so that every unit is gathered:
//   qwZ:  each gather moves int8 codes (half the fp16 bytes) plus one fp32 scale per 8,000
//         elements of a rank's piece, as a second all-gather.
//   hpZ:  the first forward gathers over the 16 ranks; every later gather (backward, later
//         micro-batches) over the 8 ranks of a node: no inter-node bytes.
//   qgZ:  a bucket of E gradient elements leaves as int4 (E/2 bytes) through a node-local
//         all-to-all, then E/2/8 bytes across nodes.
//   MiCS: model states partitioned over the shard group (k = 8): 12 Phi / k bytes of optimizer
//         states; gathers inside the shard group.
#include <gtest/gtest.h>

#include <set>
#include <vector>
#include <string>

#include "sim/core/error.h"
#include "sim/run/simulate.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using namespace testing_plan;

json variant_doc(json zero, int gas = 1, const char* framework = "deepspeed") {
  zero["stage"] = zero.value("stage", 3);
  zero["stage3_param_persistence_threshold"] = 0;
  json d = tiny_doc(16, std::move(zero), gas);
  d["parallel"]["framework"] = framework;
  return d;
}

struct Gathers {
  Bytes codes = 0, scales = 0, fp16 = 0;
  int count = 0;
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Rank 0's collectives whose op name starts with `prefix`.
std::vector<OpId> ops_named(const Plan& plan, const char* prefix) {
  std::vector<OpId> out;
  for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
    if (plan.ops[id].kind == OpKind::Collective && starts_with(plan.names[plan.ops[id].name], prefix)) {
      out.push_back(id);
    }
  }
  return out;
}

std::set<int> nodes_of(const Plan& plan, OpId op) {
  const int g = plan.collectives[plan.ops[op].work].group;
  std::set<int> nodes;
  for (int i = 0; i < plan.cost_size(g); ++i) nodes.insert(plan.cost_members(g)[i] / 8);
  return nodes;
}

TEST(ZeroPlusPlus, QuantizedWeightsHalveTheGatherBytesPlusScales) {
  const TrainingPlan plain = build_training_plan(resolve_scenario(variant_doc(json::object())), true);
  const TrainingPlan qwz = build_training_plan(
      resolve_scenario(variant_doc({{"zero_quantized_weights", true}})), true);
  Bytes fp16 = 0, codes = 0, scales = 0, expected_scales = 0;
  for (OpId id : ops_named(plain.plan, "gather(")) {
    const Bytes b = plain.plan.collectives[plain.plan.ops[id].work].bytes;
    fp16 += b;
    const Bytes piece = b / 2 / 16;  // the tiny units divide by 16
    expected_scales += 4 * ((piece + 7999) / 8000) * 16;
  }
  for (OpId id : ops_named(qwz.plan, "gather(")) {
    const std::string& name = qwz.plan.names[qwz.plan.ops[id].name];
    const Bytes b = qwz.plan.collectives[qwz.plan.ops[id].work].bytes;
    if (name.find(" int8") != std::string::npos) codes += b;
    if (name.find(" scales") != std::string::npos) scales += b;
  }
  EXPECT_GT(fp16, 0);
  EXPECT_EQ(2 * codes, fp16);
  EXPECT_EQ(scales, expected_scales);
}

TEST(ZeroPlusPlus, HpzKeepsEveryGatherButTheFirstForwardInsideTheNode) {
  // Reuse distance 0 and no prefetch (which would keep what it skips past): the backward
  // gathers again what the forward released.
  const json hpz_zero = {{"zero_hpz_partition_size", 8},
                         {"stage3_max_reuse_distance", 0},
                         {"stage3_prefetch_bucket_size", 0}};
  const TrainingPlan tp = build_training_plan(resolve_scenario(variant_doc(hpz_zero, 2)), false);
  int first_forward = 0, later = 0;
  for (OpId id : ops_named(tp.plan, "gather(")) {
    const std::string& name = tp.plan.names[tp.plan.ops[id].name];
    const std::set<int> nodes = nodes_of(tp.plan, id);
    if (nodes.size() == 2) {
      EXPECT_TRUE(starts_with(name, "gather(fwd)")) << name;
      ++first_forward;
    } else {
      EXPECT_EQ(nodes.size(), 1u) << name;
      ++later;
    }
  }
  // Two micro-batches: the first forward's gathers span both nodes; the second forward's and
  // both backwards' stay in the node.
  EXPECT_GT(first_forward, 0);
  EXPECT_EQ(later, 3 * first_forward);
  const StepReport hpz = simulate_step(resolve_scenario(variant_doc(hpz_zero, 2))).report;
  const StepReport plain =
      simulate_step(resolve_scenario(variant_doc(
                        {{"stage3_max_reuse_distance", 0}, {"stage3_prefetch_bucket_size", 0}}, 2)))
          .report;
  EXPECT_LT(hpz.internode_bytes_per_gpu[0], plain.internode_bytes_per_gpu[0]);
}

TEST(ZeroPlusPlus, QuantizedGradientsMoveInt4NodeByNode) {
  const TrainingPlan tp = build_training_plan(
      resolve_scenario(variant_doc({{"zero_quantized_gradients", true}})), true);
  const TrainingPlan rs = build_training_plan(resolve_scenario(variant_doc(json::object())), true);
  const std::vector<OpId> node = ops_named(tp.plan, "grad reduce_scatter");
  std::vector<OpId> intra, inter;
  for (OpId id : node) {
    const std::string& name = tp.plan.names[tp.plan.ops[id].name];
    (name.find("(nodes)") != std::string::npos ? inter : intra).push_back(id);
  }
  const std::vector<OpId> plain = ops_named(rs.plan, "grad reduce_scatter");
  ASSERT_EQ(intra.size(), plain.size());
  ASSERT_EQ(inter.size(), plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const Bytes fp16 = rs.plan.collectives[rs.plan.ops[plain[i]].work].bytes;
    const Bytes elements = fp16 / 2;
    const Bytes scales = 4 * ((elements + 63) / 64);  // one per hidden (64) elements
    EXPECT_EQ(tp.plan.collectives[tp.plan.ops[intra[i]].work].bytes, elements / 2 + scales);
    EXPECT_EQ(tp.plan.collectives[tp.plan.ops[inter[i]].work].bytes, (elements / 2 + scales + 7) / 8);
    EXPECT_EQ(nodes_of(tp.plan, intra[i]).size(), 1u);
    EXPECT_EQ(tp.plan.collectives[tp.plan.ops[intra[i]].work].kind, CollectiveKind::AllToAll);
  }
}

TEST(HybridSharding, MicsPartitionsTheStatesOverTheShardGroup) {
  const StepReport rep = memory_report(resolve_scenario(variant_doc({{"mics_shard_size", 8}})));
  EXPECT_EQ(rep.memory.category_max[static_cast<int>(MemCategory::OptimizerStates)],
            12 * kTinyPhi / 8);
  const TrainingPlan tp = build_training_plan(
      resolve_scenario(variant_doc({{"mics_shard_size", 8}})), false);
  for (OpId id : ops_named(tp.plan, "gather(")) EXPECT_EQ(nodes_of(tp.plan, id).size(), 1u);
  // Once per step, the reduced shards are all-reduced across the two replicas.
  EXPECT_EQ(ops_named(tp.plan, "grad all_reduce (replicas)").size(), 1u);
}

TEST(HybridSharding, FsdpHybridShardAllReducesEveryBucketAcrossReplicas) {
  // Sent per GPU per step, F = 2 Phi, k = 8 shard ranks, r = 2 replicas, stage 3 resharding
  // after forward (reuse distance 0), one micro-batch: gathers forward and backward 2F(k-1)/k, reduce-scatter F(k-1)/k, all-reduce of
  // the F/k shard across replicas 2(F/k)(r-1)/r.
  const Scenario s = resolve_scenario(
      variant_doc({{"mics_shard_size", 8}, {"stage3_max_reuse_distance", 0}}, 1, "fsdp"));
  const StepReport rep = simulate_step(s).report;
  const double F = 2.0 * kTinyPhi, k = 8, r = 2;
  EXPECT_NEAR(rep.comm_bytes_per_gpu[0],
              3 * F * (k - 1) / k + 2 * (F / k) * (r - 1) / r, 1e-6 * F);
}

TEST(PerParameterStage3, OneCollectivePerTensorWithHostListWorkPerRank) {
  // The tiny GPT: attention has 2 weights (fused QKV, output), 2 biases and a LayerNorm (2);
  // the MLP 2 weights, 2 biases, a LayerNorm; the embedding a token and a position table.
  // Reuse distance 0 and no prefetch: a forward and a backward gather per unit.
  const json zero = {{"stage3_implementation", "per-parameter"}, {"stage3_max_reuse_distance", 0}};
  const TrainingPlan tp = build_training_plan(resolve_scenario(variant_doc(zero)), true);
  int gathers = 0, reductions = 0, host = 0;
  for (OpId id = 0; id < tp.plan.ops.size(); ++id) {
    const Op& op = tp.plan.ops[id];
    const std::string& name = tp.plan.names[op.name];
    if (op.kind == OpKind::Collective && starts_with(name, "gather(")) ++gathers;
    if (op.kind == OpKind::Collective && starts_with(name, "grad reduce_scatter")) ++reductions;
    if (op.kind == OpKind::Compute && starts_with(name, "tensor list")) {
      ++host;
      // Two host ops (a narrow and a copy) for each of the 16 DP ranks whose views the list holds.
      EXPECT_EQ(tp.works[op.work].elements, 2 * 16);
      EXPECT_EQ(op.stream, Stream::Compute);
    }
  }
  // Gathered: embedding (2 tensors), 2 layers x (attention 2 + MLP 2) and the head (tied
  // embeddings: its final LayerNorm, 2 tensors, partitioned with the threshold at 0), forward
  // and backward.
  EXPECT_EQ(gathers, 2 * (2 + 2 * (2 + 2) + 2));
  // Reduced: every tensor once: embedding 2, layers 2 x (6 + 6), head 2 (its LayerNorm).
  EXPECT_EQ(reductions, 2 + 2 * 12 + 2);
  EXPECT_EQ(host, gathers + reductions);
}

// DeepSpeed's stage 3 hooks are per nn.Module (fetch) and per parameter (gradient). The tiny GPT
// (h = 64, 4 heads, GELU MLP of 4h, biases, LayerNorms, 1000-token vocabulary, tied head) has a
// fused QKV weight of 3h^2 = 12288 elements, an output projection of h^2 = 4096 and two MLP
// weights of 4h^2 = 16384 per layer.
TEST(DeepSpeedStage3, EachModuleIsGatheredByItsOwnCall) {
  const TrainingPlan tp = build_training_plan(resolve_scenario(variant_doc(json::object())), true);
  std::vector<Bytes> attention, mlp;
  for (OpId id : ops_named(tp.plan, "gather(fwd) attention L0")) {
    attention.push_back(tp.plan.collectives[tp.plan.ops[id].work].bytes);
  }
  for (OpId id : ops_named(tp.plan, "gather(fwd) mlp L0")) {
    mlp.push_back(tp.plan.collectives[tp.plan.ops[id].work].bytes);
  }
  // 16-bit weights over 16 ranks; the biases (3h + h) and the LayerNorm (2h) ride with the first
  // module: 12288 + 384 = 12672 elements, 792 per rank.
  EXPECT_EQ(attention, (std::vector<Bytes>{2 * 792 * 16, 2 * 4096}));
  // fc1 with the biases (4h + h) and the LayerNorm (2h): 16384 + 448; fc2 alone.
  EXPECT_EQ(mlp, (std::vector<Bytes>{2 * ceil_div(16384 + 448, 16) * 16, 2 * 16384}));
  // FSDP gathers each wrapped unit's flat parameter with one call.
  const TrainingPlan fsdp =
      build_training_plan(resolve_scenario(variant_doc(json::object(), 1, "fsdp")), true);
  EXPECT_EQ(ops_named(fsdp.plan, "gather(fwd) attention L0").size(), 1u);
}

TEST(DeepSpeedStage3, GradientsLargerThanTheBucketAreReducedAlone) {
  // Buckets of 10000 elements: each MLP weight (16384) and each fused QKV (12288) is reduced
  // alone, and with the embedding's token table (64000) those are the only reductions above the
  // bucket. Every gradient element is reduced exactly once.
  const Scenario s = resolve_scenario(variant_doc({{"reduce_bucket_size", 10000}}));
  const TrainingPlan tp = build_training_plan(s, true);
  std::multiset<std::int64_t> sizes;
  std::int64_t reduced = 0;
  for (OpId id : ops_named(tp.plan, "grad reduce_scatter")) {
    const std::int64_t elements = tp.plan.collectives[tp.plan.ops[id].work].bytes / 2;
    reduced += elements;
    if (elements > 10000) sizes.insert(elements);
  }
  EXPECT_EQ(sizes, (std::multiset<std::int64_t>{12288, 12288, 16384, 16384, 16384, 16384, 64000}));
  // GPT-2's count: 2 layers of 12h^2 + 13h, a token and a position table (1000 + 128) h and the
  // final LayerNorm 2h.
  EXPECT_EQ(reduced, 2 * (12 * 64 * 64 + 13 * 64) + (1000 + 128) * 64 + 2 * 64);
}

// DeepSpeed decides persistence per tensor (ds_numel <= stage3_param_persistence_threshold) and,
// after the step, gathers every persistent tensor with a call of its own (stage3.py _post_step,
// partition_parameters.py _allgather_params_coalesced). With the threshold at 1000 the tiny
// GPT's biases and LayerNorms persist and its weights do not: GPT-2's count, 13h per layer
// (QKV, output, fc1 and fc2 biases 3h + h + 4h + h, two LayerNorms 4h) and the final LayerNorm
// 2h, in 8 tensors per layer and 2; the modules' gathers carry their weights alone.
TEST(DeepSpeedStage3, BiasesAndNormsPersistAndAreGatheredOneByOneAfterTheStep) {
  json doc = variant_doc(json::object());
  doc["zero"]["stage3_param_persistence_threshold"] = 1000;
  const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
  const std::int64_t h = 64;
  std::int64_t elements = 0;
  int tensors = 0;
  for (OpId id : ops_named(tp.plan, "persistent param all_gather tensor")) {
    const Collective& c = tp.plan.collectives[tp.plan.ops[id].work];
    EXPECT_EQ(c.kind, CollectiveKind::AllGather);
    EXPECT_LE(c.bytes / 2, 1000 + 15);  // one tensor, padded to the 16 ranks
    elements += c.bytes / 2;
    ++tensors;
  }
  EXPECT_EQ(tensors, 2 * 8 + 2);
  // Each tensor is padded on its own: the tiny model's are h, 3h or 4h elements, multiples of 16.
  EXPECT_EQ(elements, 2 * 13 * h + 2 * h);
  std::vector<Bytes> attention, mlp;
  for (OpId id : ops_named(tp.plan, "gather(fwd) attention L0")) {
    attention.push_back(tp.plan.collectives[tp.plan.ops[id].work].bytes);
  }
  for (OpId id : ops_named(tp.plan, "gather(fwd) mlp L0")) {
    mlp.push_back(tp.plan.collectives[tp.plan.ops[id].work].bytes);
  }
  EXPECT_EQ(attention, (std::vector<Bytes>{2 * 3 * h * h, 2 * h * h}));
  EXPECT_EQ(mlp, (std::vector<Bytes>{2 * 4 * h * h, 2 * 4 * h * h}));
}

// Full recomputation under DeepSpeed's stage 3: CheckpointFunction.backward replays the layer's
// forward before its backward, each module's pre-forward hook firing again, so the replay's
// modules are uses of the coordinator's trace (partitioned_param_coordinator.py). With a prefetch
// bucket of one element a pre-hook gathers one module ahead at most, and with a reuse distance
// of 0 nothing stays gathered for its distance alone:
//  - each layer's two blocks are gathered for the replay, each module by its own call;
//  - the MLP, used again right after its replay, is not gathered again: 0.6.6 and later keep it
//    because the prefetcher popped its backward's entries while it was gathered (PR #2016),
//    0.6.0-0.6.3 because it is reused within the distance (0 elements, not more);
//  - the last layer's attention, released after its replay, is gathered again for its backward,
//    prefetched at the MLP's replay (entries already gathered are skipped without counting), or
//    in 0.6.0-0.6.3 at the MLP's backward (the MLP's backward entry, gathered, used up the
//    bucket first). 0.6.0-0.6.3 gather the first layer's attention again the same way; 0.6.6
//    keeps it: the previous layer's backward hooks already prefetched its MLP's replay, so its
//    own replay hooks pop on, past its backward's entries while it is gathered.
TEST(DeepSpeedStage3, FullRecomputationReplaysTheLayerThroughTheTrace) {
  for (const char* impl : {"coalesced", "coalesced-v0.6.0"}) {
    json doc = variant_doc({{"stage3_prefetch_bucket_size", 1},
                            {"stage3_max_reuse_distance", 0},
                            {"stage3_implementation", impl}});
    doc["parallel"]["recompute"] = "full";
    const TrainingPlan tp = build_training_plan(resolve_scenario(doc), true);
    const Plan& plan = tp.plan;
    const bool newest = std::string(impl) == "coalesced";
    for (const char* layer : {"L0", "L1"}) {
      const std::string l = std::string(" ") + layer;
      EXPECT_EQ(ops_named(plan, ("gather(recompute) attention" + l).c_str()).size(), 2u) << impl;
      EXPECT_EQ(ops_named(plan, ("gather(recompute) mlp" + l).c_str()).size(), 2u) << impl;
      const std::size_t again = newest && std::string(layer) == "L0" ? 0 : 2;
      EXPECT_EQ(ops_named(plan, ("gather(bwd) attention" + l).c_str()).size(), again) << impl;
      EXPECT_TRUE(ops_named(plan, ("gather(bwd) mlp" + l).c_str()).empty()) << impl;
    }
    // Ops are emitted in the host's order: a pre-hook's gathers before its block's compute.
    auto first_compute = [&](const char* prefix) {
      for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
        if (plan.ops[id].kind == OpKind::Compute && starts_with(plan.names[plan.ops[id].name], prefix)) {
          return id;
        }
      }
      ADD_FAILURE() << "no compute op " << prefix;
      return OpId{0};
    };
    const OpId regather = ops_named(plan, "gather(bwd) attention L1").front();
    const OpId attention_replay = first_compute("recompute attention L1");
    const OpId mlp_replay = first_compute("recompute mlp L1");
    const OpId mlp_backward = first_compute("bwd mlp L1");
    ASSERT_LT(attention_replay, mlp_replay);
    ASSERT_LT(mlp_replay, mlp_backward);
    if (newest) {
      EXPECT_GT(regather, attention_replay);
      EXPECT_LT(regather, mlp_replay);
    } else {
      EXPECT_GT(regather, mlp_replay);
      EXPECT_LT(regather, mlp_backward);
    }
  }
}

TEST(ShardingVariants, InvalidCombinationsNameTheKey) {
  EXPECT_EQ(input_error_key(variant_doc({{"stage", 2}, {"zero_quantized_weights", true}})),
            "zero.zero_quantized_weights");
  EXPECT_EQ(input_error_key(variant_doc({{"zero_hpz_partition_size", 3}})), "zero.zero_hpz_partition_size");
  EXPECT_EQ(input_error_key(variant_doc({{"mics_shard_size", 5}})), "zero.mics_shard_size");
  EXPECT_EQ(input_error_key(variant_doc({{"mics_shard_size", 8}, {"zero_hpz_partition_size", 8}})),
            "zero.mics_shard_size");
  EXPECT_EQ(input_error_key(variant_doc({{"zero_quantized_gradients", true}, {"zero_hpz_partition_size", 4}})),
            "zero.zero_hpz_partition_size");
  EXPECT_EQ(input_error_key(variant_doc({{"stage", 2}, {"stage3_implementation", "per-parameter"}})),
            "zero.stage3_implementation");
  // DeepSpeed's stage 3 only: a DeepSpeed version's coordinator means nothing to FSDP.
  EXPECT_EQ(input_error_key(variant_doc({{"stage3_implementation", "coalesced-v0.6.0"}}, 1, "fsdp")),
            "zero.stage3_implementation");
  EXPECT_EQ(input_error_key(variant_doc({{"stage3_implementation", "coalesced-v0.6.0"}})),
            "(accepted)");
}

}  // namespace
}  // namespace zerosim
