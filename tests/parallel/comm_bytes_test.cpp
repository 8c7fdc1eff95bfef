// Bytes each GPU sends per step (report.comm_bytes_per_gpu) against closed forms. Ring
// collectives over N ranks: an all-reduce of B bytes sends 2B(N-1)/N per rank, a reduce-scatter
// or all-gather B(N-1)/N. With F = 2Φ bytes of 16-bit gradients (or parameters) and m
// micro-batches per step:
//   stage 0 (DDP all-reduce once per step):                          2F(N-1)/N
//   stage 1, reduce to owners + parameter all-gather:                2F(N-1)/N   (paper)
//   stage 2, reduce to owners every micro-batch + all-gather:   (m + 1)F(N-1)/N   (paper, m = 1)
//   stage 3, gather for forward and for backward, reduce-scatter:     3mF(N-1)/N  (paper)
// DeepSpeed >= 0.12 reduces each stage 1/2 bucket with one all-reduce instead
// (zero.use_multi_rank_bucket_allreduce = true, the default):
//   stage 1: 2F(N-1)/N + F(N-1)/N = 3F(N-1)/N;  stage 2: (2m + 1)F(N-1)/N.
// Stage 3 keeping every unit gathered from its forward to its backward (reuse distance above
// the model size) skips the backward gathers: 2mF(N-1)/N.
// The tiny model's Φ = 172288 and each of its units are divisible by N = 2 and 8, so no
// partition padding enters.
#include <gtest/gtest.h>

#include <string>

#include "sim/run/simulate.h"
#include "tests/parallel/common.h"

