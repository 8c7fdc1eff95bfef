#include "sim/parallel/rank_groups.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "sim/scenario/expert_layout.h"

namespace zerosim {

const char* group_kind_name(GroupKind k) { return name_of<GroupKind>(kGroupKindNames, k); }

int dp_subgroup_size(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  if (z.mics_shard_size > 0) return z.mics_shard_size;
  if (z.hpz_partition_size > 1) return z.hpz_partition_size;
  if (z.quantized_gradients) return s.dp_ranks_per_node();
  return 1;
}

namespace plan_detail {
namespace {

class Instantiator {
 public:
  Instantiator(const Scenario& s, const std::vector<Template>& templates, bool fold,
               TrainingPlan& out)
      : s_(s), templates_(templates), fold_(fold), out_(out), plan_(out.plan),
        tp_(s.parallel.tp), pp_(s.parallel.pp), dp_(fold ? 1 : s.parallel.dp_cp()),
        dp_all_(s.parallel.dp_cp()), k_(dp_subgroup_size(s)), ep_(s.ep_dp_span()),
        ep_span_tp_(s.experts_span_tp()), cp_(s.parallel.cp),
        cp_ring_(s.parallel.cp_comm_type == CpCommType::A2aP2p
                     ? s.parallel.cp / s.parallel.cp_a2a_degree()
                     : 1),
        flex_(flex_dispatch(s)) {}

  void run() {
    plan_.num_ranks = tp_ * dp_ * pp_;
    out_.stage_of_rank.resize(plan_.num_ranks);
    if (fold_) {
      plan_.real_rank.resize(plan_.num_ranks);
      for (int st = 0; st < pp_; ++st) {
        for (int t = 0; t < tp_; ++t) plan_.real_rank[rank_of(st, 0, t)] = real_rank_of(st, 0, t);
      }
      plan_.cost_begin.push_back(0);
    }
    for (int d = 0; d < dp_all_; ++d) every_dp_.push_back(d);
    for (int d = 0; d < k_; ++d) first_shard_.push_back(d);
    for (int d = 0; d < dp_all_; d += k_) first_replica_.push_back(d);
    for (int d = 0; d < ep_; ++d) first_expert_group_.push_back(d);
    for (int d = 0; d < dp_all_; d += ep_) first_expert_replica_.push_back(d);
    // Hierarchical CP: Cp is the a2a level (its first cp / cp_ring_ DP indices folded), CpRing
    // the p2p level (DP indices 0, a2a, 2 a2a, ...).
    const int cp_block = two_cp_levels() ? cp_ / cp_ring_ : cp_;
    for (int d = 0; d < cp_block; ++d) first_context_group_.push_back(d);
    for (int d = 0; d < cp_; d += cp_block) first_context_ring_.push_back(d);
    group_of_.resize(plan_.num_ranks);
    position_.resize(plan_.num_ranks);
    for (auto& g : group_of_) g.fill(-1);
    for (int st = 0; st < pp_; ++st) {
      for (int t = 0; t < tp_; ++t) data_parallel_groups(st, t);
      for (int d = 0; d < dp_; ++d) tensor_parallel_group(st, d);
      if (ep_span_tp_) expert_groups_across_tp(st);
      if (flex_) flex_groups(st);
    }
    pipeline_groups();
    if (s_.two_model_copies()) mirror_groups();
    make_collectives();
    copy_ops();
    for (OpId m : plan_.members) {
      if (m == kNoOp) throw std::logic_error("a collective has a member that never joins");
    }
  }

 private:
  int rank_of(int stage, int dp_idx, int tp_idx) const {
    return (stage * dp_ + dp_idx) * tp_ + tp_idx;
  }
  // The cluster rank of (stage, dp index, tp index), folded or not.
  int real_rank_of(int stage, int dp_idx, int tp_idx) const {
    return (stage * dp_all_ + dp_idx) * tp_ + tp_idx;
  }
  void join(int rank, Peer peer, int group, int position) {
    group_of_[rank][static_cast<int>(peer)] = group;
    position_[rank][static_cast<int>(peer)] = position;
  }

