#pragma once
// Reads a "zerosim-plan/1" document (sim/report/plan_export.h, written by `zerosim plan`) into
// plain structs the replay works on. Nothing here knows about GPUs, MPI or threads.
//
// What is checked, each failure a PlanError naming the JSON path ("ranks[0].ops[35].group: ..."):
// the format string; op ids equal to their index in the rank's list; known kinds, streams and
// collective names; deps inside the rank and not the op itself; group ids in range; a collective's
// rank is a member of its group; sizes >= 0; the plan is not folded (a folded plan, sim.ranks =
// folded, holds one data-parallel replica standing for all: groups with "cluster_ranks" wider
// than "ranks" cannot be replayed, since hardware runs every rank). What is *not* checked here (schedule.h does it, since
// it needs every rank): that collectives match across ranks and that the plan cannot deadlock.
//
// Fields the exporter may add later are read when present and ignored when unknown:
//   copy ops: "bytes" (host<->device copy size);   compute ops: "elementwise_bytes";
//   send_recv collectives: "src" and "dst" (world ranks). Without them the group's first rank
//   sends to its second, as sim/core/plan.h orders the members of a SendRecv (send first).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim::validate {

class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class OpKind { Compute, Collective, Copy, Alloc, Free };
// The streams of sim/core/plan.h, with the names the exporter writes (pp-recv: pipeline
// receives, apart from sends so that a send waiting for its peer never holds up a receive).
enum class StreamId { Compute, DpComm, TpComm, PpComm, PpRecv, H2D, D2H, Cpu };
inline constexpr int kNumStreams = 8;
enum class CollKind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv };

const char* to_string(OpKind k);
const char* to_string(StreamId s);  // "compute", "dp-comm", ... as the exporter writes them
const char* to_string(CollKind k);  // "all_reduce", ... as NCCL names them (sim/core/plan.h)

struct GemmShape {
  std::string name;
  std::int64_t m = 0, n = 0, k = 0, count = 1;  // C[m x n] = A[m x k] * B[k x n], `count` times
};

struct PlanOp {
  int id = 0;  // index within the rank
  OpKind kind = OpKind::Compute;
  StreamId stream = StreamId::Compute;
  std::string name, phase;
  std::vector<int> deps;  // explicit deps, ids within the rank
  // compute
  std::string work;  // attention_forward, optimizer_step, ...
  std::vector<GemmShape> gemms;
  double attention_flops = 0;
  double elementwise_bytes = 0;
  std::int64_t elements = 0;  // optimizer_step: parameters this rank updates
  // collective
  CollKind collective = CollKind::AllReduce;
  int group = -1;
  int src = -1, dst = -1;  // send_recv: world ranks (resolved, never -1 after reading)
  // collective (NCCL's per-rank buffer size), copy, alloc, free
  std::int64_t bytes = 0;
  std::string category;  // alloc / free
  double predicted_start_s = 0, predicted_duration_s = 0;
};

struct PlanGroup {
  int id = 0;
  std::string name, kind;  // kind: dp | tp | pp
  std::vector<int> ranks;  // world ranks, in group order (NCCL rank = position)
  int position_of(int world_rank) const;  // -1 if not a member
};

struct RankOps {
  int rank = 0;
  std::vector<PlanOp> ops;
};

struct ReplayPlan {
  int num_ranks = 0;
  nlohmann::json scenario;  // the resolved scenario the plan came from
  std::vector<PlanGroup> groups;
  std::vector<RankOps> ranks;  // the ranks present in the file, ascending

  const RankOps* find_rank(int rank) const;  // nullptr if the file does not hold it
  bool has_all_ranks() const { return static_cast<int>(ranks.size()) == num_ranks; }
  // Bytes per element of the 16-bit training precision (2), as the collectives carry it.
  int element_bytes() const { return 2; }
  std::string precision() const;  // "bf16" or "fp16" (scenario.training.precision; bf16 if absent)
};

ReplayPlan parse_plan(const nlohmann::json& doc);
ReplayPlan read_plan_file(const std::string& path);  // PlanError if unreadable or malformed

}  // namespace zerosim::validate
