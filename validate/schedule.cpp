#include "validate/schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <queue>
#include <sstream>
#include <tuple>

namespace zerosim::validate {
namespace {

std::string describe(const PlanOp& op) {
  std::ostringstream s;
  s << "op " << op.id << " '" << op.name << "'";
  if (op.kind == OpKind::Collective) {
    s << " (" << to_string(op.collective) << ", group " << op.group << ", " << op.bytes << " B)";
  }
  return s.str();
}

// A channel is what collectives are matched on: a whole group, or for send_recv the (group, src,
// dst) pair, so point-to-point transfers do not consume the numbers of uninvolved members.
using Channel = std::tuple<int, int, int>;
Channel channel_of(const PlanOp& op) {
  return op.collective == CollKind::SendRecv ? Channel{op.group, op.src, op.dst}
                                             : Channel{op.group, -1, -1};
}
std::vector<int> channel_members(const ReplayPlan& plan, const Channel& c) {
  auto [g, src, dst] = c;
  if (src >= 0) return {src, dst};
  return plan.groups[g].ranks;
}
std::string channel_name(const ReplayPlan& plan, const Channel& c) {
  auto [g, src, dst] = c;
  std::string n = "group " + plan.groups[g].name;
  if (src >= 0) n += " send_recv " + std::to_string(src) + "->" + std::to_string(dst);
  return n;
}

// Per-rank numbering: coll_seq[op] = k for the k-th collective of the op's channel.
std::vector<int> number_collectives(const RankOps& r, std::map<Channel, int>& per_channel) {
  std::vector<int> seq(r.ops.size(), -1);
  for (const PlanOp& op : r.ops) {
    if (op.kind == OpKind::Collective) seq[op.id] = per_channel[channel_of(op)]++;
  }
  return seq;
}

// Matches every rank's collectives into instances, then plays the plan abstractly (stream order,
// dependencies, every member of a collective arrived) to find the order ops complete in.
class ScheduleBuilder {
 public:
  explicit ScheduleBuilder(const ReplayPlan& plan) : plan_(plan), nr_(plan.num_ranks) {}

  Schedule build() {
    sched_.ranks.resize(nr_);
    number_and_count();
    match_members();
    for (const auto& [c, v] : inst_) sched_.collectives += static_cast<std::int64_t>(v.size());
    play();
    if (remaining_ > 0) throw ScheduleError(stuck_message());
    return std::move(sched_);
  }

 private:
  // Collective instances: per channel, per sequence number, the member ops.
  struct Instance {
    std::vector<int> op;  // per channel member: op id on that rank, -1 until seen
    int reached = 0;
    int first = -1;       // the member whose op was seen first
  };

  int member_index(const Channel& c, int rank) const {
    auto [g, src, dst] = c;
    if (src >= 0) return rank == src ? 0 : 1;
    return plan_.groups[g].position_of(rank);
  }

  // Every member of a channel must hold as many collectives on it.
  void number_and_count() {
    std::map<Channel, std::vector<int>> count;  // per channel, per member
    std::vector<std::map<Channel, int>> per_rank(nr_);
    for (int r = 0; r < nr_; ++r) {
      const RankOps& ro = plan_.ranks[r];
      sched_.ranks[r].rank = ro.rank;
      sched_.ranks[r].coll_seq = number_collectives(ro, per_rank[r]);
      for (const auto& [c, n] : per_rank[r]) count.emplace(c, std::vector<int>{});
    }
    for (auto& [c, counts] : count) {
      const std::vector<int> members = channel_members(plan_, c);
      for (int r : members) {
        auto it = per_rank[r].find(c);
        counts.push_back(it == per_rank[r].end() ? 0 : it->second);
      }
      for (std::size_t i = 1; i < members.size(); ++i) {
        if (counts[i] != counts[0]) {
          throw ScheduleError(channel_name(plan_, c) + ": rank " + std::to_string(members[0]) +
                              " holds " + std::to_string(counts[0]) +
                              " collectives on it but rank " + std::to_string(members[i]) +
                              " holds " + std::to_string(counts[i]));
        }
      }
      inst_[c].assign(counts[0], Instance{std::vector<int>(members.size(), -1), 0, -1});
    }
  }

