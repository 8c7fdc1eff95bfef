#pragma once
// The GPU backend: one rank's ops on one GPU, timed with CUDA events.
//
//   streams     one CUDA stream per plan stream the rank uses; an explicit dep on another stream
//               is a cudaStreamWaitEvent on that op's end event
//   compute     each GEMM of the op (`count` times) as cublasGemmEx, bf16 or fp16 per the plan's
//               precision, fp32 accumulation (CUBLAS_COMPUTE_32F), row-major C[m x n] = A B;
//               attention_flops as strided-batched GEMMs of the attention shapes (QK^T and PV
//               with the scenario's seq_length and head_dim, batch = flops / (4 s^2 d)), an
//               approximation of flash attention's fused kernel; elementwise_bytes (when the
//               plan has them) as a device-to-device copy of that many bytes read + written;
//               optimizer_step as the sharded Adam kernel (kernels/adam_cuda.h) on `elements`
//               fp32 master/m/v, a gradient of GpuBackendOptions::adam_grad and a 16-bit copy
//   collective  NCCL on the group's communicator (nccl_comms.h), the plan's bytes as 16-bit
//               elements, in place (all_gather / reduce_scatter at the rank's offset), broadcast
//               and reduce rooted at group position 0, all_to_all as grouped send/recv
//   copy        cudaMemcpyAsync host (pinned) -> device on the h2d stream, device -> host on d2h
//   cpu stream  ops run on the host in stream order (cudaLaunchHostFunc); optimizer_step there is
//               the CPU Adam (kernels/adam_cpu.h) split over host threads (ZeRO-Offload)
//   alloc/free  accounted, not allocated: the replay's own buffers are sized once in prepare()
//
// Watchdog: end_step() polls each stream's op end events; if none completes for
// GpuBackendOptions::timeout, or a communicator reports an asynchronous error, the communicators
// are aborted and ReplayError names the op each unfinished stream is stuck at.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kernels/adam_shard.h"
#include "kernels/device_adam_shard.h"
#include "kernels/device_buffer.h"
#include "validate/backend.h"
#include "validate/comm.h"
#include "validate/gpu/nccl_comms.h"

namespace zerosim::validate::gpu {

struct GpuBackendOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  kernels::DType adam_grad = kernels::DType::F32;  // DeepSpeed steps on fp32 partition gradients
  bool emulate_attention = true;
  std::int64_t attention_chunk_bytes = std::int64_t{1} << 30;  // cap on the score buffer
  int cpu_threads = 0;  // host threads for CPU-stream Adam; 0 = all hardware threads
};

// Owning pinned host memory.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Selects CUDA device local_rank % device_count; throws ReplayError when there is none.
int select_device(int local_rank);
std::string device_name(int device);

class GpuBackend final : public Backend {
 public:
  // boot: a Comm over the plan's groups (MpiComm, or a 1-rank ThreadWorld for single-process runs).
  GpuBackend(Comm& boot, int local_rank, GpuBackendOptions opt);
  ~GpuBackend() override;

  std::string name() const override { return "gpu"; }
  std::string device() const override;
  void prepare(const ReplayPlan& plan, const RankOps& ops, const RankSchedule& sched) override;
  void begin_step() override;
  void issue(const PlanOp& op, int coll_seq) override;
  std::vector<OpTiming> end_step() override;
  nlohmann::json info() const override;

  struct HostAdamTask;  // a CPU-stream optimizer step (public for the host callback)

 private:
  struct StreamRes {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    kernels::DeviceBuffer<std::uint8_t> coll, coll2, copy_dev;
    PinnedBuffer copy_host;
    std::vector<int> issued;  // op ids issued this step, in order
  };
  StreamRes& res(StreamId s) { return streams_[static_cast<int>(s)]; }
  void run_compute(const PlanOp& op, StreamRes& s);
  void run_collective(const PlanOp& op, StreamRes& s);
  void run_gemm(StreamRes& s, std::int64_t m, std::int64_t n, std::int64_t k);
  void run_attention(StreamRes& s, double flops);

  Comm& boot_;
  GpuBackendOptions opt_;
  int device_ = 0;
  const ReplayPlan* plan_ = nullptr;
  const RankOps* ops_ = nullptr;
  std::unique_ptr<NcclComms> comms_;
  std::array<StreamRes, kNumStreams> streams_{};
  std::vector<bool> stream_used_ = std::vector<bool>(kNumStreams, false);
  std::vector<cudaEvent_t> begin_, end_;
  cudaEvent_t start_ = nullptr;
  bool fp16_ = false;
  kernels::DeviceBuffer<std::uint8_t> gemm_a_, gemm_b_, gemm_c_, attn_qk_, attn_s_, ew_src_, ew_dst_;
  std::int64_t seq_ = 0, head_dim_ = 0, attn_chunk_ = 0;
  // Adam on the GPU: one shard sized for the largest optimizer op.
  kernels::DeviceAdamShard adam_;
  std::int64_t adam_step_ = 0;
  std::map<int, std::unique_ptr<HostAdamTask>> host_adam_;
  std::int64_t accounted_live_ = 0, accounted_peak_ = 0;
  std::int64_t buffer_bytes_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace zerosim::validate::gpu
