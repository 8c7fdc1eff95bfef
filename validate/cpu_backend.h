#pragma once
// The CPU backend: the plan's ops with real fp32 data on the host, for checking the replay logic
// without a GPU. Collectives move real data through a Comm (threads or MPI) and every result is
// checked against the same sum computed locally from the members' (deterministic) inputs, so a
// mismatched or misrouted collective is caught, not just a hang. Sizes are capped
// (max_elements per collective, Adam shard or copy): the point is order and correctness, not time.
//
//   compute   GEMMs run naively when m*n*k*count <= max_gemm_macs, else skipped (counted in info);
//             optimizer_step runs the CPU Adam (kernels/adam_cpu.h) on min(elements, max_elements)
//             fp32 parameters whose state persists across steps
//   collective the plan's bytes / 2 (16-bit elements) fp32 values, capped, split evenly over the
//             group where the collective splits (all_gather, reduce_scatter, all_to_all);
//             broadcast and reduce use group position 0 as root
//   copy      memcpy between two host buffers
//   alloc/free accounted (live bytes per category, peak), not allocated
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/host_adam_shard.h"
#include "validate/backend.h"
#include "validate/comm.h"

namespace zerosim::validate {

struct CpuBackendOptions {
  std::int64_t max_elements = 4096;
  std::int64_t max_gemm_macs = std::int64_t{1} << 22;
  bool verify = true;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(Comm& comm, CpuBackendOptions opt);
  std::string name() const override { return "cpu"; }
  std::string device() const override;
  void prepare(const ReplayPlan& plan, const RankOps& ops, const RankSchedule& sched) override;
  void begin_step() override;
  void issue(const PlanOp& op, int coll_seq) override;
  std::vector<OpTiming> end_step() override;
  nlohmann::json info() const override;

  // The value member `position` contributes at element i of collective number `seq` of group `group`
  // (small integers and quarters: exact in fp32, so any order of addition is exact too; the
  // checks still compare bit for bit).
  static float input_value(int position, int group, int seq, std::int64_t i);

 private:
  void run_collective(const PlanOp& op, int seq);
  void run_compute(const PlanOp& op);

  Comm& comm_;
  CpuBackendOptions opt_;
  const ReplayPlan* plan_ = nullptr;
  const RankOps* ops_ = nullptr;
  std::vector<OpTiming> timings_;
  double step_origin_ = 0;
  // Adam state for optimizer ops (by op id), persistent across steps.
  struct AdamState {
    kernels::HostAdamShard shard;
    std::int64_t step = 0;
  };
  std::map<int, AdamState> adam_;
  std::vector<float> a_, b_, c_, copy_src_, copy_dst_;
  std::map<std::string, std::int64_t> live_, peak_by_category_;
  std::int64_t live_total_ = 0, peak_total_ = 0;
  std::int64_t gemms_run_ = 0, gemms_skipped_ = 0, collectives_checked_ = 0, adam_params_ = 0;
};

}  // namespace zerosim::validate