  // The cluster ranks a group stands for: with folding, a DP group (or a sub-group of one) of one
  // member stands for the DP indices `folded_dp` (all of them for the whole DP group; the first
  // block or the first strided group for the sub-groups); an expert-parallel group across TP
  // (`across_tp`), of one member per TP rank, for those DP indices at every TP rank, in rank
  // order; other groups (and `pairwise` ones of any kind) map member by member.
  void add_cost(const std::vector<std::int32_t>& ranks, GroupKind kind,
                const std::vector<int>& folded_dp, bool across_tp, bool pairwise) {
    if (!fold_) return;
    if (pairwise) {
      for (std::int32_t r : ranks) plan_.cost_ranks.push_back(plan_.real_rank[r]);
    } else if (across_tp) {
      const int st = plan_.real_rank[ranks[0]] / (tp_ * dp_all_);
      for (int d : folded_dp)
        for (int t = 0; t < tp_; ++t) plan_.cost_ranks.push_back(real_rank_of(st, d, t));
    } else if (kind == GroupKind::Dp || kind == GroupKind::Ep || kind == GroupKind::Cp) {
      const int first = plan_.real_rank[ranks[0]];  // DP indices
      const int st = first / (tp_ * dp_all_), t = first % tp_;
      for (int d : folded_dp) plan_.cost_ranks.push_back(real_rank_of(st, d, t));
    } else {
      for (std::int32_t r : ranks) plan_.cost_ranks.push_back(plan_.real_rank[r]);
    }
    plan_.cost_begin.push_back(static_cast<std::uint32_t>(plan_.cost_ranks.size()));
  }
  int add_group(const std::vector<std::int32_t>& ranks, const std::string& name, GroupKind kind,
                const std::vector<int>& folded_dp = {}, bool across_tp = false,
                bool pairwise = false) {
    add_cost(ranks, kind, folded_dp.empty() ? every_dp_ : folded_dp, across_tp, pairwise);
    return register_group(ranks, name, kind);
  }
  // A group whose cluster ranks are given: folded, `ranks` (the simulated ones among them)
  // stand for all of `cluster_ranks`.
  int add_group_of(const std::vector<std::int32_t>& ranks, const std::vector<int>& cluster_ranks,
                   const std::string& name, GroupKind kind) {
    if (fold_) {
      plan_.cost_ranks.insert(plan_.cost_ranks.end(), cluster_ranks.begin(), cluster_ranks.end());
      plan_.cost_begin.push_back(static_cast<std::uint32_t>(plan_.cost_ranks.size()));
    }
    return register_group(ranks, name, kind);
  }
  int register_group(const std::vector<std::int32_t>& ranks, const std::string& name,
                     GroupKind kind) {
    plan_.group_ranks.insert(plan_.group_ranks.end(), ranks.begin(), ranks.end());
    plan_.group_begin.push_back(static_cast<std::uint32_t>(plan_.group_ranks.size()));
    plan_.group_names.push_back(name);
    out_.group_kind.push_back(kind);
    return plan_.num_groups() - 1;
  }

  // The DP group of (stage, tp index), and with k > 1 its shard groups (k consecutive DP ranks)
  // and replica groups (one rank of each shard group). Folded, the one DP member stands for the
  // first of each.
  void data_parallel_groups(int st, int t) {
    std::vector<std::int32_t> ranks;
    for (int d = 0; d < dp_; ++d) ranks.push_back(rank_of(st, d, t));
    const int g = add_group(ranks, "dp s" + std::to_string(st) + " t" + std::to_string(t),
                            GroupKind::Dp);
    for (int d = 0; d < dp_; ++d) join(rank_of(st, d, t), Peer::Dp, g, d);
    if (k_ > 1) {
      const SubGroups replicas{Peer::DpReplica, GroupKind::Dp, "dp-replica", first_replica_};
      const SubGroups shards{Peer::DpShard, GroupKind::Dp, "dp-shard", first_shard_};
      split_dp(st, t, k_, &shards, &replicas);
    }
    // Expert parallelism: groups of ep_ consecutive DP ranks and the strided expert-data-parallel
    // groups; when the EP groups span TP (expert TP 1), ep_ = ep / tp DP indices, and the EP
    // groups themselves are built across the TP ranks (expert_groups_across_tp).
    if (ep_ > 1 || ep_span_tp_) {
      const SubGroups replicas{Peer::Edp, GroupKind::Dp, "edp", first_expert_replica_};
      const SubGroups experts{Peer::Ep, GroupKind::Ep, "ep", first_expert_group_};
      split_dp(st, t, ep_, ep_span_tp_ ? nullptr : &experts, &replicas);
    }
    // The cp consecutive ranks sharing each sample (their strided groups, the DP groups without
    // CP, carry nothing: gradients are reduced over the whole dp x cp group). Hierarchical CP
    // splits them into its a2a level (consecutive) and its p2p level.
    if (cp_ > 1 && two_cp_levels()) {
      const SubGroups a2a{Peer::Cp, GroupKind::Cp, "cp-a2a", first_context_group_};
      split_dp(st, t, cp_ / cp_ring_, &a2a, nullptr);
      context_ring_groups(st, t);
    } else if (cp_ > 1) {
      const SubGroups context{Peer::Cp, GroupKind::Cp, "cp", first_context_group_};
      split_dp(st, t, cp_, &context, nullptr);
    }
  }

