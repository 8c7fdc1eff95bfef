#pragma once
// What the replay asks of a machine. The replay core (replay.h) walks one rank's schedule and
// hands each op to a Backend; the CPU backend (cpu_backend.h: threads or MPI processes as ranks,
// real fp32 data, the CPU Adam) checks the logic anywhere, the GPU backend (gpu/gpu_backend.h:
// CUDA streams and events, cuBLAS, NCCL, the CUDA Adam) measures.
//
// Contract, per timed step:
//   begin_step();  issue(op) for every op of the rank in schedule order;  end_step() -> timings.
// issue() may run the op at once (CPU) or enqueue it (GPU). Ops come in an order that respects
// stream order and explicit deps, and every rank meets its collectives in one global order
// (schedule.h), so a backend may block in a collective. A backend maps each plan stream to its own
// queue and must not start an op before its explicit deps (other streams) have finished.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/plan_reader.h"
#include "validate/schedule.h"

namespace zerosim::validate {

class ReplayError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Seconds from the start of the step (measured on the rank's own clock) and the op's duration.
struct OpTiming {
  double start_s = 0;
  double duration_s = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;    // "cpu", "gpu"
  virtual std::string device() const = 0;  // "NVIDIA H200", "host CPU (threads)", ...
  // Once, before the first step: size buffers, create streams / communicators.
  virtual void prepare(const ReplayPlan& plan, const RankOps& ops, const RankSchedule& sched) = 0;
  virtual void begin_step() = 0;
  // coll_seq: the op's number on its channel (RankSchedule::coll_seq), -1 for non-collectives.
  virtual void issue(const PlanOp& op, int coll_seq) = 0;
  // Waits for the step; returns timings indexed by op id (zero for ops that take no time, such as
  // alloc/free, which backends account but do not allocate).
  virtual std::vector<OpTiming> end_step() = 0;
  // Anything worth reporting beside the timings (buffer sizes, peak accounted memory, notes).
  virtual nlohmann::json info() const { return nlohmann::json::object(); }
};

}  // namespace zerosim::validate
