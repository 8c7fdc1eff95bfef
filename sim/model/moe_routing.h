#pragma once
// Where an MoE layer's tokens go: the chance that a token's top_k experts include one of a
// unit's (a rank's, a node's), under routing that is uniformly random within what the router
// allows. The flex dispatcher (DeepEP) sends a token once per unit its experts fall in, so its
// traffic follows these chances, where the all-to-all dispatcher's follows top_k.
#include <cstdint>

#include "sim/model/model.h"

namespace zerosim {

// The probability that a token's top_k experts include at least one of experts
// [first, first + count). Routing: with group-limited routing the token picks router_group_topk
// of the router_num_groups groups, each set equally likely, then top_k distinct experts of those
// groups, each set equally likely; without it, top_k distinct experts of all, each set equally
// likely. This is exact for Megatron-core's moe_router_force_load_balancing (random scores, as in
// NVIDIA's MoE benchmarks) and an ASSUMPTION for a trained router (its choices are not
// independent of the token; DeepSeek-V3's auxiliary-loss-free balancing keeps the experts' loads
// even, which is what these chances need on average).
double expert_range_hit_probability(const MoeSpec& e, std::int64_t first, std::int64_t count);

// The mean of expert_range_hit_probability over the num_experts / unit units of `unit`
// consecutive experts (the ranks of an EP group, when unit = num_experts / ep; its nodes, when
// unit = num_experts / nodes). unit must divide num_experts.
double unit_hit_probability(const MoeSpec& e, std::int64_t unit);

}  // namespace zerosim
