#pragma once
// Where the expert-parallel groups sit on the cluster: their ranks, and how the flex dispatcher
// sees them (the nodes a group spans and its ranks on each). Ranks are placed in order, rank r on
// GPU r, with TP innermost, then DP (with CP inside it), then the pipeline stage.
#include <optional>
#include <vector>

#include "sim/scenario/scenario.h"

namespace zerosim {

// The cluster ranks of expert-parallel group `group` of `stage`, in rank order: ep consecutive
// DP indices at TP rank `tp_rank`, or, when the groups span TP (Scenario::experts_span_tp), ep / tp
// consecutive DP indices at every TP rank (tp_rank is then ignored).
std::vector<int> expert_group_ranks(const Scenario& s, int stage, int tp_rank, int group);

// An expert-parallel group as DeepEP sees it: `nodes` nodes with `per_node` of its ranks on each.
struct EpNodeSplit {
  int nodes = 1;
  int per_node = 1;
};

// The split every expert-parallel group shares; nullopt when a group has different numbers of
// ranks on its nodes, or two groups differ.
std::optional<EpNodeSplit> ep_node_split(const Scenario& s);

// Whether the MoE exchanges run as the flex dispatcher's: flex asked for, expert parallelism,
// expert TP 1 (tp 1, or groups spanning TP) and an even node split. resolve_scenario warns when
// flex is asked for and one of the others is missing.
bool flex_dispatch(const Scenario& s);

}  // namespace zerosim
