#include "sim/core/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <queue>
#include <stdexcept>
#include <string>

#include "sim/core/error.h"

// ZEROSIM_CHECK_INVARIANTS (CMake option, ON by default in Debug builds and in the sanitizer and
// fuzz presets) makes the engine check, while it plays, the rules of engine.h that the plan
// builders and backends rely on: time never goes backwards, no op starts before its dependencies
// and its stream predecessor have ended, every op ends once, collective members hold equal
// buffers. A violation is a bug in a builder or a backend, so it throws std::logic_error naming
// the op. tests/invariants checks the same rules after the fact on random scenarios; these
// catch them in every simulation of a checking build (the whole suite, the fuzzers).
#if defined(ZEROSIM_CHECK_INVARIANTS) && ZEROSIM_CHECK_INVARIANTS
#define ZEROSIM_ENGINE_CHECKS 1
#else
#define ZEROSIM_ENGINE_CHECKS 0
#endif

namespace zerosim {

std::string sim_time_limit_text() {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3g s = 2^62 ps, %.0f days",
                ps_to_seconds(kMaxSimTime), ps_to_seconds(kMaxSimTime) / 86400);
  return std::string("the longest the engine's integer-picosecond clock holds: ") + buf;
}

namespace {

std::string duration_overflow_text(double seconds) {
  if (std::isnan(seconds)) {
    return "a simulated duration came out as not-a-number (infinite rates or latencies "
           "cancelling); is a bandwidth, a peak rate or an efficiency near zero, or a latency "
           "that large?";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", seconds);
  return std::string("a simulated duration of ") + buf + " s is too long (" +
         sim_time_limit_text() +
         "); is a bandwidth, a peak rate or an efficiency near zero, or a latency that large?";
}

}  // namespace

void throw_duration_overflow(double seconds) {
  // The key path is the cluster's because its rates and latencies are what durations are made
  // of; the engine rethrows with the op when the duration is computed while it plays.
  throw DurationOverflow("cluster", duration_overflow_text(seconds), seconds);
}

const char* stream_name(Stream s) {
  switch (s) {
    case Stream::Compute: return "compute";
    case Stream::DpComm: return "dp-comm";
    case Stream::TpComm: return "tp-comm";
    case Stream::PpComm: return "pp-send";
    case Stream::PpRecv: return "pp-recv";
    case Stream::H2D: return "h2d";
    case Stream::D2H: return "d2h";
    case Stream::Cpu: return "cpu";
    case Stream::CpComm: return "cp-comm";
    case Stream::EpComm: return "ep-comm";
    case Stream::PpBackSend: return "pp-back-send";
    case Stream::PpBackRecv: return "pp-back-recv";
    case Stream::EpForward: return "ep-forward";
  }
  return "?";
}

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::SendRecv: return "send_recv";
  }
  return "?";
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
    case Phase::Communication: return "communication";
    case Phase::Other: return "other";
  }
  return "?";
}

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Params: return "params";
    case MemCategory::Grads: return "grads";
    case MemCategory::OptimizerStates: return "optimizer_states";
    case MemCategory::Activations: return "activations";
    case MemCategory::Buffers: return "buffers";
  }
  return "?";
}

