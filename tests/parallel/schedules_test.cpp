// The pipeline schedules (sim/parallel/schedules.h) as orders of passes, against what each
// schedule promises: every (micro-batch, chunk) runs one forward and one backward, a backward
// after its forward, and the activations in flight that bound a stage's memory (Narayanan et al.
// SC21 §2.2: GPipe holds all m micro-batches, 1F1B at most p - s on stage s; Huang et al. 2019).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "sim/parallel/schedules.h"
#include "tests/parallel/v_pipeline_replay.h"

namespace zerosim::plan_detail {
namespace {

// Checks conservation and order; returns the most (micro-batch, chunk) forwards in flight
// (run and not yet backwarded).
int check_and_peak(const std::vector<PassStep>& steps, int m, int chunks) {
  std::map<std::pair<int, int>, int> forward_at, backward_at;
  int in_flight = 0, peak = 0;
  for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
    const PassStep& s = steps[i];
    EXPECT_GE(s.mb, 0);
    EXPECT_LT(s.mb, m);
    EXPECT_GE(s.chunk, 0);
    EXPECT_LT(s.chunk, chunks);
    auto& at = s.forward ? forward_at : backward_at;
    EXPECT_TRUE(at.emplace(std::pair{s.mb, s.chunk}, i).second) << "pass repeated";
    in_flight += s.forward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  EXPECT_EQ(static_cast<int>(forward_at.size()), m * chunks);
  EXPECT_EQ(static_cast<int>(backward_at.size()), m * chunks);
  for (const auto& [key, i] : backward_at) EXPECT_LT(forward_at[key], i);
  return peak;
}

TEST(schedules, GpipeRunsEveryForwardFirst) {
  // m = 8 micro-batches on 4 stages: all 8 forwards, then the 8 backwards (the same order on
  // every stage).
  const auto steps = gpipe_schedule(8, 4, 1);
  EXPECT_EQ(check_and_peak(steps, 8, 1), 8);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(steps[i].forward);
}

TEST(schedules, OneFOneBHoldsAtMostPMinusSMicroBatches) {
  // p = 4, m = 8: stage s holds p - s activations at its peak (4, 3, 2, 1); with m = 2 < p the
  // first stages hold all m.
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(check_and_peak(one_f_one_b_schedule(8, 4, stage), 8, 1), 4 - stage);
    EXPECT_EQ(check_and_peak(one_f_one_b_schedule(2, 4, stage), 2, 1), std::min(2, 4 - stage));
  }
  // The last stage alternates strictly: F0 B0 F1 B1 ...
  const auto last = one_f_one_b_schedule(3, 4, 3);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(last[i].forward, i % 2 == 0);
}

TEST(schedules, InterleavedKeepsEveryChunkInOrder) {
  // p = 2, v = 2, m = 4 (a multiple of p, as Megatron requires): each chunk's micro-batches run
  // forward in order 0..3 and backward in the same order.
  for (int stage = 0; stage < 2; ++stage) {
    const auto steps = interleaved_schedule(4, 2, 2, stage);
    check_and_peak(steps, 4, 2);
    for (int chunk = 0; chunk < 2; ++chunk) {
      for (bool fwd : {true, false}) {
        int next = 0;
        for (const PassStep& s : steps) {
          if (s.chunk == chunk && s.forward == fwd) {
            EXPECT_EQ(s.mb, next++);
          }
        }
      }
    }
  }
  // Backwards visit the chunks from the last to the first (the last chunk's backward is the
  // first backward the model produces).
  const auto steps = interleaved_schedule(4, 2, 2, 1);
  const auto first_backward =
      std::find_if(steps.begin(), steps.end(), [](const PassStep& s) { return !s.forward; });
  EXPECT_EQ(first_backward->chunk, 1);
}

TEST(schedules, ZeroBubbleH1DefersWeightGradientsByTheStageIndex) {
  // Qi et al. (ICLR 2024) section 2.1: every micro-batch runs F, then B, then W, once each, and
  // the split keeps 1F1B's memory: a stage holds at most p micro-batches whose W has not run
  // (p = 4, m = 8: 4 on every stage; m = 2: both). Stage s defers its Ws by s micro-batches:
  // s + 1 Bs come before its first W (the last stage's Ws fill the cool-down).
  for (int m : {8, 2}) {
    for (int stage = 0; stage < 4; ++stage) {
      const auto steps = zero_bubble_h1_schedule(m, 4, stage);
      std::map<int, int> f_at, b_at, w_at;
      int held = 0, peak = 0, bs_before_first_w = -1, bs = 0;
      for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
        const PassStep& s = steps[i];
        EXPECT_EQ(s.chunk, 0);
        std::map<int, int>& at = s.forward                           ? f_at
                                 : s.part == BackwardPart::Input ? b_at
                                                                     : w_at;
        EXPECT_NE(s.part, s.forward ? BackwardPart::Input : BackwardPart::Whole);
        EXPECT_TRUE(at.emplace(s.mb, i).second) << "pass repeated";
        if (s.forward) ++held;
        if (!s.forward && s.part == BackwardPart::Input) ++bs;
        if (!s.forward && s.part == BackwardPart::Weight) {
          if (bs_before_first_w < 0) bs_before_first_w = bs;
          --held;
        }
        peak = std::max(peak, held);
      }
      ASSERT_EQ(static_cast<int>(f_at.size()), m);
      ASSERT_EQ(static_cast<int>(b_at.size()), m);
      ASSERT_EQ(static_cast<int>(w_at.size()), m);
      for (int j = 0; j < m; ++j) {
        EXPECT_LT(f_at[j], b_at[j]);
        EXPECT_LT(b_at[j], w_at[j]);
      }
      EXPECT_EQ(peak, std::min(m, 4)) << "m " << m << " stage " << stage;
      EXPECT_EQ(bs_before_first_w, std::min(m, stage + 1)) << "m " << m << " stage " << stage;
    }
  }
}

