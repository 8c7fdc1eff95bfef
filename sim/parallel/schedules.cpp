#include "sim/parallel/schedules.h"

#include <algorithm>
#include <deque>

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

}  // namespace

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
    case PipelineSchedule::ZeroBubble: return zero_bubble_h1_schedule(m, p, stage);
    case PipelineSchedule::DualPipeV: return dualpipev_schedule(m, p, stage);
    case PipelineSchedule::DualPipe: return dualpipe_schedule(m, p, stage);
  }
  return {};
}

}  // namespace zerosim::plan_detail
