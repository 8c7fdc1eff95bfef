// Where a rank's step time went (breakdown_of_rank) and what it sent (bytes_of_rank0), read
// from the engine's start and end times of every op.
#include <algorithm>
#include <map>

#include "sim/run/simulate.h"

namespace zerosim {
namespace {

// The op whose end released `op` (the latest-ending explicit dependency), looking through the
// zero-duration alloc/free ops to what released them.
OpId releaser(const Plan& plan, const EngineResult& r, OpId op) {
  for (int depth = 0; depth < 8; ++depth) {
    const Op& o = plan.ops[op];
    OpId best = kNoOp;
    for (std::uint32_t i = 0; i < o.dep_count; ++i) {
      OpId d = plan.deps[o.dep_begin + i];
      if (best == kNoOp || r.end[d] > r.end[best]) best = d;
    }
    if (best == kNoOp || r.end[best] < r.start[op]) return kNoOp;
    const OpKind k = plan.ops[best].kind;
    if (k != OpKind::Alloc && k != OpKind::Free) return best;
    op = best;
  }
  return kNoOp;
}

// Members per NVLink domain and whether the ranks span more than one.
void domain_placement(const ClusterSpec& c, const std::int32_t* ranks, int n, int& per_domain,
                      bool& leaves) {
  const int domain = std::max(1, std::min(c.nvlink_domain_gpus, c.num_gpus()));
  std::map<int, int> count;
  for (int i = 0; i < n; ++i) ++count[ranks[i] / domain];
  per_domain = 0;
  for (const auto& [d, k] : count) per_domain = std::max(per_domain, k);
  leaves = count.size() > 1;
}

}  // namespace

Rank0Bytes bytes_of_rank0(const ClusterSpec& cluster, const TrainingPlan& tp) {
  const Plan& plan = tp.plan;
  Rank0Bytes out;
  for (OpId id = 0; id < plan.ops.size() && plan.ops[id].rank == 0; ++id) {
    const Op& op = plan.ops[id];
    if (op.kind != OpKind::Collective) continue;
    const Collective& c = plan.collectives[op.work];
    // A pipeline transfer is sent by its first member only.
    if (c.kind == CollectiveKind::SendRecv && plan.members[c.member_begin] != id) continue;
    const int n = plan.cost_size(c.group);
    const int kind = static_cast<int>(tp.group_kind[c.group]);
    const double sent = ring_bytes_sent(c.kind, n, c.bytes);
    out.sent[kind] += sent;
    // A ring over n ranks, k of them per NVLink domain, leaves the domain on n/k of its n edges,
    // so 1/k of what a rank sends goes through the NICs; a send/recv between two domains sends it
    // all. The domain is a node except on rack-scale NVLink (GB200 NVL72: 72 GPUs, 18 trays).
    int per_domain = 0;
    bool leaves = false;
    domain_placement(cluster, plan.cost_members(c.group), n, per_domain, leaves);
    // An all-to-all sends each other rank its share: those outside the domain get
    // (n - k) / (n - 1) of what it sends.
    if (leaves) {
      out.internode[kind] +=
          c.kind == CollectiveKind::SendRecv ? sent
          : c.kind == CollectiveKind::AllToAll
              ? sent * static_cast<double>(n - per_domain) / static_cast<double>(n - 1)
              : sent / per_domain;
    }
  }
  return out;
}

std::array<BreakdownPart, 12> breakdown_parts(const StepBreakdown& b) {
  return {{{"forward", b.forward_s},
           {"backward", b.backward_s},
           {"exposed_dp", b.exposed_by_group[0]},
           {"exposed_tp", b.exposed_by_group[1]},
           {"exposed_pp", b.exposed_by_group[2]},
           {"exposed_ep", b.exposed_by_group[3]},
           {"exposed_cp", b.exposed_by_group[4]},
           {"bubble", b.bubble_s},
           {"optimizer", b.optimizer_s},
           {"offload", b.offload_s},
           {"comm_overhead", b.comm_overhead_s},
           {"other", b.other_s}}};
}

StepBreakdown breakdown_of_rank(const TrainingPlan& tp, const EngineResult& r, int rank) {
  const Plan& plan = tp.plan;
  StepBreakdown b;
  SimTime busy_until = 0;
  SimTime last_end = 0;
  auto charge_comm = [&](OpId c_op, double seconds, bool waited) {
    const Collective& c = plan.collectives[plan.ops[c_op].work];
    const int kind = static_cast<int>(tp.group_kind[c.group]);
    if (kind == static_cast<int>(GroupKind::Pp) && waited) {
      const double transfer = ps_to_seconds(r.end[c_op] - r.start[c_op]);
      const double exposed = std::min(seconds, transfer);
      b.exposed_by_group[kind] += exposed;
      b.bubble_s += seconds - exposed;
    } else {
      b.exposed_by_group[kind] += seconds;
    }
  };
  SimTime host_end = 0;  // when the rank's last host work (copy, CPU step) ends
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.rank != rank) continue;
    if (op.kind == OpKind::Copy || op.stream == Stream::Cpu) host_end = std::max(host_end, r.end[id]);
    if (op.stream == Stream::Cpu && op.kind == OpKind::Compute) {
      b.cpu_step_s += ps_to_seconds(r.end[id] - r.start[id]);
    }
    if (op.stream != Stream::Compute) continue;
    const SimTime gap = r.start[id] - busy_until;
    if (gap > 0) {
      OpId why = releaser(plan, r, id);
      if (why != kNoOp && plan.ops[why].kind == OpKind::Collective) {
        charge_comm(why, ps_to_seconds(gap), true);
      } else if (why != kNoOp && (plan.ops[why].kind == OpKind::Copy ||
                                  plan.ops[why].stream == Stream::Cpu)) {
        b.offload_s += ps_to_seconds(gap);
      } else if (why != kNoOp && plan.ops[why].phase == Phase::Communication) {
        b.comm_overhead_s += ps_to_seconds(gap);  // e.g. ZeRO++'s dequantization on its stream
      } else {
        b.other_s += ps_to_seconds(gap);
      }
    }
    const double d = ps_to_seconds(r.end[id] - r.start[id]);
    if (op.kind == OpKind::Compute) {
      if (op.phase == Phase::Forward) b.forward_s += d;
      if (op.phase == Phase::Backward) b.backward_s += d;
      if (op.phase == Phase::Optimizer) b.optimizer_s += d;
      if (op.phase == Phase::Communication) b.comm_overhead_s += d;
      if (op.phase == Phase::Other) b.other_s += d;
    } else if (op.kind == OpKind::Collective) {
      charge_comm(id, d, false);
    } else if (op.kind == OpKind::Copy) {
      b.offload_s += d;  // a PCIe copy queued on the compute stream blocks it
    }
    busy_until = std::max(busy_until, r.end[id]);
    last_end = std::max(last_end, r.end[id]);
  }
  // After its last compute-stream op a rank waits for the slowest one (pipeline drain with PP)
  // or for its own host work still running (offload: the CPU step, copies).
  host_end = std::max(host_end, last_end);
  const double host_tail = ps_to_seconds(host_end - last_end);
  b.offload_s += host_tail;
  const double tail = ps_to_seconds(r.makespan - host_end);
  if (tp.stages.size() > 1) b.bubble_s += tail; else b.other_s += tail;
  b.exposed_comm_s = b.exposed_by_group[0] + b.exposed_by_group[1] + b.exposed_by_group[2] +
                     b.exposed_by_group[3] + b.exposed_by_group[4];
  return b;
}

}  // namespace zerosim
