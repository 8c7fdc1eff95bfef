#include "sim/parallel/schedules.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <stdexcept>
#include <utility>

namespace zerosim::plan_detail {

namespace {

// Pass k of each direction in Megatron's interleaved order: groups of pp micro-batches go
// through chunk 0, then chunk 1, ...; backwards visit the chunks in reverse. With one chunk
// pass k is micro-batch k.
PassStep forward_pass_k(int k, int pp, int chunks) {
  return {true, (k / (pp * chunks)) * pp + k % pp, (k / pp) % chunks};
}
PassStep backward_pass_k(int k, int pp, int chunks) {
  return {false, (k / (pp * chunks)) * pp + k % pp, chunks - 1 - (k / pp) % chunks};
}

// `warmup` forwards, then alternately one forward and one backward, then the remaining
// backwards: the shape every schedule here shares.
std::vector<PassStep> warmup_steady_cooldown(int total, int warmup, int pp, int chunks,
                                             bool combined = false) {
  std::vector<PassStep> out;
  for (int k = 0; k < warmup; ++k) out.push_back(forward_pass_k(k, pp, chunks));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(forward_pass_k(warmup + k, pp, chunks));
    out.back().combined_with_next = combined;
    out.push_back(backward_pass_k(k, pp, chunks));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(backward_pass_k(k, pp, chunks));
  return out;
}

// The fork's V-schedule search (scheduler/zbv.py, PipelineGraph) over all stages at once. A
// pass is (kind, lane, stage, micro-batch), kind F, B or W; lane 0 is the first pass of its kind
// a micro-batch makes (F of chunk 0, B of chunk 1: the backward starts at the V's top, on stage
// 0), lane 1 the second. For F and B alike lane 0 runs from stage s - 1 to s and lane 1 from
// s + 1 to s; a W follows its own B on the same stage. Times and memory are integers, so the
// search is exact and the same on every machine.
class ZeroBubbleV {
 public:
  struct Pass {
    int kind, lane, mb;
  };
  struct Attempt {
    std::vector<std::vector<Pass>> order;  // per stage
    std::vector<std::int64_t> idle;        // per stage: waits after its first forward
    std::int64_t worst = 0;
    std::vector<std::int64_t> end;         // per pass (id()): when it ends in the search's timeline
  };

  // Where pass `p` of `stage` receives its input from: the neighbour's same pass, except at the
  // V's turns (chunk 0 to chunk 1 on the last stage, the loss on stage 0) and for W.
  std::optional<std::size_t> input_of(const Pass& p, int stage) const {
    if (p.kind == kW) return std::nullopt;
    const int from = p.lane == 0 ? stage - 1 : stage + 1;
    if (from < 0 || from >= pp_) return std::nullopt;
    return id(p.kind, p.lane, from, p.mb);
  }
  std::size_t id_of(const Pass& p, int stage) const { return id(p.kind, p.lane, stage, p.mb); }
  std::int64_t time_of(const Pass& p) const { return time_[p.kind]; }

  ZeroBubbleV(int micro_batches, int pp, const ZeroBubbleVCosts& c)
      : m_(micro_batches), pp_(pp), comm_(c.p2p),
        time_{c.forward, c.input_backward, c.weight_backward},
        memory_{c.forward_memory, c.input_backward_memory, c.weight_backward_memory},
        memory_limit_(2 * std::int64_t{pp} * c.forward_memory) {}

  // Both ways of filling waits with Ws before a B and before an F (the four combinations, in
  // the fork's order); the first whose worst stage waits least.
  Attempt best() {
    Attempt out;
    bool have = false;
    for (bool fill_b : {true, false}) {
      for (bool fill_f : {true, false}) {
        Attempt a = refine(fill_f, fill_b);
        if (!have || a.worst < out.worst) out = std::move(a);
        have = true;
      }
    }
    return out;
  }

 private:
  static constexpr int kF = 0, kB = 1, kW = 2;

  // The fork repeats the search with each stage allowed the waits the previous attempt left
  // it, while that lowers the worst stage's waits, and keeps the last attempt that did.
  Attempt refine(bool fill_f, bool fill_b) {
    Attempt prev = attempt(fill_f, fill_b, nullptr);
    for (;;) {
      Attempt next = attempt(fill_f, fill_b, &prev.idle);
      if (next.worst >= prev.worst) return prev;
      prev = std::move(next);
    }
  }

