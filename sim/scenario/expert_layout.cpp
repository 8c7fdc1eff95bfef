#include "sim/scenario/expert_layout.h"

#include <map>

namespace zerosim {

std::vector<int> expert_group_ranks(const Scenario& s, int stage, int tp_rank, int group) {
  const int tp = s.parallel.tp, dp = s.parallel.dp_cp(), span = s.ep_dp_span();
  std::vector<int> ranks;
  for (int i = 0; i < span; ++i) {
    const int d = group * span + i;
    if (s.experts_span_tp()) {
      for (int t = 0; t < tp; ++t) ranks.push_back((stage * dp + d) * tp + t);
    } else {
      ranks.push_back((stage * dp + d) * tp + tp_rank);
    }
  }
  return ranks;
}

std::optional<EpNodeSplit> ep_node_split(const Scenario& s) {
  const int per_node_gpus = s.cluster.gpus_per_node;
  if (per_node_gpus <= 0) return std::nullopt;
  std::optional<EpNodeSplit> shared;
  const int tps = s.experts_span_tp() ? 1 : s.parallel.tp;
  const int groups = s.parallel.dp_cp() / s.ep_dp_span();
  for (int st = 0; st < s.parallel.pp; ++st) {
    for (int t = 0; t < tps; ++t) {
      for (int g = 0; g < groups; ++g) {
        std::map<int, int> on_node;
        for (int r : expert_group_ranks(s, st, t, g)) ++on_node[r / per_node_gpus];
        const int per_node = on_node.begin()->second;
        for (const auto& [node, count] : on_node) {
          if (count != per_node) return std::nullopt;
        }
        const EpNodeSplit split{static_cast<int>(on_node.size()), per_node};
        if (shared && (shared->nodes != split.nodes || shared->per_node != split.per_node)) {
          return std::nullopt;
        }
        shared = split;
      }
    }
  }
  return shared;
}

bool flex_dispatch(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  return p.moe_token_dispatcher_type == MoeDispatcher::Flex && s.model.is_moe() && p.ep > 1 &&
         s.expert_tp() == 1 && ep_node_split(s).has_value();
}

}  // namespace zerosim
