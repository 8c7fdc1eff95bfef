// NCCL's tuning constants: spot checks against the source at each tag (the values below were read
// from NVIDIA/nccl src/graph/tuning.cc, topo.h and search.cc at v2.18.5-1, v2.21.5-1, v2.27.7-1),
// and the mapping from release strings to the table that stands for them.
#include <gtest/gtest.h>

#include "sim/collective/nccl_constants.h"
#include "sim/core/error.h"

namespace zerosim::nccl {
namespace {

constexpr int T = static_cast<int>(Algo::Tree), R = static_cast<int>(Algo::Ring),
              NV = static_cast<int>(Algo::Nvls), NVT = static_cast<int>(Algo::NvlsTree);
constexpr int LL = 0, LL128 = 1, SIMPLE = 2;
constexpr int NVLINK = 0, NET = 2;

TEST(ncclConstants, V218MatchesTuningCc) {
  const Constants& k = constants(Version::V2_18);
  EXPECT_STREQ(k.tag, "v2.18.5-1");
  EXPECT_FLOAT_EQ(k.base_lat[R][SIMPLE], 8.4f);
  EXPECT_FLOAT_EQ(k.base_lat[T][SIMPLE], 0.0f);
  EXPECT_FLOAT_EQ(k.base_lat[NV][SIMPLE], 23.0f);
  EXPECT_FLOAT_EQ(k.hw_lat[NVLINK][R][LL], 0.6f);
  EXPECT_FLOAT_EQ(k.hw_lat[NVLINK][R][SIMPLE], 3.4f);
  EXPECT_FLOAT_EQ(k.hw_lat[NVLINK][T][SIMPLE], 4.0f);
  EXPECT_FLOAT_EQ(k.hw_lat[NET][R][LL], 2.7f);
  EXPECT_FLOAT_EQ(k.hw_lat[NET][NVT][SIMPLE], 19.0f);
  EXPECT_DOUBLE_EQ(k.ll_max_bw[2][0], 87.7);  // Hopper single node, before 2.21
  EXPECT_DOUBLE_EQ(k.per_ch_max_tree_bw[1][2], 17.8);
  EXPECT_DOUBLE_EQ(k.ring_ll_factor_allreduce, 0.25);
  EXPECT_DOUBLE_EQ(k.ring_ll128_factor_ppn1, 0.7);
  EXPECT_DOUBLE_EQ(k.nvlink_bw_per_link[2], 20.0);
  EXPECT_FALSE(k.has_arch[3]);
  EXPECT_EQ(k.max_channels, 32);
  EXPECT_EQ(k.speed_intra[2].front(), 60.0f);
  EXPECT_EQ(k.speed_intra[2][1], 40.0f);  // no 50 before 2.19
}

TEST(ncclConstants, V221MatchesTuningCc) {
  const Constants& k = constants(Version::V2_21);
  EXPECT_FLOAT_EQ(k.base_lat[NV][SIMPLE], 0.0f);
  EXPECT_FLOAT_EQ(k.hw_lat[NVLINK][NV][SIMPLE], 25.0f);
  EXPECT_FLOAT_EQ(k.hw_lat[NVLINK][T][SIMPLE], 28.0f);
  EXPECT_FLOAT_EQ(k.hw_lat[NET][T][SIMPLE], 28.0f);
  EXPECT_DOUBLE_EQ(k.ll_max_bw[2][0], 141.0);
  EXPECT_DOUBLE_EQ(k.ring_ll_factor_allreduce, 0.5);
  EXPECT_DOUBLE_EQ(k.nvlink_bw_per_link[2], 20.6);
  EXPECT_TRUE(k.nvls_allgather_reducescatter);
  EXPECT_FALSE(k.pat);
}

TEST(ncclConstants, V227MatchesTuningCc) {
  const Constants& k = constants(Version::V2_27);
  EXPECT_FLOAT_EQ(k.base_lat[T][SIMPLE], 8.4f);
  EXPECT_FLOAT_EQ(k.hw_lat[NVLINK][T][SIMPLE], 4.0f);
  EXPECT_FLOAT_EQ(k.hw_lat[NET][T][SIMPLE], 14.0f);
  EXPECT_FLOAT_EQ(k.hw_lat[NET][NVT][SIMPLE], 14.0f);
  EXPECT_DOUBLE_EQ(k.ll_max_bw[3][0], 282.0);
  EXPECT_DOUBLE_EQ(k.per_ch_max_ring_ll128_bw[3][0], 73.4);
  EXPECT_DOUBLE_EQ(k.nvlink_bw_per_link[3], 40.1);
  EXPECT_DOUBLE_EQ(k.ring_ll128_factor_ppn1, 0.92);
  EXPECT_TRUE(k.has_arch[3]);
  EXPECT_TRUE(k.pat);
  EXPECT_EQ(k.max_channels, 64);
  EXPECT_EQ(k.speed_intra[3].front(), 90.0f);
  EXPECT_EQ(k.nvls_channels[2], 16);
  // treeCorrectionFactor, Simple row, 64 B .. 256 MiB.
  EXPECT_FLOAT_EQ(k.tree_correction[SIMPLE][0], 0.9f);
  EXPECT_FLOAT_EQ(k.tree_correction[SIMPLE][11], 0.5f);
  EXPECT_FLOAT_EQ(k.tree_correction[LL][12], 0.4f);
  EXPECT_FLOAT_EQ(k.tree_correction[LL128][22], 1.0f);
}

TEST(ncclConstants, ReleasesMapToTheirTable) {
  EXPECT_EQ(version_from_string("2.4", "k"), Version::V2_18);
  EXPECT_EQ(version_from_string("2.10", "k"), Version::V2_18);
  EXPECT_EQ(version_from_string("2.18.5", "k"), Version::V2_18);
  EXPECT_EQ(version_from_string("2.19", "k"), Version::V2_21);
  EXPECT_EQ(version_from_string("v2.24.3-1", "k"), Version::V2_21);
  EXPECT_EQ(version_from_string("2.27.7", "k"), Version::V2_27);
  EXPECT_EQ(version_from_string("2.28", "k"), Version::V2_27);
  for (const char* bad : {"3.0", "abc", "2", "2.x", ""}) {
    SCOPED_TRACE(bad);
    try {
      version_from_string(bad, "cluster.nccl_version");
      FAIL() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key_path(), "cluster.nccl_version");
    }
  }
}

}  // namespace
}  // namespace zerosim::nccl