  // The members of one instance must agree on its kind and size.
  void match_members() {
    for (int r = 0; r < nr_; ++r) {
      for (const PlanOp& op : plan_.ranks[r].ops) {
        if (op.kind != OpKind::Collective) continue;
        const Channel c = channel_of(op);
        const int seq = sched_.ranks[r].coll_seq[op.id];
        Instance& in = inst_[c][seq];
        const int mi = member_index(c, r);
        in.op[mi] = op.id;
        if (in.first < 0) {
          in.first = mi;
          continue;
        }
        const int first_rank = channel_members(plan_, c)[in.first];
        const PlanOp& first = plan_.ranks[first_rank].ops[in.op[in.first]];
        if (first.collective != op.collective || first.bytes != op.bytes) {
          throw ScheduleError(channel_name(plan_, c) + ", collective #" + std::to_string(seq) +
                              ": rank " + std::to_string(first_rank) + " has " + describe(first) +
                              " but rank " + std::to_string(r) + " has " + describe(op) +
                              "; members must agree on kind and bytes");
        }
      }
    }
  }

  void prepare_play() {
    streams_.assign(nr_, std::vector<std::vector<int>>(kNumStreams));
    head_.assign(nr_, std::vector<std::size_t>(kNumStreams, 0));
    pending_.assign(nr_, {});
    dependents_.assign(nr_, {});
    done_.assign(nr_, {});
    reached_.assign(nr_, {});
    for (int r = 0; r < nr_; ++r) {
      const auto& ops = plan_.ranks[r].ops;
      pending_[r].assign(ops.size(), 0);
      dependents_[r].assign(ops.size(), {});
      done_[r].assign(ops.size(), 0);
      reached_[r].assign(ops.size(), 0);
      for (const PlanOp& op : ops) {
        streams_[r][static_cast<int>(op.stream)].push_back(op.id);
        std::vector<int> deps = op.deps;
        std::sort(deps.begin(), deps.end());
        deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
        pending_[r][op.id] = static_cast<int>(deps.size());
        for (int d : deps) dependents_[r][d].push_back(op.id);
      }
      remaining_ += static_cast<std::int64_t>(ops.size());
      for (int s = 0; s < kNumStreams; ++s) work_.emplace_back(r, s);
    }
  }

  void complete(int r, int id) {
    done_[r][id] = 1;
    --remaining_;
    sched_.ranks[r].order.push_back(id);
    const int s = static_cast<int>(plan_.ranks[r].ops[id].stream);
    ++head_[r][s];
    work_.emplace_back(r, s);
    for (int dep : dependents_[r][id]) {
      if (--pending_[r][dep] == 0) {
        work_.emplace_back(r, static_cast<int>(plan_.ranks[r].ops[dep].stream));
      }
    }
  }

  // Abstract play: stream heads, dependency counters, collective arrival counters.
  void play() {
    prepare_play();
    while (!work_.empty()) {
      auto [r, s] = work_.front();
      work_.pop_front();
      while (head_[r][s] < streams_[r][s].size()) {
        const int id = streams_[r][s][head_[r][s]];
        if (pending_[r][id] > 0 || reached_[r][id]) break;
        const PlanOp& op = plan_.ranks[r].ops[id];
        if (op.kind != OpKind::Collective) {
          complete(r, id);
          continue;
        }
        reached_[r][id] = 1;
        const Channel c = channel_of(op);
        Instance& in = inst_[c][sched_.ranks[r].coll_seq[id]];
        if (++in.reached < static_cast<int>(in.op.size())) break;
        const std::vector<int> members = channel_members(plan_, c);
        for (std::size_t p = 0; p < in.op.size(); ++p) complete(members[p], in.op[p]);
        // complete() advanced this stream's head and queued it again; keep going from there.
      }
    }
  }