  std::size_t id(int kind, int lane, int stage, int mb) const {
    return ((static_cast<std::size_t>(kind) * 2 + static_cast<std::size_t>(lane)) *
                static_cast<std::size_t>(pp_) + static_cast<std::size_t>(stage)) *
               static_cast<std::size_t>(m_) + static_cast<std::size_t>(mb);
  }
  int& count(int stage, int kind, int lane) {
    return count_[static_cast<std::size_t>(stage) * 6 + static_cast<std::size_t>(kind * 2 + lane)];
  }
  static void invariant(bool ok) {
    if (!ok) throw std::logic_error("ZB-V schedule search: an invariant of the fork's search broke");
  }

  // Appends pass (kind, lane) of its next micro-batch to `stage`, as early as the stage and
  // the pass's input allow.
  void place(int kind, int lane, int stage) {
    const int mb = count(stage, kind, lane);
    invariant(mb < m_ && mem_[stage] + memory_[kind] <= memory_limit_);
    if (kind == kW) invariant(end_[id(kB, lane, stage, mb)] >= 0);
    if (kind != kW && (kind > 0 || lane > 0)) {
      const int before = kind * 2 + lane - 1;  // F1 after F0, B0 after F1, B1 after B0
      invariant(end_[id(before / 2, before % 2, stage, mb)] >= 0);
    }
    const std::int64_t unhindered = clock_[stage] + time_[kind];
    std::int64_t t = unhindered;
    if (const auto input = input_of({kind, lane, mb}, stage)) {
      invariant(end_[*input] >= 0);
      t = std::max(t, end_[*input] + comm_ + time_[kind]);
    }
    if (count(stage, kF, 0) > 0) idle_[stage] += t - unhindered;
    end_[id(kind, lane, stage, mb)] = t;
    clock_[stage] = t;
    mem_[stage] += memory_[kind];
    order_[stage].push_back({kind, lane, mb});
    if (kind == kB) pending_w_[stage].push_back(lane);
    ++count(stage, kind, lane);
  }
  void place_w(int stage) {
    invariant(!pending_w_[stage].empty());
    const int lane = pending_w_[stage].front();
    pending_w_[stage].pop_front();
    place(kW, lane, stage);
  }
  std::int64_t worst_idle(int stage) const {
    std::int64_t w = *std::max_element(idle_.begin(), idle_.end());
    if (stage >= 0) w = std::max(w, approved_max_ - approved_[stage]);
    return w;
  }
  // The end of the pass a stage waits for; where there is none the fork reads the last pass of
  // its table (a Python index of -1), which is unplaced until the very end.
  std::int64_t input_end(std::optional<std::size_t> input) const {
    return input ? end_[*input] : end_.back();
  }
  // Before placing a pass whose input ends at `input`: Ws while they fit in the wait, and one
  // more where the wait would exceed what the stage may idle.
  void fill_wait(int stage, std::optional<std::size_t> input, bool fill) {
    while (!pending_w_[stage].empty() && input &&
           end_[*input] + comm_ >= clock_[stage] + time_[kW])
      place_w(stage);
    if (!pending_w_[stage].empty() &&
        input_end(input) + comm_ - clock_[stage] > worst_idle(stage) - idle_[stage] && fill)
      place_w(stage);
  }

