#pragma once
// The order in which a rank issues its ops, under the simulator's rules (sim/core/plan.h):
//   - ops on one stream of a rank run in plan order;
//   - an op waits for its explicit deps (ids within its rank);
//   - the k-th collective a rank holds on group g (in op-id order) is the same collective as the
//     k-th of every other member of g; it starts when every member has reached it and all member
//     ops finish together. Members must agree on its kind and bytes.
//
// build_schedule() plays the whole plan abstractly (every op instantaneous) and lists each rank's
// ops in the order they complete. Every rank then meets its collectives in one global order, so a
// backend whose collectives block (threads, MPI) cannot deadlock, and an asynchronous one (NCCL)
// enqueues every communicator's collectives in the same order on all its ranks. A plan that
// cannot finish under the rules (a wait cycle, or collectives met in different orders) is refused
// with a ScheduleError that names, per rank, the op each stream is stuck at and what it waits for.
//
// Cost: O(ops + deps) time and memory over all ranks.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "validate/plan_reader.h"

namespace zerosim::validate {

class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RankSchedule {
  int rank = 0;
  std::vector<int> order;     // op ids in issue order
  std::vector<int> coll_seq;  // per op id: index of the collective within its group, -1 if none
};

struct Schedule {
  std::vector<RankSchedule> ranks;  // parallel to ReplayPlan::ranks
  std::int64_t collectives = 0;     // collective instances (one per group-wide collective)
  const RankSchedule* find_rank(int rank) const;
};

// Needs every rank (plan.has_all_ranks()). Throws ScheduleError on mismatched or deadlocked plans.
Schedule build_schedule(const ReplayPlan& plan);

// For a file holding only some ranks: each rank's ops in a topological order of its streams and
// deps, ties broken by predicted start time (the simulator's times are consistent across ranks),
// then by id. Collectives are not checked across ranks. Throws ScheduleError on a cycle.
Schedule build_local_schedule(const ReplayPlan& plan);

}  // namespace zerosim::validate