// DualPipeV (DeepSeek's DualPipe library, dualpipev.py): on every stage each (micro-batch,
// chunk) runs one forward and one backward, whole or split into B then W; each chunk's
// forwards and backwards in micro-batch order (its transfers are matched in that order); the
// Ws in the order of their Bs; the last stage turns each micro-batch from chunk 0 to chunk 1
// in place (F0 before F1, B1 before B0); an overlapped pair is a forward of one chunk and a
// whole backward of the other. The README's memory: PP + 1 chunks' activations per device
// with PP = 2 p stages, counting a micro-batch until its W has run.
TEST(schedules, DualPipeVRunsEveryChunkOnceInOrderWithinPpPlusOneActivations) {
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 2 * p + 3, 5 * p}) {
      for (int stage = 0; stage < p; ++stage) {
        const std::vector<PassStep> steps = dualpipev_schedule(m, p, stage);
        std::map<std::pair<int, int>, int> f_at, b_at, w_at;
        std::vector<std::pair<int, int>> b_order, w_order;
        int next_f[2] = {0, 0}, next_b[2] = {0, 0}, held = 0, peak = 0;
        for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
          const PassStep& s = steps[i];
          ASSERT_TRUE(s.chunk == 0 || s.chunk == 1);
          const std::pair<int, int> key{s.mb, s.chunk};
          if (s.forward) {
            EXPECT_EQ(s.mb, next_f[s.chunk]++);
            EXPECT_TRUE(f_at.emplace(key, i).second);
            ++held;
          } else if (s.part == BackwardPart::Weight) {
            EXPECT_TRUE(w_at.emplace(key, i).second);
            w_order.push_back(key);
            --held;
          } else {
            EXPECT_EQ(s.mb, next_b[s.chunk]++);
            EXPECT_TRUE(b_at.emplace(key, i).second);
            if (s.part == BackwardPart::Input) b_order.push_back(key);
            if (s.part == BackwardPart::Whole) --held;
          }
          peak = std::max(peak, held);
          if (s.combined_with_next) {
            ASSERT_LT(i + 1, static_cast<int>(steps.size()));
            EXPECT_TRUE(s.forward);
            EXPECT_FALSE(steps[i + 1].forward);
            EXPECT_EQ(steps[i + 1].part, BackwardPart::Whole);
            EXPECT_NE(steps[i + 1].chunk, s.chunk);
          }
        }
        for (int c = 0; c < 2; ++c) {
          EXPECT_EQ(next_f[c], m);
          EXPECT_EQ(next_b[c], m);
        }
        EXPECT_EQ(w_order, b_order);
        for (const auto& [key, i] : b_at) {
          EXPECT_LT(f_at[key], i);
          if (w_at.count(key)) {
            EXPECT_LT(i, w_at[key]);
          }
        }
        if (stage == p - 1) {
          for (int j = 0; j < m; ++j) {
            EXPECT_LT((f_at[{j, 0}]), (f_at[{j, 1}]));
            EXPECT_LT((b_at[{j, 1}]), (b_at[{j, 0}]));
          }
        }
        EXPECT_EQ(peak, 2 * p + 1) << "p " << p << " m " << m << " stage " << stage;
      }
    }
  }
}

