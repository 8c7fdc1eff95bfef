#pragma once
// Sharded data-parallel training of a tiny synthetic model, as ZeRO stages 1, 2 and 3 shard it,
// against the same training unsharded on one rank; on the fp32 path they must agree bit for bit.
//
// The model: a list of flat fp32 tensors (sizes need not divide by the number of ranks). Each
// data-parallel rank r computes, at step s, the gradient g_r[i] = synthetic_grad(r, s, i, p[i])
// from the full parameters p. The unsharded run sums g_0 + g_1 + ... in rank order, then runs the
// CPU Adam (kernels/adam_cpu.h) over every parameter with grad_scale = ranks (averaging).
//
// The sharded runs, per stage (DeepSpeed stage_1_and_2.py / stage3.py):
//   stage 1  all tensors flattened into one buffer, partitioned over the ranks; gradients
//            all-reduced in full, each rank steps Adam on its partition, all-gathers parameters;
//   stage 2  same partitions, gradients reduce-scattered (each rank receives only its partition);
//   stage 3  each tensor partitioned on its own; parameters all-gathered before the forward pass,
//            gradients reduce-scattered per tensor, Adam on the rank's concatenated pieces, no
//            all-gather after the step.
// Partitioning: Padded (DeepSpeed: every rank ceil(n / ranks) elements, the tail padded with
// zeros, so the last ranks hold padding or nothing) or Uneven (no padding; the first n % ranks
// ranks hold one element more). Reductions add members in rank order (comm.h), as the unsharded
// sum does; Adam is elementwise; so equality is exact, and any error in partitioning, offsets,
// padding or collective routing shows up as a difference.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/adam_math.h"
#include "validate/comm.h"

namespace zerosim::validate {

enum class Partition { Padded, Uneven };
const char* to_string(Partition p);

struct ZeroCheckConfig {
  int stage = 1;  // 1, 2 or 3
  std::vector<std::int64_t> tensor_sizes{1, 7, 1000, 33};
  int steps = 4;
  Partition partition = Partition::Padded;
  kernels::AdamParams adam{};  // step and grad_scale are set per step / from the rank count
};

struct ModelState {
  std::vector<float> params, exp_avg, exp_avg_sq;  // every parameter, in model order
};

float synthetic_grad(int rank, int step, std::int64_t i, float param);
float initial_param(std::int64_t i);

// One piece of a rank's shard: elements [begin, begin + count) of segment `segment` in padded
// coordinates (a segment is the flat buffer for stages 1/2, one tensor for stage 3).
struct ShardPiece {
  int segment = 0;
  std::int64_t begin = 0, count = 0;
};
struct ShardLayout {
  struct Segment {
    std::int64_t offset = 0;  // first element in the model's flat order
    std::int64_t length = 0;  // real elements
    std::int64_t padded = 0;  // length + padding
    std::vector<std::int64_t> counts;  // per rank, summing to padded
  };
  std::vector<Segment> segments;
  std::vector<ShardPiece> pieces;  // this rank's, in shard order
  std::int64_t shard_size = 0;
};
ShardLayout shard_layout(const ZeroCheckConfig& cfg, int ranks, int position);

// Every rank of data-parallel group g calls this; each returns the full final state.
ModelState run_sharded(Comm& comm, int g, const ZeroCheckConfig& cfg);
ModelState run_unsharded(int ranks, const ZeroCheckConfig& cfg);
// `ranks` threads over an in-process Comm; returns each rank's final state.
std::vector<ModelState> run_sharded_threads(int ranks, const ZeroCheckConfig& cfg);

// "" when a and b are bit-identical, else where they first differ.
std::string first_difference(const ModelState& a, const ModelState& b);

}  // namespace zerosim::validate
