#include "sim/net/flow_network.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace zerosim::net {

namespace {

constexpr double kPs = 1e12;  // picoseconds per second, exact in a double
// A ceiling within this relative distance above an integer falls back to that integer, so that
// quotients which are exact on paper but miss by an ulp in floating point land on the paper value.
constexpr double kRoundSlack = 1e-12;

// Completion date for `remaining` bytes at `rate` from `t` (see the header: "Time and exactness").
SimTime completion_date(SimTime t, double remaining, double rate) {
  if (!(remaining > 0)) return t;
  if (!(rate > 0) || remaining == kUncapped) return kNever;  // stalled, or endless
  const double x = remaining * kPs / rate;
  // ceil(x), except that an x at most x * slack above an integer is that integer. (Not
  // ceil(x - x * slack): from 1 s on, x * slack is a whole picosecond or more, and an exact
  // integer would land that many picoseconds early.)
  const double below = std::floor(x);
  const double ps = x - below <= x * kRoundSlack ? below : std::ceil(x);
  // Past the clock is not stalled: kNever - 1 keeps the flow queued, so that the engine sees a
  // completion beyond its limit and says the step is too long, rather than a deadlock.
  if (!(ps < static_cast<double>(kNever - 1 - t))) return kNever - 1;
  return t + static_cast<SimTime>(ps);
}

// Min-heap order on the share alone: a step takes every entry offering the minimum, so the order
// among equal shares never matters.
bool bottleneck_after(const auto& a, const auto& b) { return a.share > b.share; }

}  // namespace

FlowNetwork::FlowNetwork(SolverMode mode) : mode_(mode) {}

// ---- topology --------------------------------------------------------------------------------

LinkId FlowNetwork::add_link(double capacity_bytes_per_s) {
  if (!(capacity_bytes_per_s > 0) || !std::isfinite(capacity_bytes_per_s)) {
    throw std::invalid_argument("net: link capacity must be finite and > 0 bytes/s, got " +
                                std::to_string(capacity_bytes_per_s));
  }
  if (links_.size() >= std::numeric_limits<LinkId>::max()) {
    throw std::invalid_argument("net: too many links");
  }
  Link& l = links_.emplace_back();
  l.capacity = capacity_bytes_per_s;
  l.load_since = now_;
  return static_cast<LinkId>(links_.size() - 1);
}

void FlowNetwork::check_link(LinkId link, const char* what) const {
  if (link >= links_.size()) {
    throw std::invalid_argument(std::string("net: ") + what + ": unknown link " +
                                std::to_string(link) + " (" + std::to_string(links_.size()) +
                                " links)");
  }
}

void FlowNetwork::set_link_capacity(SimTime now, LinkId link, double capacity_bytes_per_s) {
  check_link(link, "set_link_capacity");
  if (!(capacity_bytes_per_s >= 0) || !std::isfinite(capacity_bytes_per_s)) {
    throw std::invalid_argument("net: link capacity must be finite and >= 0 bytes/s, got " +
                                std::to_string(capacity_bytes_per_s));
  }
  advance_to(now);
  links_[link].capacity = capacity_bytes_per_s;
  ++counters_.batches;
  touch(link);
  solve(now);
}

double FlowNetwork::link_capacity(LinkId link) const {
  check_link(link, "link_capacity");
  return links_[link].capacity;
}

double FlowNetwork::link_load(LinkId link) const {
  check_link(link, "link_load");
  return links_[link].load;
}

std::size_t FlowNetwork::link_flow_count(LinkId link) const {
  check_link(link, "link_flow_count");
  return links_[link].members.size();
}

LinkStats FlowNetwork::link_stats(LinkId link, SimTime now) const {
  check_link(link, "link_stats");
  if (now < now_) throw std::invalid_argument("net: link_stats: time before now()");
  const Link& l = links_[link];
  LinkStats s = l.stats;
  if (!l.members.empty()) s.busy_ps += now - l.busy_since;
  s.carried_bytes += l.load * static_cast<double>(now - l.load_since) / kPs;
  return s;
}

// ---- flows -----------------------------------------------------------------------------------