// DualPipe (dualpipe.py): stage s holds chunk 0 (stage s of the copy fed at stage 0) and chunk 1
// (stage pp - 1 - s of the copy fed at stage pp - 1), m / 2 micro-batches each, every one run
// once forward and once backward (whole, or B then W) in micro-batch order; each stage starts
// with a forward of the chunk fed at its own end of the pipeline; the README's PP + 1 chunks'
// activations per device (a chunk being a whole stage here).
TEST(schedules, DualPipeFeedsHalfTheMicroBatchesFromEachEnd) {
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 2 * p + 4, 6 * p}) {
      for (int stage = 0; stage < p; ++stage) {
        const std::vector<PassStep> steps = dualpipe_schedule(m, p, stage);
        int next_f[2] = {0, 0}, next_b[2] = {0, 0}, held = 0, peak = 0;
        for (const PassStep& s : steps) {
          ASSERT_TRUE(s.chunk == 0 || s.chunk == 1);
          if (s.forward) {
            EXPECT_EQ(s.mb, next_f[s.chunk]++);
            ++held;
          } else if (s.part == BackwardPart::Weight) {
            --held;
          } else {
            EXPECT_EQ(s.mb, next_b[s.chunk]++);
            EXPECT_LT(s.mb, next_f[s.chunk]);
            if (s.part == BackwardPart::Whole) --held;
          }
          peak = std::max(peak, held);
        }
        for (int c = 0; c < 2; ++c) {
          EXPECT_EQ(next_f[c], m / 2);
          EXPECT_EQ(next_b[c], m / 2);
        }
        EXPECT_EQ(held, 0);
        EXPECT_EQ(steps.front().chunk, stage < p / 2 ? 0 : 1) << "p " << p << " stage " << stage;
        EXPECT_EQ(peak, p + 1) << "p " << p << " m " << m << " stage " << stage;
      }
    }
  }
}

TEST(schedules, NoPipelineRunsEachMicroBatchThrough) {
  const auto steps = no_pipeline_schedule(3, 1);
  EXPECT_EQ(check_and_peak(steps, 3, 1), 1);
}

// Megatron-core's combined 1F1B (schedules.py get_pp_rank_microbatches: one more warm-up
// micro-batch when overlap_moe_expert_parallel_comm is set): the interleaved order with the
// 1F1B phase starting one forward later, each steady-state forward marked to run with the
// backward after it, and a combined forward's micro-batch never the backward's (they must be
// independent). Without pipelining: F0, then (F j+1, B j) pairs, then the last backward.
// ZB-V (the zero-bubble fork's README, "Comparison of Schedules", assuming T_F = T_B = T_W):
// no bubble at 1F1B's activation memory. Replayed with equal pass times and no communication,
// every stage computes its 6 m chunk passes back to back once the V has filled: it idles only the
// fill, p - 1 chunk forwards, in a step of 6 m + p - 1. Every (micro-batch, chunk) runs F, B and
// W once, in that order on its stage; chunk 0's forwards and chunk 1's enter in micro-batch
// order. Memory as the fork counts it (runtime.py: F +34h + 5as per token, W -32h, B the rest;
// h 4096, 32 heads, s 4096 here) stays within 2 p chunk forwards, the p micro-batches 1F1B's first
// stage holds.
TEST(schedules, ZeroBubbleVHasNoBubbleBeyondTheFillAtOneFOneBsMemory) {
  ZeroBubbleVCosts equal;
  equal.forward_memory = 34 * 4096 + 5 * 32 * 4096;
  equal.weight_backward_memory = -32 * 4096;
  equal.input_backward_memory = -equal.forward_memory - equal.weight_backward_memory;
  for (int p : {2, 3, 4, 8}) {
    for (int m : {2 * p, 3 * p + 1, 4 * p}) {
      std::vector<std::vector<PassStep>> orders;
      for (int stage = 0; stage < p; ++stage) {
        orders.push_back(zero_bubble_v_schedule(m, p, stage, equal));
        std::map<std::tuple<int, int, int>, int> at;  // (kind, mb, chunk) -> position
        int next_f[2] = {0, 0};
        std::int64_t memory = 0, peak = 0;
        for (int i = 0; i < static_cast<int>(orders.back().size()); ++i) {
          const PassStep& st = orders.back()[static_cast<std::size_t>(i)];
          const int kind = st.forward ? 0 : st.part == BackwardPart::Weight ? 2 : 1;
          if (!st.forward) ASSERT_NE(st.part, BackwardPart::Whole);
          EXPECT_TRUE(at.emplace(std::tuple{kind, st.mb, st.chunk}, i).second);
          if (st.forward) EXPECT_EQ(st.mb, next_f[st.chunk]++);
          if (kind > 0) EXPECT_LT((at[{kind - 1, st.mb, st.chunk}]), i);
          memory += kind == 0 ? equal.forward_memory
                              : kind == 1 ? equal.input_backward_memory
                                          : equal.weight_backward_memory;
          peak = std::max(peak, memory);
        }
        EXPECT_EQ(static_cast<int>(at.size()), 6 * m);
        EXPECT_EQ(memory, 0);
        EXPECT_LE(peak, 2 * p * equal.forward_memory) << "p " << p << " m " << m;
      }
      const VReplay r = replay_v_pipeline(orders, 1, 1, 1);
      EXPECT_EQ(r.makespan, 6 * m + p - 1) << "p " << p << " m " << m;
      for (int stage = 0; stage < p; ++stage) EXPECT_EQ(r.idle[stage], p - 1);
    }
  }
}

