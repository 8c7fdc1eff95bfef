#pragma once
// A CommBackend that times every collective of a plan with the NCCL model (nccl_model.h):
// NCCL's algorithm and protocol choice, its latency and bandwidth, zerosim's launch and pipeline
// terms, and, when a Topology is given, the fabric factor of the routed flows (nccl_plan.h).
// No contention between collectives: each one is timed alone (the flow-level backend is where
// collectives share links). Drop-in replacement for AlphaBetaComm.
#include <cstdint>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "sim/cluster/topology.h"
#include "sim/collective/fixed_duration_comm.h"
#include "sim/collective/nccl_model.h"

namespace zerosim::nccl {

class NcclAnalyticalComm : public FixedDurationComm {
 public:
  // `topo` may be null (no fabric factor); if given it must outlive the backend.
  explicit NcclAnalyticalComm(const NcclModel& model, const Topology* topo = nullptr)
      : model_(model), topo_(topo) {}

  // Duration of one collective as this backend times it (cached per kind, bytes and group).
  SimTime duration(CollectiveKind kind, Bytes bytes, std::span<const std::int32_t> ranks);

 protected:
  SimTime collective_duration(const Plan& plan, std::uint32_t c) override;

 private:
  const NcclModel& model_;
  const Topology* topo_;
  std::map<std::tuple<int, Bytes, std::vector<std::int32_t>>, SimTime> cache_;
};

}  // namespace zerosim::nccl