  // Hierarchical CP's p2p level: within each sample's cp consecutive DP indices, the ranks at the
  // same place in each a2a group (create_hierarchical_groups' second level). Folded, the first
  // DP index stands for the first such group.
  void context_ring_groups(int st, int t) {
    const int a2a = cp_ / cp_ring_;
    const int samples = fold_ ? 1 : dp_all_ / cp_, places = fold_ ? 1 : a2a;
    const int members = fold_ ? 1 : cp_ring_;
    for (int j = 0; j < samples; ++j) {
      for (int i = 0; i < places; ++i) {
        std::vector<std::int32_t> ranks;
        for (int k = 0; k < members; ++k) ranks.push_back(rank_of(st, j * cp_ + i + k * a2a, t));
        const int g = add_group(ranks,
                                "cp-p2p" + std::to_string(j * a2a + i) + " s" +
                                    std::to_string(st) + " t" + std::to_string(t),
                                GroupKind::Cp, first_context_ring_);
        for (int k = 0; k < members; ++k) join(ranks[k], Peer::CpRing, g, k);
      }
    }
  }

  // One kind of sub-group of a DP group: its peer, its kind, its name, and the DP indices its
  // folded one-member group stands for.
  struct SubGroups {
    Peer peer;
    GroupKind kind;
    const char* name;
    const std::vector<int>& folded_dp;
  };

  // The DP group of (stage, tp index) split by k: blocks of k consecutive DP ranks and the groups
  // of the ranks at the same position in each block (either may be left out). Folded, the one DP
  // member stands for the first of each.
  void split_dp(int st, int t, int k, const SubGroups* blocks, const SubGroups* strides) {
    const int block = fold_ ? 1 : k, count = fold_ ? 1 : dp_all_ / k;
    const std::string where = " s" + std::to_string(st) + " t" + std::to_string(t);
    for (int j = 0; blocks && j < count; ++j) {
      std::vector<std::int32_t> members;
      for (int i = 0; i < block; ++i) members.push_back(rank_of(st, j * k + i, t));
      const int g = add_group(members, blocks->name + std::to_string(j) + where, blocks->kind,
                              blocks->folded_dp);
      for (int i = 0; i < block; ++i) join(members[i], blocks->peer, g, i);
    }
    for (int i = 0; strides && i < block; ++i) {
      std::vector<std::int32_t> members;
      for (int j = 0; j < count; ++j) members.push_back(rank_of(st, j * k + i, t));
      const int g = add_group(members, strides->name + std::to_string(i) + where, strides->kind,
                              strides->folded_dp);
      for (int j = 0; j < count; ++j) join(members[j], strides->peer, g, j);
    }
  }

  // Expert parallelism across TP (expert TP 1, Megatron-core's MoE parallel folding): each group
  // is the ep_ consecutive DP indices of a block at every TP rank, ep consecutive ranks in rank
  // order. Folded, the TP ranks of the first DP index stand for the first block.
  void expert_groups_across_tp(int st) {
    const int block = fold_ ? 1 : ep_, count = fold_ ? 1 : dp_all_ / ep_;
    for (int j = 0; j < count; ++j) {
      std::vector<std::int32_t> members;
      for (int i = 0; i < block; ++i)
        for (int t = 0; t < tp_; ++t) members.push_back(rank_of(st, j * ep_ + i, t));
      const int g = add_group(members, "ep" + std::to_string(j) + " s" + std::to_string(st),
                              GroupKind::Ep, first_expert_group_, true);
      for (std::size_t n = 0; n < members.size(); ++n)
        join(members[n], Peer::Ep, g, static_cast<int>(n));
    }
  }

