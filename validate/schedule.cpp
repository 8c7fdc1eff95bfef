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
  const int nr = plan.num_ranks;
  Schedule sched;
  sched.ranks.resize(nr);

  // Collective instances: per channel, per sequence number, the member ops.
  struct Instance {
    std::vector<int> op;  // per channel member: op id on that rank, -1 until seen
    int reached = 0;
    int first = -1;       // the member whose op was seen first
  };
  std::map<Channel, std::vector<Instance>> inst;
  std::map<Channel, std::vector<int>> count;  // per channel, per member
  std::vector<std::map<Channel, int>> per_rank(nr);
  for (int r = 0; r < nr; ++r) {
    const RankOps& ro = plan.ranks[r];
    sched.ranks[r].rank = ro.rank;
    sched.ranks[r].coll_seq = number_collectives(ro, per_rank[r]);
    for (const auto& [c, n] : per_rank[r]) count.emplace(c, std::vector<int>{});
  }
  for (auto& [c, counts] : count) {
    const std::vector<int> members = channel_members(plan, c);
    for (int r : members) {
      auto it = per_rank[r].find(c);
      counts.push_back(it == per_rank[r].end() ? 0 : it->second);
    }
    for (std::size_t i = 1; i < members.size(); ++i) {
      if (counts[i] != counts[0]) {
        throw ScheduleError(channel_name(plan, c) + ": rank " + std::to_string(members[0]) +
                            " holds " + std::to_string(counts[0]) + " collectives on it but rank " +
                            std::to_string(members[i]) + " holds " + std::to_string(counts[i]));
      }
    }
    inst[c].assign(counts[0], Instance{std::vector<int>(members.size(), -1), 0, -1});
  }
  auto member_index = [&](const Channel& c, int rank) {
    auto [g, src, dst] = c;
    if (src >= 0) return rank == src ? 0 : 1;
    return plan.groups[g].position_of(rank);
  };
  for (int r = 0; r < nr; ++r) {
    for (const PlanOp& op : plan.ranks[r].ops) {
      if (op.kind != OpKind::Collective) continue;
      const Channel c = channel_of(op);
      const int seq = sched.ranks[r].coll_seq[op.id];
      Instance& in = inst[c][seq];
      const int mi = member_index(c, r);
      in.op[mi] = op.id;
      if (in.first < 0) {
        in.first = mi;
        continue;
      }
      const int first_rank = channel_members(plan, c)[in.first];
      const PlanOp& first = plan.ranks[first_rank].ops[in.op[in.first]];
      if (first.collective != op.collective || first.bytes != op.bytes) {
        throw ScheduleError(channel_name(plan, c) + ", collective #" + std::to_string(seq) +
                            ": rank " + std::to_string(first_rank) + " has " + describe(first) +
                            " but rank " + std::to_string(r) + " has " + describe(op) +
                            "; members must agree on kind and bytes");
      }
    }
  }
  for (const auto& [c, v] : inst) sched.collectives += static_cast<std::int64_t>(v.size());

  // Abstract play: stream heads, dependency counters, collective arrival counters.
  std::vector<std::vector<std::vector<int>>> streams(nr, std::vector<std::vector<int>>(kNumStreams));
  std::vector<std::vector<std::size_t>> head(nr, std::vector<std::size_t>(kNumStreams, 0));
  std::vector<std::vector<int>> pending(nr);
  std::vector<std::vector<std::vector<int>>> dependents(nr);
  std::vector<std::vector<char>> done(nr), reached(nr);
  for (int r = 0; r < nr; ++r) {
    const auto& ops = plan.ranks[r].ops;
    pending[r].assign(ops.size(), 0);
    dependents[r].assign(ops.size(), {});
    done[r].assign(ops.size(), 0);
    reached[r].assign(ops.size(), 0);
    for (const PlanOp& op : ops) {
      streams[r][static_cast<int>(op.stream)].push_back(op.id);
      std::vector<int> deps = op.deps;
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      pending[r][op.id] = static_cast<int>(deps.size());
      for (int d : deps) dependents[r][d].push_back(op.id);
    }
  }
  std::deque<std::pair<int, int>> work;  // (rank, stream) to look at
  for (int r = 0; r < nr; ++r) {
    for (int s = 0; s < kNumStreams; ++s) work.emplace_back(r, s);
  }
  std::int64_t remaining = 0;
  for (const RankOps& ro : plan.ranks) remaining += static_cast<std::int64_t>(ro.ops.size());

  auto complete = [&](int r, int id) {
    done[r][id] = 1;
    --remaining;
    sched.ranks[r].order.push_back(id);
    const int s = static_cast<int>(plan.ranks[r].ops[id].stream);
    ++head[r][s];
    work.emplace_back(r, s);
    for (int dep : dependents[r][id]) {
      if (--pending[r][dep] == 0) work.emplace_back(r, static_cast<int>(plan.ranks[r].ops[dep].stream));
    }
  };

  while (!work.empty()) {
    auto [r, s] = work.front();
    work.pop_front();
    while (head[r][s] < streams[r][s].size()) {
      const int id = streams[r][s][head[r][s]];
      if (pending[r][id] > 0 || reached[r][id]) break;
      const PlanOp& op = plan.ranks[r].ops[id];
      if (op.kind != OpKind::Collective) {
        complete(r, id);
        continue;
      }
      reached[r][id] = 1;
      const Channel c = channel_of(op);
      Instance& in = inst[c][sched.ranks[r].coll_seq[id]];
      if (++in.reached < static_cast<int>(in.op.size())) break;
      const std::vector<int> members = channel_members(plan, c);
      for (std::size_t p = 0; p < in.op.size(); ++p) complete(members[p], in.op[p]);
      // complete() advanced this stream's head and queued it again; keep going from there.
    }
  }

  if (remaining > 0) {
    std::ostringstream msg;
    msg << "the plan cannot finish under the simulator's rules (stream order, deps, collectives "
           "matched by their order in the group): "
        << remaining << " ops never run. Stuck streams:";
    int lines = 0;
    for (int r = 0; r < nr && lines < 16; ++r) {
      for (int s = 0; s < kNumStreams && lines < 16; ++s) {
        if (head[r][s] >= streams[r][s].size()) continue;
        const PlanOp& op = plan.ranks[r].ops[streams[r][s][head[r][s]]];
        msg << "\n  rank " << r << " stream " << to_string(static_cast<StreamId>(s)) << " at "
            << describe(op);
        if (pending[r][op.id] > 0) {
          msg << ", waiting for deps";
          for (int d : op.deps) {
            if (!done[r][d]) msg << " " << d;
          }
        } else if (reached[r][op.id]) {
          const Channel c = channel_of(op);
          const Instance& in = inst[c][sched.ranks[r].coll_seq[op.id]];
          const std::vector<int> members = channel_members(plan, c);
          msg << " (collective #" << sched.ranks[r].coll_seq[op.id] << " of "
              << channel_name(plan, c) << "), waiting for ranks";
          for (std::size_t p = 0; p < in.op.size(); ++p) {
            if (!reached[members[p]][in.op[p]]) msg << " " << members[p];
          }
        }
        ++lines;
      }
    }
    throw ScheduleError(msg.str());
  }
  return sched;
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