  Attempt attempt(bool fill_f, bool fill_b, const std::vector<std::int64_t>* approved) {
    const auto stages = static_cast<std::size_t>(pp_);
    end_.assign(6 * stages * static_cast<std::size_t>(m_), -1);
    count_.assign(6 * stages, 0);
    clock_.assign(stages, 0);
    mem_.assign(stages, 0);
    idle_.assign(stages, 0);
    pending_w_.assign(stages, {});
    order_.assign(stages, {});
    approved_ = approved ? *approved : std::vector<std::int64_t>(stages, -1);
    approved_max_ = *std::max_element(approved_.begin(), approved_.end());

    // Warm-up: one chunk-0 forward per stage; then, from the last stage down, chunk 0 forwards
    // on the stages below while they fit before the chunk-1 forward arrives from above.
    for (int st = 0; st < pp_; ++st) place(kF, 0, st);
    for (int st = pp_ - 1; st >= 0; --st) {
      if (st < pp_ - 1) {
        const std::int64_t arrives = end_[id(kF, 1, st + 1, 0)] + comm_;
        while (mem_[st] + memory_[kF] * (2 + 2 * std::int64_t{st}) <= memory_limit_ &&
               clock_[st] + time_[kF] <= arrives && count(st, kF, 0) < m_) {
          for (int j = 0; j <= st; ++j) place(kF, 0, j);
        }
      }
      place(kF, 1, st);
    }
    // Each stage above the first takes forwards, the two lanes in turn and from the top down,
    // until it has run as many as the stage below and more of chunk 1.
    int lane = 0;
    for (int st = 1; st < pp_; ++st) {
      auto behind = [&] {
        const int here = count(st, kF, 0) + count(st, kF, 1);
        const int below = count(st - 1, kF, 0) + count(st - 1, kF, 1);
        return here < below ||
               (count(st, kF, 1) <= count(st - 1, kF, 1) && count(st - 1, kF, 1) < m_);
      };
      for (int empty_turns = 0; behind();) {
        bool placed = false;
        for (int j = pp_ - 1; j >= st; --j) {
          if (count(j, kF, lane) < m_) {
            place(kF, lane, j);
            placed = true;
          }
        }
        lane = 1 - lane;
        empty_turns = placed ? 0 : empty_turns + 1;
        invariant(empty_turns < 2);  // both lanes exhausted: the search would not end
      }
    }
    // Steady state and cool-down: 2 m rounds of one B per stage, then one F where one is due.
    for (int round = 0; round < 2 * m_; ++round) {
      for (int st = 0; st < pp_; ++st) {
        while (mem_[st] + memory_[kB] > memory_limit_) place_w(st);
      }
      std::vector<int> lane0, lane1;
      for (int st = 0; st < pp_; ++st) {
        if (count(st, kB, 1) >= count(st, kB, 0)) {
          lane0.push_back(st);
        } else if (st == pp_ - 1 || end_[id(kB, 1, st + 1, count(st, kB, 1))] >= 0 ||
                   count(st, kB, 0) >= m_) {
          lane1.push_back(st);
        } else {
          lane0.push_back(st);
        }
      }
      std::vector<std::pair<int, int>> bs;  // (stage, lane): lane 1 from the top, then lane 0
      for (auto it = lane1.rbegin(); it != lane1.rend(); ++it) bs.push_back({*it, 1});
      for (int st : lane0) bs.push_back({st, 0});
      for (const auto& [st, ln] : bs) {
        fill_wait(st, input_of({kB, ln, count(st, kB, ln)}, st), ln == 1 || fill_b);
        place(kB, ln, st);
      }
      for (int st = 0; st < pp_; ++st) {
        if (count(st, kF, 1) >= m_) continue;
        int next = -1;
        if (count(st, kF, 1) >= count(st, kF, 0)) {
          next = 0;
        } else if (st == pp_ - 1 || end_[id(kF, 1, st + 1, count(st, kF, 1))] >= 0) {
          next = 1;
        } else if (count(st, kF, 0) < m_ &&
                   (st == 0 || end_[id(kF, 0, st - 1, count(st, kF, 0))] >= 0)) {
          next = 0;
        }
        if (next < 0) continue;
        while (mem_[st] + memory_[kF] > memory_limit_) place_w(st);
        fill_wait(st, input_of({kF, next, count(st, kF, next)}, st), fill_f);
        place(kF, next, st);
      }
    }
    for (int st = 0; st < pp_; ++st) {
      while (!pending_w_[st].empty()) place_w(st);
    }
    Attempt a{std::move(order_), idle_, worst_idle(-1), std::move(end_)};
    return a;
  }

