#pragma once
// A CommBackend that times every collective of a plan with the NCCL model (nccl_model.h):
// NCCL's algorithm and protocol choice, its latency and bandwidth, zerosim's launch and pipeline
// terms, and, when a Topology is given, the fabric factor of the routed flows (nccl_plan.h).
// No contention between collectives: each one is timed alone (the flow-level backend is where
// collectives share links). Drop-in replacement for AlphaBetaComm.
#include <cstdint>
#include <map>
#include <queue>
#include <utility>
#include <vector>

#include "sim/cluster/topology.h"
#include "sim/collective/nccl_model.h"
#include "sim/core/engine.h"

namespace zerosim::nccl {

class NcclAnalyticalComm : public CommBackend {
 public:
  // `topo` may be null (no fabric factor); if given it must outlive the backend.
  explicit NcclAnalyticalComm(const NcclModel& model, const Topology* topo = nullptr)
      : model_(model), topo_(topo) {}
  void start(const Plan& plan, std::uint32_t c, SimTime now) override;
  SimTime next_completion() const override;
  void pop_completed(SimTime now, std::vector<std::uint32_t>& done) override;

  // Duration of one collective as this backend times it (cached per kind, bytes and group).
  SimTime duration(CollectiveKind kind, Bytes bytes, std::span<const std::int32_t> ranks);

 private:
  struct Pending {
    SimTime end;
    std::uint32_t c;
    bool operator>(const Pending& o) const { return end != o.end ? end > o.end : c > o.c; }
  };
  const NcclModel& model_;
  const Topology* topo_;
  std::map<std::tuple<int, Bytes, std::vector<std::int32_t>>, SimTime> cache_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> heap_;
};

}  // namespace zerosim::nccl
