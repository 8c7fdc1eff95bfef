#pragma once
// How the model is cut: layers over pipeline stages (and interleaved chunks), parameters over
// the tensor-parallel ranks. The result is a list of parameter units per virtual stage, the
// granularity at which ZeRO-3 fetches parameters and backward hooks hand gradients over.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/parallel/training_plan.h"

namespace zerosim::plan_detail {

// A parameter unit: what one ZeRO-3 fetch gathers and one backward hook hands to the gradient
// buckets. Units are the embedding, each layer's attention block and MLP block, and the head.
struct Unit {
  WorkKind forward, backward;
  int layer = -1;
  std::int64_t params = 0;  // this TP rank's share
  std::string label;
  // Parameter tensors: weights (and tables) large enough to be partitioned, and the small ones
  // (biases, norms). The stage-3 schedules use them: DeepSpeed 0.3-0.5 gathers each tensor alone,
  // later versions gather per module and fire one gradient hook per tensor.
  int big_tensors = 1, small_tensors = 0;
  // The weight of each module that owns one, in forward order, on this TP rank (fused QKV and
  // the output projection; the MLP's two or three linears; a table): the nn.Modules DeepSpeed's
  // stage 3 hooks fetch one by one. The unit's other parameters are its small tensors.
  std::vector<std::int64_t> weights;
  // Of `params`, the routed experts this rank holds: with expert parallelism their gradients are
  // reduced, and their optimizer states partitioned, over the expert-data-parallel group.
  std::int64_t expert_params = 0;
};

// The elements of a unit's small tensors: its parameters outside its modules' weights.
std::int64_t small_tensor_elements(const Unit& u);

// Of a unit's parameters, the routed experts that live on the expert-data-parallel group (with
// ep > 1: their gradients reduced, partitions gathered and shards fetched over it); 0 without
// expert parallelism, where they are ordinary parameters.
inline std::int64_t expert_group_params(const Scenario& s, const Unit& u) {
  return s.parallel.ep > 1 ? u.expert_params : 0;
}

// Bytes per element of a unit's parameters in a parameter all-gather: 16-bit, or 8-bit for a
// layer's weights when fp8 training gathers them in FP8 (training.fp8_param_gather: ZeRO-3 /
// FSDP's gathers and Megatron's distributed optimizer's; the norms and biases among them too,
// ASSUMPTION: they are under 0.1 % of a layer's elements).
inline int gathered_param_bytes(const Scenario& s, const Unit& u) {
  return s.training.fp8_param_gather && u.layer >= 0 ? 1 : 2;
}

// The first of the units a layer's blocks occupy in `units` that end at unit `last` (a layer's
// attention and MLP or MoE blocks are consecutive), and whether unit i is its layer's last block:
// where full recomputation's replay of the layer begins its backward.
inline std::size_t layer_first_unit(const std::vector<Unit>& units, std::size_t last) {
  std::size_t first = last;
  while (first > 0 && units[first - 1].layer == units[last].layer &&
         is_layer_backward(units[first - 1].backward)) {
    --first;
  }
  return first;
}
inline bool ends_layer(const std::vector<Unit>& units, std::size_t i) {
  return is_layer_backward(units[i].backward) &&
         (i + 1 == units.size() || units[i + 1].layer != units[i].layer);
}

// "fwd attention L3", "gather(bwd) head": an op name for a pass over a unit.
std::string unit_op_name(const Unit& u, const char* pass);

// Units of every virtual stage g = chunk * pp + stage, in model order. Each holds the layers
// Megatron's split gives it (virtual_stage_layers, sim/scenario/pipeline_split.h); the embedding
// rides with virtual stage 0 and the head with the last.
std::vector<std::vector<Unit>> virtual_stage_units(const Scenario& s);

// The units of pipeline stage `stage`, one list per interleaved chunk.
std::vector<std::vector<Unit>> stage_chunks(const Scenario& s,
                                            const std::vector<std::vector<Unit>>& per_virtual,
                                            int stage);

}  // namespace zerosim::plan_detail