  // The flex dispatcher's halves of each expert-parallel group of stage st (expert_layout.h): its
  // ranks on each node (EpNode) and its ranks at the same place on each of its nodes (EpRail).
  // A group of one rank carries nothing and is not made. Folded, a group holds the simulated
  // ranks among its members and stands for all of them.
  void flex_groups(int st) {
    const int per_node = s_.cluster.gpus_per_node;
    const int groups = dp_all_ / ep_;
    const std::string where = " s" + std::to_string(st);
    for (int t = 0; t < (ep_span_tp_ ? 1 : tp_); ++t) {
      for (int g = 0; g < groups; ++g) {
        std::vector<std::vector<int>> nodes;  // the group's cluster ranks on each of its nodes
        for (int r : expert_group_ranks(s_, st, t, g)) {
          if (nodes.empty() || nodes.back().front() / per_node != r / per_node) nodes.emplace_back();
          nodes.back().push_back(r);
        }
        const std::string name = std::to_string(g) + where + " t" + std::to_string(t);
        if (nodes.front().size() > 1) {
          for (std::size_t n = 0; n < nodes.size(); ++n) {
            flex_group(nodes[n], Peer::EpNode, "ep-node" + name + " n" + std::to_string(n));
          }
        }
        if (nodes.size() > 1) {
          for (std::size_t i = 0; i < nodes.front().size(); ++i) {
            std::vector<int> rail;
            for (const std::vector<int>& on_node : nodes) rail.push_back(on_node[i]);
            flex_group(rail, Peer::EpRail, "ep-rail" + name + " r" + std::to_string(i));
          }
        }
      }
    }
  }
  void flex_group(const std::vector<int>& cluster_ranks, Peer peer, const std::string& name) {
    std::vector<std::int32_t> simulated;
    for (const int r : cluster_ranks) {
      const int t = r % tp_, d = (r / tp_) % dp_all_, st = r / (tp_ * dp_all_);
      if (d < dp_) simulated.push_back(rank_of(st, d, t));  // else folded away
    }
    if (simulated.empty()) return;
    const int g = add_group_of(simulated, cluster_ranks, name, GroupKind::Ep);
    for (std::size_t i = 0; i < simulated.size(); ++i) {
      join(simulated[i], peer, g, static_cast<int>(i));
    }
  }

  void tensor_parallel_group(int st, int d) {
    std::vector<std::int32_t> ranks;
    for (int t = 0; t < tp_; ++t) ranks.push_back(rank_of(st, d, t));
    const int g = add_group(ranks, "tp s" + std::to_string(st) + " d" + std::to_string(d),
                            GroupKind::Tp);
    for (int t = 0; t < tp_; ++t) join(rank_of(st, d, t), Peer::Tp, g, t);
  }

  // For each ordered pair of adjacent stages and each (dp, tp) index, a two-rank group: sender
  // first. Interleaving wraps the last stage around to the first; DualPipe's placements do
  // not wrap, and their second chunk's transfers have two groups of their own per pair.
  void pipeline_groups() {
    const bool returns = s_.second_chunk_returns();
    const bool wrap = s_.parallel.virtual_stages > 1 && !returns;
    for (int st = 0; st < pp_; ++st) {
      const int next = (st + 1) % pp_;
      if (pp_ == 1 || (next == 0 && !wrap)) continue;
      for (int d = 0; d < dp_; ++d) {
        for (int t = 0; t < tp_; ++t) {
          const int a = rank_of(st, d, t), b = rank_of(next, d, t);
          const int fwd = add_group(
              {a, b}, "pp s" + std::to_string(st) + "->s" + std::to_string(next), GroupKind::Pp);
          join(a, Peer::SendNext, fwd, 0);
          join(b, Peer::RecvPrev, fwd, 1);
          const int bwd = add_group(
              {b, a}, "pp s" + std::to_string(next) + "->s" + std::to_string(st), GroupKind::Pp);
          join(b, Peer::SendPrev, bwd, 0);
          join(a, Peer::RecvNext, bwd, 1);
          if (!returns) continue;
          const int back = add_group({b, a}, "pp back s" + std::to_string(next) + "->s" +
                                                 std::to_string(st), GroupKind::Pp);
          join(b, Peer::BackSendPrev, back, 0);
          join(a, Peer::BackRecvNext, back, 1);
          const int back_grads = add_group({a, b}, "pp back s" + std::to_string(st) + "->s" +
                                                       std::to_string(next), GroupKind::Pp);
          join(a, Peer::BackSendNext, back_grads, 0);
          join(b, Peer::BackRecvPrev, back_grads, 1);
        }
      }
    }
  }

  // DualPipe's two copies: stage s and stage pp - 1 - s hold the same layers (each its own
  // copy), and each (dp, tp) index of the one sums its gradients with the other's. DP traffic.
  void mirror_groups() {
    for (int st = 0; st < pp_ / 2; ++st) {
      const int other = pp_ - 1 - st;
      for (int d = 0; d < dp_; ++d) {
        for (int t = 0; t < tp_; ++t) {
          const int a = rank_of(st, d, t), b = rank_of(other, d, t);
          const int g = add_group({a, b},
                                  "mirror s" + std::to_string(st) + "+s" + std::to_string(other) +
                                      " d" + std::to_string(d) + " t" + std::to_string(t),
                                  GroupKind::Dp, {}, false, true);
          join(a, Peer::Mirror, g, 0);
          join(b, Peer::Mirror, g, 1);
        }
      }
    }
  }

