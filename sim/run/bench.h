#pragma once
// `zerosim bench`: the engine's speed on one scenario at growing data-parallel degree.
#include <cstdint>
#include <functional>

namespace zerosim {

struct BenchRow {
  int dp = 0, ranks = 0;
  std::uint64_t events = 0;
  double wall_s = 0;         // every rank simulated
  double step_s = 0;         // the simulated step
  double folded_wall_s = 0;  // the same scenario folded to one replica
};

// Llama-2-7B, ZeRO-3, 2 micro-batches per GPU, dgx-h100 nodes, at DP = 8, 64, 512 and 4096,
// every rank simulated (sim.ranks=all) so that the engine's speed shows, then folded. Wall time
// covers plan building, the engine and the report. The analytical network, so that the
// engine's cost is what is timed (the flow network has its own bench, flow_bench). Each row is
// handed to `on_row` as soon as it is measured.
void run_engine_bench(const std::function<void(const BenchRow&)>& on_row);

}  // namespace zerosim
