// The chance that a token's experts include one of a range of experts, against a brute-force
// count: every equally likely choice of groups, and within them of top_k experts, enumerated.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>

#include "sim/model/moe_routing.h"

namespace zerosim {
namespace {

// Enumerates the router's choices: each set of `group_topk` groups (all groups when 0), then
// each set of top_k experts among their experts, all equally likely.
double brute_force(int experts, int top_k, int groups, int group_topk, int first, int count) {
  const int g = groups == 0 ? 1 : groups, picked = groups == 0 ? 1 : group_topk;
  const int width = experts / g;
  const std::uint32_t range = ((1u << count) - 1) << first;
  double hit = 0;
  int group_sets = 0;
  for (std::uint32_t gs = 0; gs < (1u << g); ++gs) {
    if (std::popcount(gs) != picked) continue;
    ++group_sets;
    std::uint32_t pool = 0;
    for (int i = 0; i < g; ++i) {
      if (gs >> i & 1) pool |= ((1u << width) - 1) << (i * width);
    }
    int sets = 0, hits = 0;
    for (std::uint32_t es = pool;; es = (es - 1) & pool) {  // every subset of the pool
      if (std::popcount(es) == top_k) {
        ++sets;
        hits += (es & range) != 0;
      }
      if (es == 0) break;
    }
    hit += static_cast<double>(hits) / sets;
  }
  return hit / group_sets;
}

TEST(moeRouting, HitChancesMatchEnumeration) {
  struct Case {
    int experts, top_k, groups, group_topk, first, count;
  };
  for (const Case& c : {
           Case{16, 4, 0, 0, 0, 1},    // a rank of one expert, no limit: 4 / 16
           Case{16, 4, 0, 0, 8, 8},    // a node of 8 experts
           Case{16, 4, 2, 1, 0, 8},    // node-limited to one of two nodes
           Case{16, 4, 2, 1, 4, 2},    // a rank inside a group
           Case{16, 4, 8, 2, 0, 8},    // a node of 4 groups, 2 groups picked
           Case{16, 3, 4, 2, 2, 4},    // a range across two groups
           Case{12, 2, 3, 2, 5, 3},    // unaligned, groups of 4
           Case{16, 8, 4, 3, 0, 2}}) { // DeepSeek-V3's shape, smaller
    MoeSpec e;
    e.num_experts = c.experts;
    e.top_k = c.top_k;
    e.router_num_groups = c.groups;
    e.router_group_topk = c.group_topk;
    EXPECT_NEAR(expert_range_hit_probability(e, c.first, c.count),
                brute_force(c.experts, c.top_k, c.groups, c.group_topk, c.first, c.count), 1e-12)
        << c.experts << " experts, top " << c.top_k << ", groups " << c.groups << "/"
        << c.group_topk << ", range " << c.first << "+" << c.count;
  }
}

// Closed forms: without a limit a unit of u experts is missed with C(E - u, k) / C(E, k). With
// DeepSeek-V3's 256 experts in 8 groups of 32 (one per node), 4 groups picked, a node is hit when
// its group is picked (chance 1/2) and one of the 8 experts chosen among the picked groups' 128
// is among its 32: 1/2 (1 - C(96, 8) / C(128, 8)).
TEST(moeRouting, ClosedForms) {
  MoeSpec e;
  e.num_experts = 256;
  e.top_k = 8;
  double miss = 1;
  for (int i = 0; i < 8; ++i) miss *= (256.0 - 32 - i) / (256.0 - i);
  EXPECT_NEAR(unit_hit_probability(e, 32), 1 - miss, 1e-12);
  e.router_num_groups = 8;
  e.router_group_topk = 4;
  double node_miss = 1;
  for (int i = 0; i < 8; ++i) node_miss *= (96.0 - i) / (128.0 - i);
  EXPECT_NEAR(unit_hit_probability(e, 32), 0.5 * (1 - node_miss), 1e-12);
  // The expected number of nodes a token's experts span, 8 x that, is at most 4.
  EXPECT_LE(8 * unit_hit_probability(e, 32), 4.0);
}

}  // namespace
}  // namespace zerosim