  // One collective per (group, instance); its kind and size come from the template of a
  // member's stage (both members of a pipeline group must agree on the count).
  void make_collectives() {
    coll_base_.assign(plan_.num_groups(), 0);
    std::vector<bool> created(plan_.num_groups(), false);
    for (int r = 0; r < plan_.num_ranks; ++r) {
      const Template& t = templates_[r / (tp_ * dp_)];
      for (int peer = 0; peer < kNumPeers; ++peer) {
        const int g = group_of_[r][peer];
        if (g < 0 || created[g]) continue;
        created[g] = true;
        coll_base_[g] = static_cast<std::uint32_t>(plan_.collectives.size());
        for (const auto& [kind, bytes] : t.instances[peer]) {
          Collective c;
          c.kind = kind;
          c.bytes = bytes;
          c.group = g;
          c.member_count = static_cast<std::uint32_t>(plan_.group_size(g));
          c.member_begin = static_cast<std::uint32_t>(plan_.members.size());
          plan_.members.resize(plan_.members.size() + c.member_count, kNoOp);
          plan_.collectives.push_back(c);
        }
      }
    }
    coll_count_.assign(plan_.num_groups(), 0);
    for (const Collective& c : plan_.collectives) ++coll_count_[c.group];
  }

  void copy_ops() {
    std::size_t total = 0;
    for (const Template& t : templates_) total += t.ops.size() * static_cast<std::size_t>(tp_ * dp_);
    plan_.ops.reserve(total);
    for (int r = 0; r < plan_.num_ranks; ++r) {
      const int st = r / (tp_ * dp_);
      out_.stage_of_rank[r] = st;
      const Template& t = templates_[st];
      const OpId base = static_cast<OpId>(plan_.ops.size());
      for (const TemplateOp& top : t.ops) {
        Op op;
        op.kind = top.kind;
        op.stream = top.stream;
        op.phase = top.phase;
        op.category = top.category;
        op.rank = r;
        op.name = top.name;
        op.work = top.work;
        op.bytes = top.bytes;
        op.dep_begin = static_cast<std::uint32_t>(plan_.deps.size());
        op.dep_count = top.dep_count;
        for (std::uint32_t i = 0; i < top.dep_count; ++i) {
          plan_.deps.push_back(base + static_cast<OpId>(t.deps[top.dep_begin + i]));
        }
        if (top.kind == OpKind::Collective) join_collective(r, top, op);
        plan_.ops.push_back(op);
      }
    }
  }

  void join_collective(int r, const TemplateOp& top, Op& op) {
    const int peer = static_cast<int>(top.peer);
    const int g = group_of_[r][peer];
    if (static_cast<std::uint32_t>(top.instance) >= coll_count_[g]) {
      throw std::logic_error("pipeline stages disagree on the transfers of group " +
                             plan_.group_names[g]);
    }
    const std::uint32_t c = coll_base_[g] + static_cast<std::uint32_t>(top.instance);
    op.work = static_cast<std::int32_t>(c);
    plan_.members[plan_.collectives[c].member_begin + position_[r][peer]] =
        static_cast<OpId>(plan_.ops.size());
  }

  const Scenario& s_;
  const std::vector<Template>& templates_;
  const bool fold_;
  TrainingPlan& out_;
  Plan& plan_;
  // ep_: the DP indices one expert-parallel group spans (Scenario::ep_dp_span).
  const int tp_, pp_, dp_, dp_all_, k_, ep_;
  const bool ep_span_tp_;
  const int cp_;
  const int cp_ring_;  // hierarchical CP's p2p degree, else 1
  // Hierarchical CP with both levels wider than one rank (else one Cp group serves either).
  bool two_cp_levels() const { return cp_ring_ > 1 && cp_ring_ < cp_; }
  const bool flex_;  // the flex dispatcher's groups are made (expert_layout.h flex_dispatch)
  std::vector<int> every_dp_, first_shard_, first_replica_;
  std::vector<int> first_expert_group_, first_expert_replica_, first_context_group_,
      first_context_ring_;
  // group_of_[rank][peer]: the group a rank's ops of that peer kind run on; position in it.
  std::vector<std::array<int, kNumPeers>> group_of_, position_;
  std::vector<std::uint32_t> coll_base_, coll_count_;
};

}  // namespace

void instantiate_ranks(const Scenario& s, const std::vector<Template>& templates, bool fold,
                       TrainingPlan& out) {
  Instantiator(s, templates, fold, out).run();
}

}  // namespace plan_detail
}  // namespace zerosim
