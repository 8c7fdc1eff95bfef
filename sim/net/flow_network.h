#pragma once
// Flow-level network: flows share links max-min fairly.
//
// Model
// -----
// A *link* is a one-way constraint with a capacity in bytes per second. A *flow* moves `bytes`
// along a *route* (a list of distinct links). A flow lives in two phases (SimGrid's network model:
// latency is a phase, not a rate):
//   1. latency phase: for `latency` picoseconds it holds no bandwidth and is invisible to the
//      sharing; this is the alpha of alpha-beta, so the flow model and an analytical path agree on
//      an uncontended link: completion = start + latency + bytes / capacity.
//   2. sharing phase: it takes a max-min fair share of every link on its route until its bytes are
//      delivered.
// A flow with zero bytes or an empty route (a copy inside one GPU, modelled as infinite bandwidth)
// completes when its latency ends and never touches a link.
//
// Max-min fairness by progressive filling (the "bottleneck" algorithm): every link L whose
// unfixed flows weigh n(L) in total offers the share rem(L) / n(L), where rem(L) is its capacity
// minus the rates already fixed on it; a flow with a rate cap offers its cap. Repeatedly take the
// smallest share s and *every* link (and cap) offering exactly s, fix all their unfixed flows at
// s, then subtract k(L) x s once from every link L those flows cross, k(L) being the weight fixed
// on L in this step. The result is the unique max-min fair allocation: every flow crosses a
// saturated link on which no other flow has a larger rate, or runs at its cap.
// Why all the ties in one step: in exact arithmetic a link tied at the minimum keeps offering s
// after the others' flows are fixed ((n s - k s) / (n - k) = s), so fixing them together is the
// same allocation without the ulp drift of fixing them one after the other; and an integer k times
// s, subtracted once, makes a flow of weight k bit-identical to k separate flows (below).
//
// Weighted flows and rate caps
// ----------------------------
// A flow of weight w stands for w identical flows (same route, bytes, start, latency, cap): it is
// one entry everywhere (members, heap, batch) but counts w in n(L), is fixed with k(L) += w and
// credits w x bytes to the links it completes on. Identical flows always get identical rates, so
// the weighted flow's rate, completion picosecond and every link's load are bit for bit those of
// the w separate flows (tested against the unweighted network). A rate cap (max_rate) is a
// private link of that capacity per unit flow, solved as one: a flow offered at a fixed rate by an
// application, or a NIC-side limit. An endless flow (bytes = kEndlessBytes) never completes: a
// persistent background load that takes its max-min share until the run ends.
//
// Incremental solving (SimGrid's LMM "selective update")
// ---------------------------------------------------------------------
// Flows and links form a bipartite graph; a flow's rate depends only on the connected component
// (links joined through flows in their sharing phase) it belongs to. When flows join or leave, or
// a capacity changes, only the components containing the touched links are re-solved, from
// scratch. Why this is bit-identical to solving everything (SolverMode::Full, kept as an oracle):
//   - the only choice is "which share next"; restricted to one component, the global sequence of
//     steps is exactly the sequence the component solve produces: a global step at share s holds
//     this component's links (and caps) offering s, which is then this component's minimum, and
//     other components' steps never change this component's shares;
//   - each step subtracts k(L) x s from each touched link once, k(L) an integer, so the order in
//     which flows and links are visited within a step cannot change any double.
// Then only flows whose rate changed (compared bit for bit) are "re-dated": their remaining bytes
// are brought up to date and a new completion date is computed; the others keep the date they
// had. This is also what makes the two modes agree to the picosecond over a whole run: remaining
// bytes are updated at exactly the same instants with exactly the same operations.
//
// Time and exactness
// ------------------
// A flow stores (remaining bytes at t_mark, rate). When its rate changes at time T:
//     remaining -= rate_old * (T - t_mark) / 1e12;    t_mark = T
//     completion = T + ceil(remaining * 1e12 / rate_new)       [integer ps]
// The ceiling drops values within a relative 1e-12 above an integer (so 1e9 B at 1e10/3 B/s ends
// at exactly 3e11 ps, not one ps later because of an ulp). A flow completes at its scheduled
// picosecond whatever floating-point residue is left in `remaining`, so rounding can never keep a
// flow alive; a residue <= 0 found at a re-dating completes the flow at that instant. A rate of 0
// (only possible on a zero-capacity link) means no completion date until a capacity changes.
//
// Events and determinism (ns-3 and OMNeT++ order events by time then insertion; htsim keeps
// one pending completion per resource)
// ------------------------------------------------------------------------------------------
// The network keeps the next date of every flow that has one (end of latency, or completion) in a
// DateQueue (sim/net/date_queue.h): flows grouped by date, the groups in a heap. Collectives make
// hundreds of flows share one date (they end their latency together, and symmetric ones complete
// together), so a batch of k flows is taken in O(k log k) and a re-dated flow moves in O(1) when
// its new date already has a group, whatever the number of flows waiting. The queue hands a date's
// flows over in start order, so the order of extraction is the total order (date, start order).
// All events at the same picosecond form one batch: completions leave and latencies end, in start
// order, then one solve covers every touched component. Completions at the same picosecond are
// therefore reported together, in start order, and flows that end at T never share with flows
// that join at T.
//
// Driving it from an engine (one pending event):
//     net.start_flow(now, route, bytes, latency, tag);   // any time >= net.now()
//     reschedule my single network event at net.next_event_time();
//     on that event at time t:
//         net.advance_to(t);
//         net.drain_completed(done);                     // (tag, time) of finished flows
//         for (auto& c : done) wake whoever waits on c.tag;
//         reschedule at net.next_event_time();
// start_flow and set_link_capacity first advance the network to their `now`; a flow started with
// zero latency joins the sharing at the next advance_to(now) (next_event_time() returns `now`), so
// many flows started at the same picosecond are solved once, together.
//
// Cost
// ----
// start_flow: O(route + log D). A batch: O(route) per flow that leaves or joins, plus one solve of
// the touched components: O(sum of route lengths in them + steps * log L) plus O(1) per re-dated
// flow (O(log D) when it opens a date of its own, D being the number of distinct dates waiting)
// and O(log k) per flow of a batch of k, for sorting it into start order.
// Full mode solves every link and flow on every batch. No allocation in steady state: links and
// flows are plain structs in vectors, flow slots are recycled with their buffers, and the solver
// reuses its scratch vectors.
//
// Errors: misuse (unknown link, time going backwards, negative sizes, a link twice in a route)
// throws std::invalid_argument; capacities from user files are expected to have been checked with
// a key path by the caller (cluster layer), here a bad one is also std::invalid_argument.
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sim/core/units.h"
#include "sim/net/date_queue.h"