FlowId FlowNetwork::start_flow(SimTime now, std::span<const LinkId> route, Bytes bytes,
                               SimTime latency, std::uint64_t tag, std::uint8_t traffic_class,
                               std::uint32_t weight, double max_rate) {
  if (now < now_) {
    throw std::invalid_argument("net: start_flow at " + std::to_string(now) +
                                " ps, before now() = " + std::to_string(now_));
  }
  if (bytes < 0) throw std::invalid_argument("net: start_flow: negative bytes");
  if (latency < 0 || latency > kNever - 1 - now) {
    throw std::invalid_argument("net: start_flow: latency out of range");
  }
  if (traffic_class >= kTrafficClasses) {
    throw std::invalid_argument("net: start_flow: traffic class must be < " +
                                std::to_string(kTrafficClasses));
  }
  if (weight == 0) throw std::invalid_argument("net: start_flow: weight must be >= 1");
  if (!(max_rate > 0)) throw std::invalid_argument("net: start_flow: max_rate must be > 0");
  if (bytes == kEndlessBytes && route.empty()) {
    throw std::invalid_argument("net: start_flow: an endless flow needs a route");
  }
  next_epoch();
  for (LinkId l : route) {
    check_link(l, "start_flow route");
    if (links_[l].visit == epoch_) {
      throw std::invalid_argument("net: start_flow: link " + std::to_string(l) +
                                  " appears twice in the route");
    }
    links_[l].visit = epoch_;
  }
  advance_to(now);

  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (flows_.size() >= std::numeric_limits<std::uint32_t>::max()) {
      throw std::invalid_argument("net: too many concurrent flows");
    }
    slot = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[slot];
  f.route.resize(route.size());
  for (std::size_t k = 0; k < route.size(); ++k) f.route[k] = {route[k], 0};
  f.bytes = bytes;
  f.remaining = bytes == kEndlessBytes ? kUncapped : static_cast<double>(bytes);
  f.max_rate = max_rate;
  f.weight = weight;
  f.rate = 0;
  f.t_mark = now;
  f.tag = tag;
  f.traffic_class = traffic_class;
  f.seq = next_seq_++;
  f.state = (bytes == 0 || route.empty()) ? State::LatencyThenDone : State::Latency;
  f.date = now + latency;
  queue_.set(slot, f.date, f.seq);
  ++active_;
  return (static_cast<FlowId>(f.generation) << 32) | slot;
}

const FlowNetwork::Flow* FlowNetwork::find(FlowId id) const {
  const std::uint64_t slot = id & 0xffffffffu;
  if (slot >= flows_.size()) return nullptr;
  const Flow& f = flows_[slot];
  if (f.generation != static_cast<std::uint32_t>(id >> 32) || f.state == State::Free) {
    return nullptr;
  }
  return &f;
}

FlowPhase FlowNetwork::flow_phase(FlowId flow) const {
  const Flow* f = find(flow);
  if (f == nullptr) return FlowPhase::Finished;
  return f->state == State::Sharing ? FlowPhase::Sharing : FlowPhase::Latency;
}

double FlowNetwork::flow_rate(FlowId flow) const {
  const Flow* f = find(flow);
  return f != nullptr && f->state == State::Sharing ? f->rate : 0.0;
}

double FlowNetwork::flow_remaining(FlowId flow, SimTime now) const {
  const Flow* f = find(flow);
  if (f == nullptr) return 0;
  if (f->state != State::Sharing) {
    return f->bytes == kEndlessBytes ? kUncapped : static_cast<double>(f->bytes);
  }
  if (now < f->t_mark) throw std::invalid_argument("net: flow_remaining: time before last update");
  const double r = f->remaining - f->rate * static_cast<double>(now - f->t_mark) / kPs;
  return r > 0 ? r : 0;
}

double FlowNetwork::flow_delivered(FlowId flow, SimTime now) const {
  const Flow* f = find(flow);
  if (f == nullptr || f->state != State::Sharing) return 0;
  if (now < f->t_mark) throw std::invalid_argument("net: flow_delivered: time before last update");
  // Endless flows keep the bytes moved before t_mark in the (infinite) remaining, so count them
  // from the start instead: bytes-at-join minus remaining only works for finite flows.
  if (f->bytes == kEndlessBytes) {
    return f->delivered_before_mark + f->rate * static_cast<double>(now - f->t_mark) / kPs;
  }
  const double r = f->remaining - f->rate * static_cast<double>(now - f->t_mark) / kPs;
  return static_cast<double>(f->bytes) - (r > 0 ? r : 0);
}

SimTime FlowNetwork::flow_completion(FlowId flow) const {
  const Flow* f = find(flow);
  if (f == nullptr || f->state == State::Latency) return kNever;
  return f->date;
}

SimTime FlowNetwork::next_event_time() const { return queue_.earliest(); }

std::size_t FlowNetwork::drain_completed(std::vector<Completion>& out) {
  const std::size_t n = completed_.size();
  out.insert(out.end(), completed_.begin(), completed_.end());
  completed_.clear();
  return n;
}

// ---- events ----------------------------------------------------------------------------------