  int m_, pp_;
  std::int64_t comm_;
  std::int64_t time_[3], memory_[3];
  std::int64_t memory_limit_;
  std::vector<std::int64_t> end_, clock_, mem_, idle_, approved_;
  std::int64_t approved_max_ = -1;
  std::vector<int> count_;
  std::vector<std::deque<int>> pending_w_;
  std::vector<std::vector<Pass>> order_;
};

std::vector<PassStep> zero_bubble_v_steps(const ZeroBubbleV& v, const ZeroBubbleV::Attempt& a,
                                          int stage) {
  const std::vector<ZeroBubbleV::Pass>& order = a.order[static_cast<std::size_t>(stage)];
  std::vector<std::int64_t> starts;  // in the search's timeline, non-decreasing
  for (const ZeroBubbleV::Pass& p : order) starts.push_back(a.end[v.id_of(p, stage)] - v.time_of(p));
  std::vector<PassStep> out;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const ZeroBubbleV::Pass& p = order[k];
    // Forward lanes are chunks; a backward's lane 0 is chunk 1 (the V's top first).
    if (p.kind == 0) {
      out.push_back({true, p.mb, p.lane});
    } else {
      out.push_back({false, p.mb, 1 - p.lane,
                     p.kind == 1 ? BackwardPart::Input : BackwardPart::Weight});
    }
    // The receive goes after the last pass that starts before the data is due, or before
    // that pass if the data is due while it runs.
    if (const auto input = v.input_of(p, stage)) {
      const std::int64_t due = a.end[*input];
      int after = static_cast<int>(std::lower_bound(starts.begin(), starts.end(), due) -
                                   starts.begin()) - 1;
      if (after >= 0 && a.end[v.id_of(order[static_cast<std::size_t>(after)], stage)] >= due)
        --after;
      out.back().receive_after = std::max(after, PassStep::kAtStart);
    }
  }
  return out;
}

}  // namespace

std::vector<PassStep> zero_bubble_v_schedule(int micro_batches, int pp, int stage,
                                             const ZeroBubbleVCosts& costs) {
  // One search orders every stage; the plan asks for them one stage at a time.
  struct Memo {
    int micro_batches = -1, pp = -1;
    ZeroBubbleVCosts costs;
    std::vector<std::vector<PassStep>> stages;
  };
  thread_local Memo memo;
  if (memo.micro_batches != micro_batches || memo.pp != pp || !(memo.costs == costs)) {
    ZeroBubbleV v(micro_batches, pp, costs);
    const ZeroBubbleV::Attempt a = v.best();
    memo = {micro_batches, pp, costs, {}};
    for (int st = 0; st < pp; ++st) memo.stages.push_back(zero_bubble_v_steps(v, a, st));
  }
  return memo.stages[static_cast<std::size_t>(stage)];
}

ZeroBubbleVCosts zero_bubble_v_costs(const Scenario& s) {
  const std::int64_t h = s.model.hidden_size, seq = s.model.seq_length,
                     a = s.model.num_attention_heads;
  ZeroBubbleVCosts c;
  // Per b s h: the FLOPs of section 3, Table 1.
  c.forward = 24 * h + 4 * seq;
  c.input_backward = 24 * h + 8 * seq;
  c.weight_backward = 24 * h;
  c.p2p = 0;
  // Per token: runtime.py's estimates (f_mem_approx, w_mem_approx, b_mem_approx).
  c.forward_memory = 34 * h + 5 * a * seq;
  c.weight_backward_memory = -32 * h;
  c.input_backward_memory = -c.forward_memory - c.weight_backward_memory;
  return c;
}

std::vector<PassStep> no_pipeline_schedule(int micro_batches, int chunks) {
  std::vector<PassStep> out;
  for (int j = 0; j < micro_batches; ++j) {
    for (int c = 0; c < chunks; ++c) out.push_back({true, j, c});
    for (int c = chunks; c-- > 0;) out.push_back({false, j, c});
  }
  return out;
}

std::vector<PassStep> gpipe_schedule(int micro_batches, int pp, int chunks) {
  const int total = micro_batches * chunks;
  return warmup_steady_cooldown(total, total, pp, chunks);
}

std::vector<PassStep> one_f_one_b_schedule(int micro_batches, int pp, int stage) {
  return warmup_steady_cooldown(micro_batches, std::min(pp - stage - 1, micro_batches), pp, 1);
}

std::vector<PassStep> interleaved_schedule(int micro_batches, int pp, int chunks, int stage) {
  const int total = micro_batches * chunks;
  const int warmup = std::min((pp - stage - 1) * 2 + (chunks - 1) * pp, total);
  return warmup_steady_cooldown(total, warmup, pp, chunks);
}

std::vector<PassStep> zero_bubble_h1_schedule(int micro_batches, int pp, int stage) {
  const int m = micro_batches;
  const int warmup = std::min(pp - stage - 1, m);
  std::vector<PassStep> out;
  for (int j = 0; j < warmup; ++j) out.push_back({true, j, 0});
  int weights = 0;
  for (int b = 0; b < m; ++b) {
    if (warmup + b < m) out.push_back({true, warmup + b, 0});
    out.push_back({false, b, 0, BackwardPart::Input});
    if (b >= stage) out.push_back({false, weights++, 0, BackwardPart::Weight});
  }
  while (weights < m) out.push_back({false, weights++, 0, BackwardPart::Weight});
  return out;
}