namespace zerosim::net {

using LinkId = std::uint32_t;
// Opaque handle: slot in the low 32 bits, slot generation in the high 32 bits, so a handle to a
// finished flow stays recognisably finished after its slot is reused.
using FlowId = std::uint64_t;

// `bytes` of a flow that never completes (see "Weighted flows and rate caps").
inline constexpr Bytes kEndlessBytes = std::numeric_limits<Bytes>::max();
inline constexpr double kUncapped = std::numeric_limits<double>::infinity();

// Traffic classes let reports split a link's bytes; the training step passes its GroupKind
// (0 = DP, 1 = TP, 2 = PP, 3 = EP, 4 = CP, sim/parallel/training_plan.h); 5 is other traffic.
inline constexpr int kTrafficClasses = 6;

enum class SolverMode : std::uint8_t {
  Incremental,  // re-solve only the components an event touched (default)
  Full,         // re-solve every link on every event (oracle for tests and benchmarks)
};

enum class FlowPhase : std::uint8_t { Latency, Sharing, Finished };

struct Completion {
  std::uint64_t tag;
  SimTime time;  // the picosecond the flow finished (<= the time passed to advance_to)
  FlowId flow;
  std::uint32_t weight = 1;  // how many identical flows it stood for
};

struct LinkStats {
  // Time with at least one flow in its sharing phase on the link.
  SimTime busy_ps = 0;
  // Bytes of *completed* flows that crossed the link, by traffic class; exact integers,
  // credited at completion.
  std::array<Bytes, kTrafficClasses> completed_bytes{};
  // Integral of the link's load (sum of its flows' rates) over time, in bytes, including flows
  // still in flight. Approximately completed_bytes plus in-flight progress; it may exceed the
  // exact bytes by < 1 ps worth of rate per flow because completion dates are rounded up.
  double carried_bytes = 0;
};

// Counters for benchmarks and for tests that check selective update really is selective.
struct SolverCounters {
  std::uint64_t batches = 0;        // instants at which the flow set changed
  std::uint64_t solves = 0;         // solver invocations (one per batch that touched a link)
  std::uint64_t links_solved = 0;   // sum over solves of links visited
  std::uint64_t flows_solved = 0;   // sum over solves of flows given a rate
  std::uint64_t flows_redated = 0;  // flows whose rate changed, hence their completion date
  std::uint64_t last_solve_flows = 0;
  std::uint64_t last_solve_links = 0;
};

class FlowNetwork {
 public:
  explicit FlowNetwork(SolverMode mode = SolverMode::Incremental);

