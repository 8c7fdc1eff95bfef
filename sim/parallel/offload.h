#pragma once
// ZeRO-Offload (Ren et al., USENIX ATC 2021, §4) and ZeRO-Infinity (Rajbhandari et al., SC21) as
// DeepSpeed runs them: each reduced gradient bucket's partition goes to the host in 16 bits as
// soon as it is reduced (on the reduction's stream: DeepSpeed's non-blocking copy into the
// pinned fp32 buffer is queued behind the reduction), the step runs on the CPU (DeepSpeed's CPU
// Adam), and the updated 16-bit partition comes back over PCIe before the parameter all-gather.
// ZeRO-Infinity keeps the optimizer states on NVMe and swaps them around the CPU step; with
// offload_param the stage-3 partition lives on the host (or NVMe) and is copied in before each
// gather.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/parallel/framework_policy.h"
#include "sim/parallel/stage_template.h"

namespace zerosim::plan_detail {

bool offloads_optimizer(const Scenario& s);
bool offloads_params(const Scenario& s);

// Host and NVMe bytes one rank keeps for the whole run (not part of the GPU timeline).
void offload_memory(const Scenario& s, StagePlan& info);

class Offload {
 public:
  Offload(Emitter& e, const Scenario& s, const GradientPolicy& grads, int dp_subgroup)
      : e_(e), s_(s), grads_(grads), dp_subgroup_(dp_subgroup) {}

  // A PCIe (or NVMe) copy of `bytes` on `stream`.
  std::int32_t host_copy(WorkKind k, Bytes bytes, Stream stream, const std::string& name,
                         const std::vector<std::int32_t>& deps);
  // This rank's partition of a reduced bucket of `elements` goes to the host after `reduction`.
  void gradients(std::int64_t elements, std::int32_t reduction, bool accumulating);

  // The CPU step over this rank's `elements`, then the updated partition back to the GPU.
  struct StepEnd {
    std::int32_t ready;        // the op after which the updated 16-bit partition is on the GPU
    Stream gather_stream;      // where the parameter all-gather after it goes
  };
  StepEnd step(std::int64_t elements, const std::vector<std::int32_t>& after);

 private:
  Emitter& e_;
  const Scenario& s_;
  const GradientPolicy& grads_;
  int dp_subgroup_;
  std::int32_t last_grad_copy_ = -1;
};

}  // namespace zerosim::plan_detail