// Ordered by unequal pass times and a point-to-point time, or with fewer micro-batches than
// the V holds, the order is still one the V can run (each input runs before its use).
TEST(schedules, ZeroBubbleVOrdersRunForAnyTimesAndMicroBatches) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 2, p - 1, p + 1, 2 * p - 1, 5 * p}) {
      if (m < 1) continue;
      for (const ZeroBubbleVCosts& c :
           {ZeroBubbleVCosts{5, 6, 4, 1, 34, -2, -32},
            ZeroBubbleVCosts{28672, 32768, 24576, 0, 34 * 4096, -2 * 4096, -32 * 4096},
            ZeroBubbleVCosts{3, 9, 1, 2, 10, -1, -9}}) {
        std::vector<std::vector<PassStep>> orders;
        for (int stage = 0; stage < p; ++stage) orders.push_back(zero_bubble_v_schedule(m, p, stage, c));
        const VReplay r = replay_v_pipeline(orders, c.forward, c.input_backward, c.weight_backward);
        EXPECT_GE(r.makespan, 2 * m * (c.forward + c.input_backward + c.weight_backward))
            << "p " << p << " m " << m;
      }
    }
  }
}

TEST(schedules, CombinedOneFOneBPairsEachSteadyForwardWithTheNextBackward) {
  for (int stage : {0, 1, 3}) {
    const int p = 4, m = 8, v = 2;
    const std::vector<PassStep> steps = combined_1f1b_schedule(m, p, v, stage);
    check_and_peak(steps, m, v);
    const int warmup = (p - stage - 1) * 2 + (v - 1) * p + 1;
    int paired = 0;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (!steps[i].combined_with_next) continue;
      ++paired;
      ASSERT_LT(i + 1, steps.size());
      EXPECT_TRUE(steps[i].forward);
      EXPECT_FALSE(steps[i + 1].forward);
      EXPECT_FALSE(steps[i].mb == steps[i + 1].mb && steps[i].chunk == steps[i + 1].chunk);
    }
    EXPECT_EQ(paired, m * v - warmup) << "stage " << stage;
    for (int k = 0; k < warmup; ++k) EXPECT_TRUE(steps[static_cast<std::size_t>(k)].forward);
  }
  const std::vector<PassStep> alone = combined_1f1b_schedule(3, 1, 1, 0);
  ASSERT_EQ(alone.size(), 6u);
  const int order[6][2] = {{1, 0}, {1, 1}, {0, 0}, {1, 2}, {0, 1}, {0, 2}};  // forward?, mb
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(alone[i].forward, order[i][0] == 1);
    EXPECT_EQ(alone[i].mb, order[i][1]);
    EXPECT_EQ(alone[i].combined_with_next, i == 1 || i == 3);
  }
}

}  // namespace
}  // namespace zerosim::plan_detail