  // ---- topology ------------------------------------------------------------------------------
  // Adds a one-way link; capacity must be finite and > 0. Ids are dense, from 0.
  LinkId add_link(double capacity_bytes_per_s);
  // Changes a capacity at `now` (degraded or restored link): advances to `now`, then re-solves the
  // link's component. Capacity may be 0 (a failed link: its flows stall until it is restored).
  void set_link_capacity(SimTime now, LinkId link, double capacity_bytes_per_s);
  std::size_t link_count() const { return links_.size(); }
  double link_capacity(LinkId link) const;

  // ---- flows ---------------------------------------------------------------------------------
  // Starts a flow at `now` (>= now()): it waits `latency` ps, then shares the route's links until
  // `bytes` are delivered, and is then reported with `tag`. The route is copied. traffic_class <
  // kTrafficClasses only labels the bytes in LinkStats. `weight` >= 1 identical flows are
  // started as one; each runs at most `max_rate` bytes/s (> 0, kUncapped: no cap). bytes =
  // kEndlessBytes: the flow never completes (it needs a non-empty route).
  FlowId start_flow(SimTime now, std::span<const LinkId> route, Bytes bytes, SimTime latency,
                    std::uint64_t tag, std::uint8_t traffic_class = 0, std::uint32_t weight = 1,
                    double max_rate = kUncapped);

  // Earliest picosecond at which the network changes by itself (a latency ends or a flow
  // completes); kNever when nothing is pending.
  SimTime next_event_time() const;

  // Processes, in time order, every event with date <= t, then sets now() = t. Any t >= now() is
  // allowed; calling it exactly at next_event_time() is the intended, cheapest use.
  void advance_to(SimTime t);

  // Appends the flows completed so far (in completion order: time, then start order) to `out`
  // and forgets them. Returns how many were appended.
  std::size_t drain_completed(std::vector<Completion>& out);

  SimTime now() const { return now_; }
  std::size_t active_flows() const { return active_; }  // in latency or sharing phase

  // ---- queries (for tests, reports, traces) --------------------------------------------------
  FlowPhase flow_phase(FlowId flow) const;
  // Current rate in bytes/s of one of the flow's `weight` unit flows (0 in the latency phase and
  // once finished).
  double flow_rate(FlowId flow) const;
  // Bytes one unit flow still has to deliver at `now` >= the flow's last re-dating; the full size
  // in the latency phase, 0 once finished, +inf for an endless flow.
  double flow_remaining(FlowId flow, SimTime now) const;
  // Bytes one unit flow has delivered by `now` (>= its last re-dating): exact for endless flows
  // too, which report no completion.
  double flow_delivered(FlowId flow, SimTime now) const;
  // Scheduled completion (kNever if stalled or still in latency phase with unknown rate).
  SimTime flow_completion(FlowId flow) const;

