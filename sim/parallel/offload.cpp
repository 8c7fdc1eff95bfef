#include "sim/parallel/offload.h"

#include <algorithm>

namespace zerosim::plan_detail {

bool offloads_optimizer(const Scenario& s) {
  return s.zero.offload_optimizer != OffloadDevice::None;
}
bool offloads_params(const Scenario& s) { return s.zero.offload_param != OffloadDevice::None; }

// Host, with the optimizer offloaded to the CPU: the fp32 master weights, Adam's two moments and
// the fp32 gradient partition (16 B per parameter, ZeRO-Offload §4.1). On NVMe: the master weights
// and moments (12 B); the host keeps the fp32 gradients and the sub-group being stepped
// (DeepSpeed's sub_group_size, 1e9 by default). A stage-3 parameter partition offloaded to the
// host is 2 B per parameter; on NVMe the host keeps DeepSpeed's parameter swap buffers
// (offload_param buffer_count 5 x buffer_size 1e8 elements).
void offload_memory(const Scenario& s, StagePlan& info) {
  const std::int64_t part = info.dp_partition;
  const ZeroConfig& z = s.zero;
  if (z.offload_optimizer == OffloadDevice::Cpu) info.host_bytes += 16 * part;
  if (z.offload_optimizer == OffloadDevice::Nvme) {
    info.nvme_bytes += 12 * part;
    info.host_bytes += 4 * part + 12 * std::min<std::int64_t>(part, 1'000'000'000);
  }
  if (z.offload_param == OffloadDevice::Cpu) info.host_bytes += 2 * part;
  if (z.offload_param == OffloadDevice::Nvme) {
    info.nvme_bytes += 2 * part;
    info.host_bytes += 2 * std::min<std::int64_t>(part, 5 * 100'000'000LL);
  }
}

std::int32_t Offload::host_copy(WorkKind k, Bytes bytes, Stream stream, const std::string& name,
                                const std::vector<std::int32_t>& deps) {
  return e_.work_op(OpKind::Copy, {k, bytes, 0}, stream, Phase::Communication, name, deps);
}

void Offload::gradients(std::int64_t elements, std::int32_t reduction, bool accumulating) {
  const Bytes share =
      2 * ceil_div(elements, s_.zero.mics_shard_size > 0 ? dp_subgroup_ : s_.parallel.dp_cp());
  const Stream stream = grads_.stream;
  std::int32_t after = reduction;
  if (s_.zero.stage <= 2 && accumulating && grads_.when == ReduceWhen::EveryBackward) {
    // Stage 2 accumulates a later micro-batch's gradients through the GPU: the host's running
    // sum comes back, is added on the GPU and goes out again
    // (DeepSpeed stage_1_and_2.py, async_accumulate_grad_in_cpu_via_gpu).
    after = host_copy(WorkKind::HostToDevice, share, stream, "grad accumulate h2d", {after});
  }
  last_grad_copy_ = host_copy(WorkKind::DeviceToHost, share, stream, "grad d2h", {after});
}

Offload::StepEnd Offload::step(std::int64_t elements, const std::vector<std::int32_t>& after) {
  const ZeroConfig& z = s_.zero;
  const bool nvme = z.offload_optimizer == OffloadDevice::Nvme;
  const bool dpu = z.delayed_param_update;
  // ZeRO-Infinity swaps the fp32 master weights and both Adam moments in before the step and
  // out after it (12 bytes each way per parameter); a parameter partition on NVMe is written too.
  Bytes swapped = nvme ? 2 * 12 * elements : 0;
  if (z.offload_param == OffloadDevice::Nvme) swapped += 2 * elements;
  // Without DPU the CPU waits for this step's last gradient copy. With DPU (ZeRO-Offload §4.2)
  // it updates with the previous step's gradients, already on the host when this step begins,
  // so it runs beside this step's forward and backward; the steady-state step is then as long
  // as the longer of the two.
  std::vector<std::int32_t> deps;
  if (!dpu) {
    deps = after;
    if (last_grad_copy_ >= 0) deps.push_back(last_grad_copy_);
  }
  const std::int32_t step =
      e_.work_op(OpKind::Compute, {WorkKind::CpuOptimizerStep, elements, swapped}, Stream::Cpu,
                 Phase::Optimizer,
                 dpu ? "cpu optimizer step (previous step's gradients)" : "cpu optimizer step",
                 deps);
  std::int32_t ready = step;
  if (!offloads_params(s_)) {
    // The updated 16-bit partition back into the GPU's parameters.
    ready = host_copy(WorkKind::HostToDevice, 2 * elements, Stream::H2D, "param h2d", {step});
  }
  // With DPU the next forward does not wait for these parameters, so the gather is issued on the
  // side stream instead of blocking the compute stream.
  return {ready, dpu ? Stream::DpComm : Stream::Compute};
}

}  // namespace zerosim::plan_detail
