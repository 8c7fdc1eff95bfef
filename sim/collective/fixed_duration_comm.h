#pragma once
// The completion queue shared by the closed-form backends (alpha-beta, NCCL, the degraded-NIC
// what-if): a collective's duration is known the moment it starts because nothing contends, so
// the backend only has to remember when each one ends. Subclasses say how long collective `c`
// takes; this class owns the ordering the engine's fingerprints depend on: completions at the
// same time come out by ascending collective id.
#include <cstdint>
#include <queue>
#include <vector>

#include "sim/core/engine.h"

namespace zerosim {

class FixedDurationComm : public CommBackend {
 public:
  void start(const Plan& plan, std::uint32_t c, SimTime now) final {
    heap_.push({now + collective_duration(plan, c), c});
  }
  SimTime next_completion() const final { return heap_.empty() ? kNever : heap_.top().end; }
  void pop_completed(SimTime now, std::vector<std::uint32_t>& done) final {
    while (!heap_.empty() && heap_.top().end == now) {
      done.push_back(heap_.top().c);
      heap_.pop();
    }
  }

 protected:
  // How long collective `c` of `plan` runs once all its members have arrived.
  virtual SimTime collective_duration(const Plan& plan, std::uint32_t c) = 0;

 private:
  struct Pending {
    SimTime end;
    std::uint32_t c;
    bool operator>(const Pending& o) const { return end != o.end ? end > o.end : c > o.c; }
  };
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> heap_;
};

}  // namespace zerosim
