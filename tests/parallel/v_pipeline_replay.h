// A reference executor for V-shaped pipeline orders (ZB-V, DualPipeV's placement): chunk 0 runs
// down stages 0 .. p - 1 and chunk 1 back up from p - 1 to 0, where the loss is; the backward
// returns the other way. Each stage runs its passes in its order, each pass starting when the
// stage is free and its input is ready (no communication time). Independent of zerosim's plan
// and engine, so that a schedule's timing can be checked against it.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "sim/parallel/schedules.h"

namespace zerosim::plan_detail {

struct VReplay {
  std::int64_t makespan = 0;
  std::vector<std::int64_t> idle;  // per stage: makespan minus the time it computes
};

// Pass times: a chunk's forward, its input backward (B) and its weight backward (W).
inline VReplay replay_v_pipeline(const std::vector<std::vector<PassStep>>& orders,
                                 std::int64_t forward, std::int64_t input_backward,
                                 std::int64_t weight_backward) {
  const int p = static_cast<int>(orders.size());
  // (kind, micro-batch, chunk, stage) -> end; kind 0 F, 1 B, 2 W.
  std::map<std::tuple<int, int, int, int>, std::int64_t> end;
  auto kind_of = [](const PassStep& s) {
    return s.forward ? 0 : s.part == BackwardPart::Weight ? 2 : 1;
  };
  // The pass whose output this one reads.
  auto input = [&](int kind, int mb, int chunk, int st) -> std::tuple<int, int, int, int> {
    if (kind == 2) return {1, mb, chunk, st};
    if (kind == 0 && chunk == 0) return {0, mb, 0, st - 1};  // st == 0: none
    if (kind == 0) return st == p - 1 ? std::tuple{0, mb, 0, st} : std::tuple{0, mb, 1, st + 1};
    if (chunk == 1) return st == 0 ? std::tuple{0, mb, 1, 0} : std::tuple{1, mb, 1, st - 1};
    return st == p - 1 ? std::tuple{1, mb, 1, st} : std::tuple{1, mb, 0, st + 1};
  };
  const std::int64_t time[3] = {forward, input_backward, weight_backward};
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<std::int64_t> clock(static_cast<std::size_t>(p), 0), busy(clock);
  for (bool progress = true; progress;) {
    progress = false;
    for (int st = 0; st < p; ++st) {
      const auto& order = orders[static_cast<std::size_t>(st)];
      auto& i = next[static_cast<std::size_t>(st)];
      for (; i < order.size(); ++i) {
        const PassStep& s = order[i];
        const int kind = kind_of(s);
        std::int64_t ready = 0;
        if (!(kind == 0 && s.chunk == 0 && st == 0)) {
          const auto it = end.find(input(kind, s.mb, s.chunk, st));
          if (it == end.end()) break;  // its input has not run yet
          ready = it->second;
        }
        auto& c = clock[static_cast<std::size_t>(st)];
        c = std::max(c, ready) + time[kind];
        busy[static_cast<std::size_t>(st)] += time[kind];
        EXPECT_TRUE(end.emplace(std::tuple{kind, s.mb, s.chunk, st}, c).second)
            << "pass repeated on stage " << st;
        progress = true;
      }
    }
  }
  VReplay r;
  for (int st = 0; st < p; ++st) {
    EXPECT_EQ(next[static_cast<std::size_t>(st)], orders[static_cast<std::size_t>(st)].size())
        << "stage " << st << " waits for an input that never comes";
    r.makespan = std::max(r.makespan, clock[static_cast<std::size_t>(st)]);
  }
  for (int st = 0; st < p; ++st) r.idle.push_back(r.makespan - busy[static_cast<std::size_t>(st)]);
  return r;
}

}  // namespace zerosim::plan_detail