void FlowNetwork::advance_to(SimTime t) {
  if (t < now_) {
    throw std::invalid_argument("net: advance_to " + std::to_string(t) + " ps, before now() = " +
                                std::to_string(now_));
  }
  while (queue_.earliest() <= t) process_batch(queue_.earliest());
  now_ = t;
}

void FlowNetwork::process_batch(SimTime t) {
  now_ = t;
  ++counters_.batches;
  batch_.clear();
  queue_.take_earliest(batch_);
  for (std::uint32_t slot : batch_) {
    if (flows_[slot].state == State::Latency) {
      join(slot, t);
    } else {
      complete(slot, t);
    }
  }
  if (!touched_.empty()) solve(t);
}

void FlowNetwork::touch(LinkId link) {
  Link& l = links_[link];
  if (!l.touched) {
    l.touched = true;
    touched_.push_back(link);
  }
}

void FlowNetwork::join(std::uint32_t slot, SimTime t) {
  Flow& f = flows_[slot];
  f.state = State::Sharing;
  f.remaining = f.bytes == kEndlessBytes ? kUncapped : static_cast<double>(f.bytes);
  f.delivered_before_mark = 0;
  f.rate = 0;
  f.t_mark = t;
  f.date = kNever;
  for (std::size_t k = 0; k < f.route.size(); ++k) {
    Hop& h = f.route[k];
    Link& l = links_[h.link];
    if (l.members.empty()) l.busy_since = t;
    h.pos = static_cast<std::uint32_t>(l.members.size());
    l.members.push_back({slot, static_cast<std::uint32_t>(k), f.weight});
    touch(h.link);
  }
}

void FlowNetwork::leave(std::uint32_t slot, SimTime t) {
  Flow& f = flows_[slot];
  const Bytes bytes = f.bytes * static_cast<Bytes>(f.weight);
  for (const Hop& h : f.route) {
    Link& l = links_[h.link];
    const Member last = l.members.back();
    l.members[h.pos] = last;
    flows_[last.flow].route[last.hop].pos = h.pos;
    l.members.pop_back();
    if (l.members.empty()) l.stats.busy_ps += t - l.busy_since;
    l.stats.completed_bytes[f.traffic_class] += bytes;
    touch(h.link);
  }
}

void FlowNetwork::complete(std::uint32_t slot, SimTime t) {
  Flow& f = flows_[slot];
  if (f.state == State::Sharing) leave(slot, t);
  completed_.push_back({f.tag, t, (static_cast<FlowId>(f.generation) << 32) | slot, f.weight});
  f.state = State::Free;
  f.rate = 0;
  ++f.generation;
  free_slots_.push_back(slot);
  --active_;
}

// ---- solver ----------------------------------------------------------------------------------

void FlowNetwork::next_epoch() {
  if (++epoch_ == 0) {  // stamp wrap-around: clear every stamp once per 2^32 epochs
    for (Link& l : links_) l.visit = 0;
    for (Flow& f : flows_) f.visit = 0;
    epoch_ = 1;
  }
}

void FlowNetwork::collect_component() {
  for (LinkId l : touched_) {
    links_[l].visit = epoch_;
    comp_links_.push_back(l);
  }
  for (std::size_t i = 0; i < comp_links_.size(); ++i) {
    for (const Member& m : links_[comp_links_[i]].members) {
      Flow& f = flows_[m.flow];
      if (f.visit == epoch_) continue;
      f.visit = epoch_;
      comp_flows_.push_back(m.flow);
      for (const Hop& h : f.route) {
        if (links_[h.link].visit != epoch_) {
          links_[h.link].visit = epoch_;
          comp_links_.push_back(h.link);
        }
      }
    }
  }
}

void FlowNetwork::collect_all() {
  for (LinkId l = 0; l < links_.size(); ++l) {
    comp_links_.push_back(l);
    for (const Member& m : links_[l].members) {
      Flow& f = flows_[m.flow];
      if (f.visit == epoch_) continue;
      f.visit = epoch_;
      comp_flows_.push_back(m.flow);
    }
  }
}

FlowNetwork::BottleneckEntry FlowNetwork::bottleneck_entry(LinkId link) const {
  const Link& l = links_[link];
  const double rem = l.rem > 0 ? l.rem : 0.0;
  return {rem / static_cast<double>(l.unfixed), link, l.version};
}

void FlowNetwork::fix_flow(std::uint32_t slot, double share) {
  Flow& f = flows_[slot];
  f.fixed = true;
  f.new_rate = share;
  for (const Hop& h : f.route) {
    Link& l = links_[h.link];
    l.fixing += f.weight;
    if (!l.dirty) {
      l.dirty = true;
      dirty_links_.push_back(h.link);
    }
  }
}

