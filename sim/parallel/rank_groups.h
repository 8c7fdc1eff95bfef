#pragma once
// From stage templates to the plan of every rank: Megatron's rank order (tensor-parallel ranks
// adjacent, then data, then pipeline), the groups (DP per stage and TP index, TP per stage and DP
// index, DP shard and replica sub-groups, one two-rank group per ordered pair of adjacent stages),
// symmetry folding, and the matching of every rank's collectives into one Collective per
// (group, instance).
#include <vector>

#include "sim/parallel/stage_template.h"

namespace zerosim::plan_detail {

// Copies templates[stage] to every rank of that stage into out.plan (groups, collectives,
// stage_of_rank, group_kind). With `fold`, only the first data-parallel replica is instantiated
// and every group records the cluster ranks it stands for.
void instantiate_ranks(const Scenario& s, const std::vector<Template>& templates, bool fold,
                       TrainingPlan& out);

}  // namespace zerosim::plan_detail