  // What each stuck stream waits for (at most 16 lines).
  std::string stuck_message() const {
    std::ostringstream msg;
    msg << "the plan cannot finish under the simulator's rules (stream order, deps, collectives "
           "matched by their order in the group): "
        << remaining_ << " ops never run. Stuck streams:";
    int lines = 0;
    for (int r = 0; r < nr_ && lines < 16; ++r) {
      for (int s = 0; s < kNumStreams && lines < 16; ++s) {
        if (head_[r][s] >= streams_[r][s].size()) continue;
        const PlanOp& op = plan_.ranks[r].ops[streams_[r][s][head_[r][s]]];
        msg << "\n  rank " << r << " stream " << to_string(static_cast<StreamId>(s)) << " at "
            << describe(op);
        if (pending_[r][op.id] > 0) {
          msg << ", waiting for deps";
          for (int d : op.deps) {
            if (!done_[r][d]) msg << " " << d;
          }
        } else if (reached_[r][op.id]) {
          const Channel c = channel_of(op);
          const Instance& in = inst_.at(c)[sched_.ranks[r].coll_seq[op.id]];
          const std::vector<int> members = channel_members(plan_, c);
          msg << " (collective #" << sched_.ranks[r].coll_seq[op.id] << " of "
              << channel_name(plan_, c) << "), waiting for ranks";
          for (std::size_t p = 0; p < in.op.size(); ++p) {
            if (!reached_[members[p]][in.op[p]]) msg << " " << members[p];
          }
        }
        ++lines;
      }
    }
    return msg.str();
  }

  const ReplayPlan& plan_;
  const int nr_;
  Schedule sched_;
  std::map<Channel, std::vector<Instance>> inst_;
  std::vector<std::vector<std::vector<int>>> streams_;
  std::vector<std::vector<std::size_t>> head_;
  std::vector<std::vector<int>> pending_;
  std::vector<std::vector<std::vector<int>>> dependents_;
  std::vector<std::vector<char>> done_, reached_;
  std::deque<std::pair<int, int>> work_;  // (rank, stream) to look at
  std::int64_t remaining_ = 0;
};

}  // namespace

const RankSchedule* Schedule::find_rank(int rank) const {
  for (const RankSchedule& r : ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

Schedule build_schedule(const ReplayPlan& plan) {
  if (!plan.has_all_ranks()) {
    throw ScheduleError("the plan holds " + std::to_string(plan.ranks.size()) + " of its " +
                        std::to_string(plan.num_ranks) +
                        " ranks; export every rank (zerosim plan without --rank) to replay it");
  }
  return ScheduleBuilder(plan).build();
}

Schedule build_local_schedule(const ReplayPlan& plan) {
  Schedule sched;
  for (const RankOps& ro : plan.ranks) {
    RankSchedule rs;
    rs.rank = ro.rank;
    std::map<Channel, int> per_channel;
    rs.coll_seq = number_collectives(ro, per_channel);
    // Kahn over stream-order edges plus explicit deps; ready ops by (predicted start, id).
    const std::size_t n = ro.ops.size();
    std::vector<int> pending(n, 0);
    std::vector<std::vector<int>> next(n);
    std::vector<int> last_on_stream(kNumStreams, -1);
    for (const PlanOp& op : ro.ops) {
      int& last = last_on_stream[static_cast<int>(op.stream)];
      if (last >= 0) {
        next[last].push_back(op.id);
        ++pending[op.id];
      }
      last = op.id;
      for (int d : op.deps) {
        next[d].push_back(op.id);
        ++pending[op.id];
      }
    }
    using Key = std::tuple<double, int>;
    std::priority_queue<Key, std::vector<Key>, std::greater<>> ready;
    for (const PlanOp& op : ro.ops) {
      if (pending[op.id] == 0) ready.emplace(op.predicted_start_s, op.id);
    }
    while (!ready.empty()) {
      const int id = std::get<1>(ready.top());
      ready.pop();
      rs.order.push_back(id);
      for (int x : next[id]) {
        if (--pending[x] == 0) ready.emplace(ro.ops[x].predicted_start_s, x);
      }
    }
    if (rs.order.size() != n) {
      throw ScheduleError("rank " + std::to_string(ro.rank) + ": the ops' deps and stream order form a cycle; " +
                          std::to_string(n - rs.order.size()) + " ops can never run");
    }
    for (const PlanOp& op : ro.ops) {
      if (op.kind == OpKind::Collective) ++sched.collectives;
    }
    sched.ranks.push_back(std::move(rs));
  }
  return sched;
}

}  // namespace zerosim::validate