namespace {

struct Event {
  SimTime time;
  std::uint64_t seq;
  OpId op;
  bool operator>(const Event& o) const {
    return time != o.time ? time > o.time : seq > o.seq;
  }
};

// splitmix64 finaliser: a cheap, well-mixed fold for the fingerprint.
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  std::uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Runner {
 public:
  Runner(const Plan& plan, ComputeModel& compute, CommBackend& comm)
      : plan_(plan), compute_(compute), comm_(comm) {}

  EngineResult run() {
    build_graph();
    const std::size_t n = plan_.ops.size();
    result_.start.assign(n, -1);
    result_.end.assign(n, -1);
    result_.order.reserve(n);
    arrived_.assign(plan_.collectives.size(), 0);
    comm_in_flight_.assign(static_cast<std::size_t>(plan_.num_ranks), 0);
    slowdown_ = compute_.comm_slowdown();
    for (OpId op = 0; op < n; ++op) {
      if (remaining_[op] == 0) release(op, 0);
    }
    std::vector<std::uint32_t> done;
    while (true) {
      SimTime t_heap = heap_.empty() ? kNever : heap_.top().time;
      SimTime t_comm = comm_.next_completion();
      if (t_heap == kNever && t_comm == kNever) break;
      // Every duration is at most kMaxSimTime and so is every time played so far, so the event
      // times here did not overflow; going on past kMaxSimTime could.
      if (std::min(t_heap, t_comm) > kMaxSimTime) report_step_too_long(t_heap, t_comm);
#if ZEROSIM_ENGINE_CHECKS
      const SimTime t = std::min(t_heap, t_comm);
      if (t < now_) {
        throw std::logic_error("engine invariant: simulated time went backwards from " +
                               std::to_string(now_) + " ps to " + std::to_string(t) + " ps (" +
                               (t_heap <= t_comm ? "a compute/copy/memory op" : "the CommBackend") +
                               ")");
      }
      now_ = t;
#endif
      if (t_heap <= t_comm) {
        Event e = heap_.top();
        heap_.pop();
        finish(e.op, e.time);
      } else {
        done.clear();
        comm_.pop_completed(t_comm, done);
        for (std::uint32_t c : done) {
          const Collective& coll = plan_.collectives[c];
          for (std::uint32_t i = 0; i < coll.member_count; ++i) {
            finish(plan_.members[coll.member_begin + i], t_comm);
          }
        }
      }
    }
    if (result_.order.size() != n) report_deadlock();
    return std::move(result_);
  }

 private:
  std::string describe(OpId op) const {
    const Op& o = plan_.ops[op];
    return "op " + std::to_string(op) + " '" + plan_.names[o.name] + "' on rank " +
           std::to_string(o.rank) + " stream " + stream_name(o.stream);
  }

  std::string describe_collective(std::uint32_t c) const {
    const Collective& coll = plan_.collectives[c];
    std::string group = std::to_string(coll.group);
    if (coll.group >= 0 && coll.group < plan_.num_groups()) {
      group = "'" + plan_.group_names[coll.group] + "'";
    }
    std::string text = std::string(collective_name(coll.kind)) + " of " +
                       std::to_string(coll.bytes) + " bytes on group " + group;
    if (coll.member_count > 0) text += " (" + describe(plan_.members[coll.member_begin]) + ")";
    return text;
  }

  // The step's simulated time would pass kMaxSimTime: each duration fits, their sum does not.
  [[noreturn]] void report_step_too_long(SimTime t_heap, SimTime t_comm) {
    std::string what;
    if (t_heap <= t_comm) {
      what = describe(heap_.top().op);
    } else {
      std::vector<std::uint32_t> done;
      comm_.pop_completed(t_comm, done);
      what = done.empty() ? std::string("a collective") : describe_collective(done.front());
    }
    throw InputError("cluster", "the simulated step is too long (" + sim_time_limit_text() +
                                    "): it passes that time at " + what +
                                    "; is a bandwidth, a peak rate or an efficiency near zero, "
                                    "or a latency that large?");
  }

  void build_graph() {
    const std::size_t n = plan_.ops.size();
    remaining_.assign(n, 0);
    next_on_stream_.assign(n, kNoOp);
#if ZEROSIM_ENGINE_CHECKS
    prev_on_stream_.assign(n, kNoOp);
#endif
    std::vector<OpId> last(static_cast<std::size_t>(plan_.num_ranks) * kNumStreams, kNoOp);
    std::vector<std::uint32_t> fanout(n + 1, 0);
    for (OpId op = 0; op < n; ++op) {
      const Op& o = plan_.ops[op];
      if (o.rank < 0 || o.rank >= plan_.num_ranks) throw std::logic_error("op rank out of range");
      OpId& prev = last[static_cast<std::size_t>(o.rank) * kNumStreams + static_cast<int>(o.stream)];
      if (prev != kNoOp) {
        next_on_stream_[prev] = op;
        ++remaining_[op];
#if ZEROSIM_ENGINE_CHECKS
        prev_on_stream_[op] = prev;
#endif
      }
      prev = op;
      remaining_[op] += o.dep_count;
      for (std::uint32_t i = 0; i < o.dep_count; ++i) {
        OpId d = plan_.deps[o.dep_begin + i];
        if (d >= n) throw std::logic_error("dependency on a missing op");
        ++fanout[d + 1];
      }
    }
    for (std::size_t i = 1; i <= n; ++i) fanout[i] += fanout[i - 1];
    dependents_begin_ = fanout;
    dependents_.assign(fanout[n], 0);
    for (OpId op = 0; op < n; ++op) {
      const Op& o = plan_.ops[op];
      for (std::uint32_t i = 0; i < o.dep_count; ++i) {
        OpId d = plan_.deps[o.dep_begin + i];
        dependents_[fanout[d]++] = op;
      }
    }
  }

  void release(OpId op, SimTime now) {
    const Op& o = plan_.ops[op];
#if ZEROSIM_ENGINE_CHECKS
    check_ready(op, now);
#endif
    result_.start[op] = now;
    switch (o.kind) {
      case OpKind::Compute:
      case OpKind::Copy: {
        SimTime d = compute_.duration(plan_, op);
        if (d < 0) {
          throw std::logic_error("engine: the ComputeModel gave " + describe(op) +
                                 " a negative duration (" + std::to_string(d) + " ps)");
        }
        // Checked before and after the slowdown: d <= kMaxSimTime keeps d x (1 + slowdown)
        // within int64 for any slowdown below 1, and `now + d` within int64 below.
        if (d > kMaxSimTime) report_duration(op, d);
        // Only GPU kernels share SMs and HBM with NCCL; the host's optimizer step does not.
        if (o.kind == OpKind::Compute && o.stream != Stream::Cpu && slowdown_ > 0 &&
            comm_in_flight_[o.rank] > 0) {
          d += static_cast<SimTime>(static_cast<double>(d) * slowdown_);
          if (d > kMaxSimTime) report_duration(op, d);
        }
        heap_.push({now + d, seq_++, op});
        break;
      }
      case OpKind::Alloc:
      case OpKind::Free:
        heap_.push({now, seq_++, op});
        break;
      case OpKind::Collective: {
        auto c = static_cast<std::uint32_t>(o.work);
        if (++arrived_[c] == plan_.collectives[c].member_count) {
          // The collective starts when its last member arrives; earlier members waited for it.
          const Collective& coll = plan_.collectives[c];
          for (std::uint32_t i = 0; i < coll.member_count; ++i) {
            const OpId m = plan_.members[coll.member_begin + i];
#if ZEROSIM_ENGINE_CHECKS
            // Every member's buffer is the collective's: what one member sends, its peers
            // receive (tests/invariants derives the per-position bytes from this).
            if (plan_.ops[m].bytes != coll.bytes) {
              throw std::logic_error("engine invariant: " + describe(m) + " holds " +
                                     std::to_string(plan_.ops[m].bytes) + " bytes of " +
                                     describe_collective(c));
            }
#endif
            result_.start[m] = now;
            if (plan_.ops[m].stream != Stream::Compute) ++comm_in_flight_[plan_.ops[m].rank];
          }
          try {
            comm_.start(plan_, c, now);
          } catch (const DurationOverflow& e) {
            throw DurationOverflow(e.key_path(),
                                   describe_collective(c) + ": " +
                                       duration_overflow_text(e.seconds()),
                                   e.seconds());
          }
        }
        break;
      }
    }
  }

  void finish(OpId op, SimTime now) {
    const Op& o = plan_.ops[op];
#if ZEROSIM_ENGINE_CHECKS
    if (result_.end[op] >= 0) {
      throw std::logic_error("engine invariant: " + describe(op) + " ended twice");
    }
    if (result_.start[op] < 0 || now < result_.start[op]) {
      throw std::logic_error("engine invariant: " + describe(op) + " ends at " +
                             std::to_string(now) + " ps, before it started (" +
                             std::to_string(result_.start[op]) + " ps)");
    }
#endif
    if (o.kind == OpKind::Collective && o.stream != Stream::Compute) --comm_in_flight_[o.rank];
    result_.end[op] = now;
    result_.order.push_back(op);
    result_.makespan = std::max(result_.makespan, now);
    ++result_.events;
    std::uint64_t h = mix(result_.fingerprint, static_cast<std::uint64_t>(now));
    h = mix(h, (static_cast<std::uint64_t>(o.kind) << 32) | static_cast<std::uint32_t>(o.rank));
    h = mix(h, op);
    result_.fingerprint = mix(h, static_cast<std::uint64_t>(o.bytes));
    for (std::uint32_t i = dependents_begin_[op]; i < dependents_begin_[op + 1]; ++i) {
      OpId d = dependents_[i];
      if (--remaining_[d] == 0) release(d, now);
    }
    OpId next = next_on_stream_[op];
    if (next != kNoOp && --remaining_[next] == 0) release(next, now);
  }

  [[noreturn]] void report_duration(OpId op, SimTime d) {
    const double seconds = ps_to_seconds(d);
    throw DurationOverflow("cluster", describe(op) + ": " + duration_overflow_text(seconds),
                           seconds);
  }

#if ZEROSIM_ENGINE_CHECKS
  // Released at `now`: every explicit dependency and the stream predecessor have ended by then.
  void check_ready(OpId op, SimTime now) const {
    const Op& o = plan_.ops[op];
    auto check = [&](OpId before, const char* what) {
      const SimTime end = result_.end[before];
      if (end < 0 || end > now) {
        throw std::logic_error("engine invariant: " + describe(op) + " starts at " +
                               std::to_string(now) + " ps before its " + what + " " +
                               describe(before) +
                               (end < 0 ? " has ended" : " ends at " + std::to_string(end) + " ps"));
      }
    };
    for (std::uint32_t i = 0; i < o.dep_count; ++i) check(plan_.deps[o.dep_begin + i], "dependency");
    if (prev_on_stream_[op] != kNoOp) check(prev_on_stream_[op], "stream predecessor");
  }
#endif

  [[noreturn]] void report_deadlock() {
    for (OpId op = 0; op < plan_.ops.size(); ++op) {
      if (result_.end[op] < 0) {
        const Op& o = plan_.ops[op];
        throw std::logic_error("plan deadlock: op " + std::to_string(op) + " '" +
                               plan_.names[o.name] + "' on rank " + std::to_string(o.rank) +
                               " stream " + stream_name(o.stream) + " never finished");
      }
    }
    throw std::logic_error("plan deadlock");
  }

  const Plan& plan_;
  ComputeModel& compute_;
  CommBackend& comm_;
  EngineResult result_;
  std::vector<std::uint32_t> remaining_;
  std::vector<OpId> next_on_stream_;
#if ZEROSIM_ENGINE_CHECKS
  std::vector<OpId> prev_on_stream_;
  SimTime now_ = 0;  // time of the last event played
#endif
  std::vector<std::uint32_t> dependents_begin_;
  std::vector<OpId> dependents_;
  std::vector<std::uint32_t> arrived_;
  std::vector<std::int32_t> comm_in_flight_;  // per rank, collectives running off the compute stream
  double slowdown_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap_;
  std::uint64_t seq_ = 0;
};

}  // namespace

EngineResult run_engine(const Plan& plan, ComputeModel& compute, CommBackend& comm) {
  return Runner(plan, compute, comm).run();
}

}  // namespace zerosim