void FlowNetwork::solve(SimTime t) {
  ++counters_.solves;
  next_epoch();
  comp_links_.clear();
  comp_flows_.clear();
  if (mode_ == SolverMode::Full) {
    collect_all();
  } else {
    collect_component();
  }
  for (LinkId l : touched_) links_[l].touched = false;
  touched_.clear();

  const auto after = [](const BottleneckEntry& a, const BottleneckEntry& b) {
    return bottleneck_after(a, b);
  };
  bottlenecks_.clear();
  for (LinkId id : comp_links_) {
    Link& l = links_[id];
    l.rem = l.capacity;
    l.new_load = 0;
    l.unfixed = 0;
    for (const Member& m : l.members) l.unfixed += m.weight;
    ++l.version;
    if (l.unfixed > 0) bottlenecks_.push_back(bottleneck_entry(id));
  }
  for (std::uint32_t slot : comp_flows_) {
    Flow& f = flows_[slot];
    f.fixed = false;
    if (f.max_rate != kUncapped) bottlenecks_.push_back({f.max_rate, kCapBit | slot, 0});
  }
  std::make_heap(bottlenecks_.begin(), bottlenecks_.end(), after);

  // One step per distinct share: every link and cap offering the minimum share s fixes its
  // unfixed flows at s; then each link crossed subtracts (weight fixed on it) x s, once.
  // Stops when every flow is fixed: the entries left are stale or belong to fully fixed links.
  std::size_t unfixed_flows = comp_flows_.size();
  while (unfixed_flows > 0 && !bottlenecks_.empty()) {
    std::pop_heap(bottlenecks_.begin(), bottlenecks_.end(), after);
    const double share = bottlenecks_.back().share;
    step_.clear();
    for (;;) {
      const BottleneckEntry e = bottlenecks_.back();
      bottlenecks_.pop_back();
      const bool live = (e.id & kCapBit) != 0 ? !flows_[e.id & ~kCapBit].fixed
                                              : e.version == links_[e.id].version;
      if (live) step_.push_back(e.id);
      if (bottlenecks_.empty() || bottlenecks_.front().share != share) break;
      std::pop_heap(bottlenecks_.begin(), bottlenecks_.end(), after);
    }
    for (std::uint32_t id : step_) {
      if ((id & kCapBit) != 0) {
        const std::uint32_t slot = id & ~kCapBit;
        if (!flows_[slot].fixed) {
          fix_flow(slot, share);
          --unfixed_flows;
        }
        continue;
      }
      for (const Member& m : links_[id].members) {
        if (flows_[m.flow].fixed) continue;
        fix_flow(m.flow, share);
        --unfixed_flows;
      }
    }
    for (LinkId id : dirty_links_) {
      Link& l = links_[id];
      l.dirty = false;
      const double fixed = static_cast<double>(l.fixing) * share;
      l.rem -= fixed;
      l.new_load += fixed;
      l.unfixed -= l.fixing;
      l.fixing = 0;
      ++l.version;
      if (l.unfixed > 0) {
        bottlenecks_.push_back(bottleneck_entry(id));
        std::push_heap(bottlenecks_.begin(), bottlenecks_.end(), after);
      }
    }
    dirty_links_.clear();
  }
  bottlenecks_.clear();

  redated_.clear();
  for (std::uint32_t slot : comp_flows_) {
    if (flows_[slot].new_rate == flows_[slot].rate) continue;
    redate(slot, t);
    redated_.push_back({slot, flows_[slot].date, flows_[slot].seq});
  }
  counters_.flows_redated += redated_.size();
  queue_.set_many(redated_);  // a stalled flow, dated kNever, leaves the queue
  for (LinkId id : comp_links_) {
    Link& l = links_[id];
    if (l.new_load != l.load) {
      l.stats.carried_bytes += l.load * static_cast<double>(t - l.load_since) / kPs;
      l.load = l.new_load;
      l.load_since = t;
    }
  }
  counters_.links_solved += comp_links_.size();
  counters_.flows_solved += comp_flows_.size();
  counters_.last_solve_links = comp_links_.size();
  counters_.last_solve_flows = comp_flows_.size();
}

void FlowNetwork::redate(std::uint32_t slot, SimTime t) {
  Flow& f = flows_[slot];
  if (f.rate > 0) {
    const double moved = f.rate * static_cast<double>(t - f.t_mark) / kPs;
    f.remaining -= moved;
    f.delivered_before_mark += moved;
  }
  f.t_mark = t;
  f.rate = f.new_rate;
  f.date = completion_date(t, f.remaining, f.rate);
}

}  // namespace zerosim::net