namespace zerosim {
namespace {

using namespace testing_plan;

enum class Variant {
  Stage0,
  Stage1Owners,
  Stage1AllReduce,
  Stage2Owners,
  Stage2AllReduce,
  Stage3NoReuse,
  Stage3Reuse
};

struct BytesCase {
  Variant variant;
  int n, m;
};

std::string variant_name(Variant v) {
  switch (v) {
    case Variant::Stage0:
      return "stage0";
    case Variant::Stage1Owners:
      return "stage1_owners";
    case Variant::Stage1AllReduce:
      return "stage1_allreduce";
    case Variant::Stage2Owners:
      return "stage2_owners";
    case Variant::Stage2AllReduce:
      return "stage2_allreduce";
    case Variant::Stage3NoReuse:
      return "stage3_no_reuse";
    case Variant::Stage3Reuse:
      return "stage3_reuse";
  }
  return "?";
}

json zero_of(Variant v) {
  switch (v) {
    case Variant::Stage0:
      return {{"stage", 0}};
    case Variant::Stage1Owners:
      return {{"stage", 1}, {"use_multi_rank_bucket_allreduce", false}};
    case Variant::Stage1AllReduce:
      return {{"stage", 1}};
    case Variant::Stage2Owners:
      return {{"stage", 2}, {"use_multi_rank_bucket_allreduce", false}};
    case Variant::Stage2AllReduce:
      return {{"stage", 2}};
    case Variant::Stage3NoReuse:
      // No prefetch either: DeepSpeed (0.6.6 on) keeps a parameter whose later use its
      // prefetcher skipped past while it was gathered.
      return {{"stage", 3},
              {"stage3_param_persistence_threshold", 0},
              {"stage3_max_reuse_distance", 0},
              {"stage3_prefetch_bucket_size", 0}};
    case Variant::Stage3Reuse:
      return {{"stage", 3},
              {"stage3_param_persistence_threshold", 0},
              {"stage3_max_reuse_distance", 1000000000}};
  }
  return {};
}

// Multiples of F(N-1)/N.
double multiple(Variant v, int m) {
  switch (v) {
    case Variant::Stage0:
      return 2;
    case Variant::Stage1Owners:
      return 2;
    case Variant::Stage1AllReduce:
      return 3;
    case Variant::Stage2Owners:
      return m + 1;
    case Variant::Stage2AllReduce:
      return 2 * m + 1;
    case Variant::Stage3NoReuse:
      return 3 * m;
    case Variant::Stage3Reuse:
      return 2 * m;
  }
  return 0;
}

void PrintTo(const BytesCase& c, std::ostream* os) {
  *os << variant_name(c.variant) << " N=" << c.n << " m=" << c.m;
}

class parallelCommBytes : public ::testing::TestWithParam<BytesCase> {};

TEST_P(parallelCommBytes, DpBytesPerGpuMatchTheClosedForm) {
  const BytesCase c = GetParam();
  if (c.variant == Variant::Stage3NoReuse) {
  }
  ASSERT_EQ(kTinyPhi % c.n, 0);
  Scenario s = resolve_scenario(tiny_doc(c.n, zero_of(c.variant), c.m));
  ASSERT_EQ(s.parallel.dp, c.n);
  Simulation sim = simulate_step(s);
  const double f = 2.0 * kTinyPhi;
  const double expected = multiple(c.variant, c.m) * f * (c.n - 1) / c.n;
  EXPECT_NEAR(sim.report.comm_bytes_per_gpu[0], expected, 1e-9 * expected);
  EXPECT_EQ(sim.report.comm_bytes_per_gpu[1], 0);  // tp = 1
  EXPECT_EQ(sim.report.comm_bytes_per_gpu[2], 0);  // pp = 1
}

// An MoE model holds every expert: ZeRO moves all of their parameters. The tiny model with each
// MLP replaced by 4 experts of width 64 (top 2) and a router: per layer the MoE block is the
// router 64 x 4, 4 x (up 64 x 64 + 64, down 64 x 64 + 64) and its LayerNorm 128 = 33664, so
// Φ = 72192 + 2 x (16768 + 33664) + 128 = 173184 (divisible by 8, as is each unit).
TEST(parallelCommBytesMoe, EveryExpertIsReducedAndGathered) {
  constexpr std::int64_t kMoePhi = 173184;
  for (Variant v : {Variant::Stage0, Variant::Stage3NoReuse}) {
    json doc = tiny_doc(8, zero_of(v), 2);
    doc["model"]["moe"] = {{"num_experts", 4}, {"top_k", 2}, {"expert_ffn_hidden_size", 64}};
    const Scenario s = resolve_scenario(doc);
    ASSERT_EQ(count_params(s.model).total, kMoePhi);
    const Simulation sim = simulate_step(s);
    const double f = 2.0 * kMoePhi;
    const double expected = multiple(v, 2) * f * 7 / 8;
    EXPECT_NEAR(sim.report.comm_bytes_per_gpu[0], expected, 1e-9 * expected) << variant_name(v);
  }
}

// FP8 weight all-gathers under ZeRO-3 (training.fp8_param_gather): the layers' units gather 1
// byte per element, the embedding (72192) and the final norm (128) still 2. Per micro-batch a
// forward and a backward gather of G = 2 x 72192 + 99968 + 2 x 128 = 244608 bytes and the
// 16-bit reduce-scatter of F: m (2G + F)(N - 1)/N, against 3mF(N - 1)/N in 16 bits.
TEST(parallelCommBytesFp8, Fp8GathersHalveTheLayersWeights) {
  constexpr double kGather = 2.0 * 72192 + 99968 + 2.0 * 128;
  const double f = 2.0 * kTinyPhi;
  for (bool fp8_gather : {false, true}) {
    json doc = tiny_doc(8, zero_of(Variant::Stage3NoReuse), 3);
    doc["cluster"]["preset"] = "dgx-h100";
    doc["training"]["precision"] = "fp8";
    doc["training"]["fp8_param_gather"] = fp8_gather;
    const Simulation sim = simulate_step(resolve_scenario(doc));
    const double expected = 3 * (fp8_gather ? 2 * kGather + f : 3 * f) * 7 / 8;
    EXPECT_NEAR(sim.report.comm_bytes_per_gpu[0], expected, 1e-9 * expected) << fp8_gather;
  }
  // Only where it is simulated: fp8 training, ZeRO-3 / FSDP gathers.
  json doc = tiny_doc(8, {{"stage", 1}}, 3);
  doc["cluster"]["preset"] = "dgx-h100";
  doc["training"]["precision"] = "fp8";
  doc["training"]["fp8_param_gather"] = true;
  EXPECT_EQ(input_error_key(doc), "training.fp8_param_gather");
  doc["zero"] = zero_of(Variant::Stage3NoReuse);
  EXPECT_EQ(input_error_key(doc), "(accepted)");
  doc["training"]["precision"] = "bf16";
  EXPECT_EQ(input_error_key(doc), "training.fp8_param_gather");
}

// Megatron's --fp8-param-gather with the distributed optimizer (framework megatron, stage 1):
// the layers' weights are FP8 parameters, so the all-gather of the updated partitions after the
// step (or, with overlap_param_gather, bucket by bucket in the next forward) moves 1 byte per
// layer element and 2 per element of the embedding and final norm: 2 x 21536 - 12496 bytes per
// rank's partition (Phi / 8 = 21536, the two layers' L = 99968 over 8 = 12496), one byte fewer
// per layer element than in 16 bits, L (N - 1) / N less sent per GPU; and the FP8 weight copies
// Transformer Engine caches beside 16-bit weights (2 bytes per layer element) are not held.
TEST(parallelCommBytesFp8, DistributedOptimizerGathersFp8Parameters) {
  constexpr double kLayers = 99968;
  for (bool overlap : {false, true}) {
    double sent[2], buffers[2];
    for (bool fp8_gather : {false, true}) {
      json doc = tiny_doc(8, {{"stage", 1}}, 3);
      doc["cluster"]["preset"] = "dgx-h100";
      doc["parallel"]["framework"] = "megatron";
      doc["parallel"]["overlap_param_gather"] = overlap;
      doc["training"]["precision"] = "fp8";
      doc["training"]["fp8_param_gather"] = fp8_gather;
      const Simulation sim = simulate_step(resolve_scenario(doc));
      sent[fp8_gather] = sim.report.comm_bytes_per_gpu[0];
      buffers[fp8_gather] =
          static_cast<double>(sim.report.memory.category_max[static_cast<int>(MemCategory::Buffers)]);
    }
    EXPECT_NEAR(sent[0] - sent[1], kLayers * 7 / 8, 1e-9 * sent[0]) << overlap;
    EXPECT_EQ(buffers[0] - buffers[1], 2 * kLayers) << overlap;
  }
  // Megatron asserts the distributed optimizer (or an FSDP): not with DDP (stage 0).
  json doc = tiny_doc(8, {{"stage", 0}}, 3);
  doc["cluster"]["preset"] = "dgx-h100";
  doc["parallel"]["framework"] = "megatron";
  doc["training"]["precision"] = "fp8";
  doc["training"]["fp8_param_gather"] = true;
  EXPECT_EQ(input_error_key(doc), "training.fp8_param_gather");
  doc["zero"]["stage"] = 1;
  EXPECT_EQ(input_error_key(doc), "(accepted)");
}

std::vector<BytesCase> bytes_cases() {
  std::vector<BytesCase> out;
  for (Variant v :
       {Variant::Stage0, Variant::Stage1Owners, Variant::Stage1AllReduce, Variant::Stage2Owners,
        Variant::Stage2AllReduce, Variant::Stage3NoReuse, Variant::Stage3Reuse}) {
    for (int n : {2, 8}) {
      for (int m : {1, 3}) out.push_back({v, n, m});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(parallelZero, parallelCommBytes, ::testing::ValuesIn(bytes_cases()),
                         [](const ::testing::TestParamInfo<BytesCase>& i) {
                           return variant_name(i.param.variant) + "_N" + std::to_string(i.param.n) +
                                  "_m" + std::to_string(i.param.m);
                         });

// Megatron tensor parallelism (Korthikanti et al. 2022, section 4.2.2): per micro-batch two
// all-reduces per layer in forward and two in backward, plus the embedding's forward
// all-reduce and the output layer's backward all-reduce, each of the s x b x h activation in
// 16 bits. Sequence parallelism replaces each all-reduce by a reduce-scatter and an
// all-gather that together move the same bytes. Tiny model, b = 1, tp = t = 2:
//   2sbh = 2 * 128 * 64 = 16384 bytes, collectives per micro-batch 4L + 2 = 10,
//   bytes per micro-batch 10 * 2 (t-1)/t * 16384 = 163840; with m = 3: 491520.
TEST(parallelCommBytesTp, MegatronActivationAllReduces) {
  for (bool sp : {false, true}) {
    json doc = tiny_doc(4, {{"stage", 1}}, 3, 2);
    doc["parallel"]["sequence_parallel"] = sp;
    Simulation sim = simulate_step(resolve_scenario(doc));
    EXPECT_NEAR(sim.report.comm_bytes_per_gpu[1], 491520.0, 1e-6) << "sequence_parallel " << sp;
  }
}

// Megatron-core's linears under sequence parallelism save their input's shard and all-gather it
// again in backward for the weight gradient (LinearWithGradAccumulationAndAsyncCommunication
// .backward): one more all-gather of s b h per dense block and for the head, 4L + 1 = 5 per
// micro-batch on the tiny model, each sending (t - 1)/t of 2sbh = 8192 bytes: 491520 + 3 x 5 x
// 8192 = 614400. Without sequence parallelism nothing is gathered and the bytes stay 491520.
TEST(parallelCommBytesTp, MegatronGathersTheSequenceParallelInputAgain) {
  for (bool sp : {false, true}) {
    json doc = tiny_doc(4, {{"stage", 1}}, 3, 2);
    doc["parallel"]["framework"] = "megatron";
    doc["parallel"]["sequence_parallel"] = sp;
    Simulation sim = simulate_step(resolve_scenario(doc));
    EXPECT_NEAR(sim.report.comm_bytes_per_gpu[1], sp ? 614400.0 : 491520.0, 1e-6)
        << "sequence_parallel " << sp;
  }
}

}  // namespace
}  // namespace zerosim