std::vector<PassStep> combined_1f1b_schedule(int micro_batches, int pp, int chunks, int stage) {
  const int total = micro_batches * chunks;
  const int warmup = pp == 1 ? 1 : (pp - stage - 1) * 2 + (chunks - 1) * pp + 1;
  return warmup_steady_cooldown(total, std::min(warmup, total), pp, chunks, true);
}

std::vector<PassStep> dualpipev_schedule(int micro_batches, int pp, int stage) {
  const int m = micro_batches, r = stage;
  std::vector<PassStep> out;
  int forwards[2] = {0, 0}, backwards[2] = {0, 0};
  std::deque<PassStep> deferred;  // the Ws of split backwards, run first in first out
  auto forward = [&](int c, bool with_next = false) {
    out.push_back({true, forwards[c]++, c});
    out.back().combined_with_next = with_next;
  };
  auto backward = [&](int c, bool split) {
    const int mb = backwards[c]++;
    out.push_back({false, mb, c, split ? BackwardPart::Input : BackwardPart::Whole});
    if (split) deferred.push_back({false, mb, c, BackwardPart::Weight});
  };
  auto weight = [&] {
    out.push_back(deferred.front());
    deferred.pop_front();
  };
  // A forward of chunk `f` overlapped with a (whole) backward of chunk `b`.
  auto overlapped = [&](int f, int b) {
    forward(f, true);
    backward(b, false);
  };
  for (int i = 0; i < 2 * (pp - r - 1); ++i) forward(0);
  for (int i = 0; i < r + 1; ++i) {
    forward(0);
    forward(1);
  }
  for (int i = 0; i < pp - r - 1; ++i) {
    backward(1, true);
    weight();
    forward(1);
  }
  for (int i = 0; i < m - 2 * pp + r + 1; ++i) {
    if (i == 0 && r == pp - 1) {
      // The last stage's first pair runs one pass after the other (dualpipev.py: not
      // overlapped, to shrink the bubble further).
      forward(0);
      backward(1, false);
    } else {
      overlapped(0, 1);
    }
    overlapped(1, 0);
  }
  for (int i = 0; i < pp - r - 1; ++i) {
    backward(1, false);
    overlapped(1, 0);
  }
  // From the middle of this phase on the backwards are split, chunk 1's first on odd stages.
  bool split = false;
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) split = true;
    backward(1, split);
    if (i == (r + 1) / 2 && r % 2 == 0) split = true;
    backward(0, split);
  }
  for (int i = 0; i < pp - r - 1; ++i) {
    weight();
    backward(0, true);
  }
  while (!deferred.empty()) weight();
  return out;
}

std::vector<PassStep> dualpipe_schedule(int micro_batches, int pp, int stage) {
  std::vector<PassStep> out =
      dualpipev_schedule(micro_batches / 2, pp / 2, std::min(stage, pp - 1 - stage));
  if (stage >= pp / 2) {
    for (PassStep& st : out) st.chunk = 1 - st.chunk;
  }
  return out;
}

std::vector<PassStep> pipeline_schedule(const Scenario& s, int stage) {
  const int m = static_cast<int>(s.training.gradient_accumulation_steps);
  const int p = s.parallel.pp, v = s.parallel.virtual_stages;
  if (s.parallel.overlap_moe_expert_parallel_comm) return combined_1f1b_schedule(m, p, v, stage);
  if (p == 1) return no_pipeline_schedule(m, v);
  switch (s.parallel.pipeline_schedule) {
    case PipelineSchedule::GPipe: return gpipe_schedule(m, p, v);
    case PipelineSchedule::OneFOneB: return one_f_one_b_schedule(m, p, stage);
    case PipelineSchedule::Interleaved: return interleaved_schedule(m, p, v, stage);
    case PipelineSchedule::ZeroBubble:
      return v == 2 ? zero_bubble_v_schedule(m, p, stage, zero_bubble_v_costs(s))
                    : zero_bubble_h1_schedule(m, p, stage);
    case PipelineSchedule::DualPipeV: return dualpipev_schedule(m, p, stage);
    case PipelineSchedule::DualPipe: return dualpipe_schedule(m, p, stage);
  }
  return {};
}

}  // namespace zerosim::plan_detail