  // Sum of the rates of the link's sharing flows, as left by the last solve.
  double link_load(LinkId link) const;
  std::size_t link_flow_count(LinkId link) const;
  // Statistics up to `now` (>= now(); open busy intervals and the current load are counted).
  LinkStats link_stats(LinkId link, SimTime now) const;

  const SolverCounters& counters() const { return counters_; }
  SolverMode mode() const { return mode_; }

 private:
  enum class State : std::uint8_t { Free, Latency, LatencyThenDone, Sharing };

  struct Member {             // one entry of a link's list of sharing flows
    std::uint32_t flow;       // flow slot
    std::uint32_t hop;        // index of this link in the flow's route
    std::uint32_t weight;     // the flow's, here so a solve sums weights without visiting flows
  };

  struct Link {
    double capacity = 0;
    double load = 0;           // committed sum of rates
    // solver scratch
    double rem = 0;
    double new_load = 0;
    std::uint64_t unfixed = 0;  // weight of its members not yet fixed
    std::uint64_t fixing = 0;   // weight fixed on it in the current step
    std::uint32_t version = 0;  // invalidates stale bottleneck-heap entries
    std::uint32_t visit = 0;    // BFS epoch stamp
    bool dirty = false;
    bool touched = false;
    std::vector<Member> members;
    // accounting
    SimTime load_since = 0;
    SimTime busy_since = 0;
    LinkStats stats;
  };

  struct Hop {
    LinkId link;
    std::uint32_t pos;  // index of the flow in links_[link].members
  };

  struct Flow {
    double remaining = 0;  // bytes left at t_mark (per unit flow; +inf if endless)
    double rate = 0;
    double new_rate = 0;   // solver scratch
    double max_rate = kUncapped;
    double delivered_before_mark = 0;  // per unit flow, since it joined
    SimTime t_mark = 0;
    SimTime date = kNever;  // end of latency or completion; kNever if none
    std::uint64_t seq = 0;  // start order, the tie-break among flows of one date
    std::uint64_t tag = 0;
    Bytes bytes = 0;
    std::uint32_t generation = 0;
    std::uint32_t visit = 0;
    std::uint32_t weight = 1;
    State state = State::Free;
    std::uint8_t traffic_class = 0;
    bool fixed = false;
    std::vector<Hop> route;
  };

  // A link's offer, or (id with kCapBit) a capped flow's cap.
  struct BottleneckEntry {
    double share;
    std::uint32_t id;
    std::uint32_t version;
  };
  static constexpr std::uint32_t kCapBit = 0x80000000u;

  const Flow* find(FlowId id) const;
  void check_link(LinkId link, const char* what) const;
  void process_batch(SimTime t);
  void join(std::uint32_t slot, SimTime t);
  void leave(std::uint32_t slot, SimTime t);
  void complete(std::uint32_t slot, SimTime t);
  void touch(LinkId link);
  void next_epoch();
  void solve(SimTime t);
  void collect_component();
  void collect_all();
  void fix_flow(std::uint32_t slot, double share);
  void redate(std::uint32_t slot, SimTime t);
  BottleneckEntry bottleneck_entry(LinkId link) const;

  SolverMode mode_;
  SimTime now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint32_t epoch_ = 0;
  std::size_t active_ = 0;

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_slots_;
  DateQueue queue_;  // next date (end of latency or completion) of every flow that has one
  std::vector<Completion> completed_;

  // scratch, reused
  std::vector<std::uint32_t> batch_;
  std::vector<LinkId> touched_;
  std::vector<LinkId> comp_links_;
  std::vector<std::uint32_t> comp_flows_;
  std::vector<LinkId> dirty_links_;
  std::vector<BottleneckEntry> bottlenecks_;
  std::vector<std::uint32_t> step_;     // ids offering the current step's share
  std::vector<DateQueue::Move> redated_;  // flows re-dated by the last solve, their new dates

  SolverCounters counters_;
};

}  // namespace zerosim::net
