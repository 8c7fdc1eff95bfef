#pragma once
// The discrete-event engine: plays a Plan against cost models and records when every op started
// and ended.
//
// Rules (the contract the plan builders rely on):
//  - Time is integer picoseconds; events are ordered by (time, insertion sequence), so the same
//    plan and cost models give the same trajectory bit for bit.
//  - An op is released when its explicit dependencies and the previous op on its (rank, stream)
//    have finished. Compute and copy ops then run for the ComputeModel's duration; Alloc and Free
//    take no time.
//  - A collective starts only when every member op has been released; the CommBackend decides when
//    it ends, and all member ops end at that time.
//  - A compute op that starts while its rank has a collective in flight on another stream runs
//    ComputeModel::comm_slowdown() longer (judged once, at its start).
//  - Every duration and every time played is at most kMaxSimTime (units.h), so that a backend's
//    `now + duration` cannot overflow; a longer one is an InputError (DurationOverflow naming the
//    op), never a wrapped time. Builds with ZEROSIM_CHECK_INVARIANTS also check the rules above
//    while playing and throw std::logic_error on a violation (engine.cpp).
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/core/plan.h"

namespace zerosim {

inline constexpr SimTime kNever = std::numeric_limits<SimTime>::max();

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  // Duration of a Compute or Copy op.
  virtual SimTime duration(const Plan& plan, OpId op) = 0;
  // Relative slowdown of a compute op that starts while its rank has communication in flight on
  // another stream (NCCL kernels take SMs and HBM bandwidth): duration x (1 + slowdown).
  virtual double comm_slowdown() const { return 0; }
};

class CommBackend {
 public:
  virtual ~CommBackend() = default;
  // Every member of collective `c` has arrived at `now`.
  virtual void start(const Plan& plan, std::uint32_t c, SimTime now) = 0;
  // Earliest time at which a started collective finishes, kNever if none is in flight.
  virtual SimTime next_completion() const = 0;
  // Appends the collectives finishing at `now` (== next_completion()) to `done`, in a
  // deterministic order, and forgets them.
  virtual void pop_completed(SimTime now, std::vector<std::uint32_t>& done) = 0;
};

struct EngineResult {
  SimTime makespan = 0;
  std::vector<SimTime> start;         // per op
  std::vector<SimTime> end;           // per op
  std::vector<std::uint32_t> order;   // op ids in completion order
  std::uint64_t fingerprint = 0;      // hash of every completion (time, kind, rank, op, bytes)
  std::uint64_t events = 0;           // events processed
};

// Plays `plan` to completion. Throws std::logic_error if the plan deadlocks (a plan-builder bug:
// some op can never be released), naming the first stuck op; InputError if the step would last
// longer than kMaxSimTime.
EngineResult run_engine(const Plan& plan, ComputeModel& compute, CommBackend& comm);

}  // namespace zerosim
