// ZeRO stages 1, 2 and 3 with 1-8 ranks and uneven shards train the synthetic model exactly as
// the unsharded run does, bit for bit (fp32 path); and the shard arithmetic is as DeepSpeed's.
#include <gtest/gtest.h>

#include <vector>

#include "validate/zero_check.h"

namespace zv = zerosim::validate;

namespace {

// 1 + 7 + 1000 + 33 = 1041 parameters over 8 ranks.
// Padded (flat, stages 1/2): ceil(1041 / 8) = 131 per rank; 8 x 131 = 1048, so 7 padding
// elements, all on the last rank, which holds 1041 - 7 x 131 = 124 real ones.
// Uneven: 1041 = 8 x 130 + 1: rank 0 holds 131, the others 130.
// Stage 3, padded, per tensor: ceil(1/8) = 1, ceil(7/8) = 1, ceil(1000/8) = 125, ceil(33/8) = 5:
// every rank's shard has 1 + 1 + 125 + 5 = 132 elements.
TEST(ZeroShards, LayoutArithmetic) {
  zv::ZeroCheckConfig cfg;
  cfg.stage = 2;
  auto lay = zv::shard_layout(cfg, 8, 7);
  ASSERT_EQ(lay.segments.size(), 1u);
  EXPECT_EQ(lay.segments[0].padded, 1048);
  EXPECT_EQ(lay.pieces[0].begin, 7 * 131);
  EXPECT_EQ(lay.shard_size, 131);
  cfg.partition = zv::Partition::Uneven;
  EXPECT_EQ(zv::shard_layout(cfg, 8, 0).shard_size, 131);
  lay = zv::shard_layout(cfg, 8, 1);
  EXPECT_EQ(lay.shard_size, 130);
  EXPECT_EQ(lay.pieces[0].begin, 131);
  cfg.stage = 3;
  cfg.partition = zv::Partition::Padded;
  lay = zv::shard_layout(cfg, 8, 5);
  ASSERT_EQ(lay.segments.size(), 4u);
  EXPECT_EQ(lay.shard_size, 132);
  EXPECT_EQ(lay.pieces[2].begin, 5 * 125);
  EXPECT_EQ(lay.segments[3].offset, 1008);
}

struct Sizes {
  std::vector<std::int64_t> tensors;
  const char* why;
};

TEST(ZeroShards, ShardedTrainingEqualsUnshardedBitForBit) {
  const std::vector<Sizes> models = {
      {{1, 7, 1000, 33}, "sizes not divisible by any rank count above 1"},
      {{3}, "fewer parameters than ranks: some shards empty"},
      {{0, 5, 0, 64}, "empty tensors among others"},
  };
  int runs = 0;
  for (const Sizes& m : models) {
    for (int stage = 1; stage <= 3; ++stage) {
      for (zv::Partition part : {zv::Partition::Padded, zv::Partition::Uneven}) {
        for (int ranks = 1; ranks <= 8; ++ranks) {
          zv::ZeroCheckConfig cfg;
          cfg.stage = stage;
          cfg.partition = part;
          cfg.tensor_sizes = m.tensors;
          cfg.steps = 4;
          cfg.adam.weight_decay = 0.01f;
          SCOPED_TRACE(std::string(m.why) + ", stage " + std::to_string(stage) + ", " + zv::to_string(part) +
                       ", " + std::to_string(ranks) + " ranks");
          const zv::ModelState ref = zv::run_unsharded(ranks, cfg);
          const auto states = zv::run_sharded_threads(ranks, cfg);
          for (int r = 0; r < ranks; ++r) EXPECT_EQ(zv::first_difference(states[r], ref), "") << "rank " << r;
          ++runs;
        }
      }
    }
  }
  EXPECT_EQ(runs, 3 * 3 * 2 * 8);
}

// The check is sharp: the same training with the ranks' gradients summed in another order (here:
// the unsharded run for a different rank count) does not match.
TEST(ZeroShards, TheComparisonSeesADifferentRun) {
  zv::ZeroCheckConfig cfg;
  cfg.stage = 2;
  const auto sharded = zv::run_sharded_threads(3, cfg);
  EXPECT_NE(zv::first_difference(sharded[0], zv::run_unsharded(4, cfg)), "");
  cfg.steps = 5;
  EXPECT_NE(zv::first_difference(sharded[0], zv::run_unsharded(3, cfg)), "");
}

TEST(ZeroShards, RefusesBadConfigs) {
  zv::ZeroCheckConfig cfg;
  cfg.stage = 4;
  EXPECT_THROW(zv::run_unsharded(2, cfg), std::invalid_argument);
  cfg.stage = 1;
  cfg.tensor_sizes = {-1};
  EXPECT_THROW(zv::shard_layout(cfg, 2, 0), std::invalid_argument);
}

}  // namespace
