#include "validate/gpu/gpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "kernels/adam_cpu.h"
#include "kernels/adam_cuda.h"
#include "kernels/cuda_check.h"
#include "kernels/host_adam_shard.h"
#include "validate/gpu/gpu_check.h"
#include "validate/gpu/nccl_collective.h"

namespace zerosim::validate::gpu {

struct GpuBackend::HostAdamTask {
  kernels::HostAdamShard shard;
  kernels::AdamParams params;
  int threads = 1;
};

namespace {

// Runs on a CUDA-owned host thread in stream order; must not call CUDA. Errors cannot propagate
// out of a host function, so arguments are checked before it is enqueued (same checks).
void CUDART_CB host_adam(void* data) {
  auto* t = static_cast<GpuBackend::HostAdamTask*>(data);
  const std::int64_t n = t->shard.size();
  const std::int64_t per = (n + t->threads - 1) / t->threads;
  std::vector<std::thread> pool;
  for (int i = 0; i < t->threads; ++i) {
    const std::int64_t b = std::min(n, i * per), e = std::min(n, b + per);
    if (b >= e) break;
    pool.emplace_back([t, b, e] { kernels::sharded_adam_cpu(t->shard.view(b, e), t->params); });
  }
  for (auto& th : pool) th.join();
}

std::vector<std::uint16_t> random_16bit(std::size_t n, bool fp16) {
  // Values in [-1, 1): realistic tensor-core power draw (zeros would flatter the GEMMs).
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::uint16_t> out(n);
  for (auto& x : out) {
    const float f = u(rng);
    std::uint32_t b = 0;
    std::memcpy(&b, &f, 4);
    if (fp16) {
      // Coarse fp16 from the float's top bits: exponent in range for |f| in [2^-14, 1).
      const std::uint32_t sign = (b >> 16) & 0x8000u;
      const int e = static_cast<int>((b >> 23) & 0xFF) - 127 + 15;
      x = static_cast<std::uint16_t>(e <= 0 ? sign : sign | (e << 10) | ((b >> 13) & 0x3FFu));
    } else {
      x = static_cast<std::uint16_t>(b >> 16);
    }
  }
  return out;
}

void fill_random(kernels::DeviceBuffer<std::uint8_t>& buf, bool fp16) {
  if (buf.size() == 0) return;
  const auto host = random_16bit(buf.size() / 2, fp16);
  ZEROSIM_CUDA_CHECK(cudaMemcpy(buf.data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
}

}  // namespace

PinnedBuffer::PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) ZEROSIM_CUDA_CHECK(cudaMallocHost(&data_, bytes));
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);  // errors cannot be reported from a destructor
}

int select_device(int local_rank) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    throw ReplayError(std::string("no usable CUDA device (cudaGetDeviceCount: ") +
                      (err == cudaSuccess ? "0 devices" : cudaGetErrorName(err)) + ")");
  }
  const int dev = local_rank % count;
  ZEROSIM_CUDA_CHECK(cudaSetDevice(dev));
  return dev;
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  ZEROSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

GpuBackend::GpuBackend(Comm& boot, int local_rank, GpuBackendOptions opt)
    : boot_(boot), opt_(opt), device_(select_device(local_rank)) {}

GpuBackend::~GpuBackend() {
  // Streams may still hold work if a step failed; the communicators were aborted then.
  comms_.reset();
  for (cudaEvent_t e : begin_) cudaEventDestroy(e);
  for (cudaEvent_t e : end_) cudaEventDestroy(e);
  if (start_ != nullptr) cudaEventDestroy(start_);
  for (auto& s : streams_) {
    if (s.blas != nullptr) cublasDestroy(s.blas);
    if (s.stream != nullptr) cudaStreamDestroy(s.stream);
  }
}

std::string GpuBackend::device() const { return device_name(device_); }

void GpuBackend::prepare(const ReplayPlan& plan, const RankOps& ops, const RankSchedule&) {
  plan_ = &plan;
  ops_ = &ops;
  fp16_ = plan.precision() == "fp16";

  // Sizes of everything the ops touch.
  std::int64_t a = 0, b = 0, c = 0, adam = 0, ew = 0;
  std::array<std::int64_t, kNumStreams> coll{}, coll2{}, copy{};
  double max_attention = 0;
  for (const PlanOp& op : ops.ops) {
    stream_used_[static_cast<int>(op.stream)] = true;
    switch (op.kind) {
      case OpKind::Compute:
        for (const GemmShape& g : op.gemms) {
          a = std::max(a, g.m * g.k);
          b = std::max(b, g.k * g.n);
          c = std::max(c, g.m * g.n);
        }
        max_attention = std::max(max_attention, op.attention_flops);
        ew = std::max(ew, static_cast<std::int64_t>(op.elementwise_bytes / 2));
        if (op.work == "optimizer_step" && op.stream != StreamId::Cpu) adam = std::max(adam, op.elements);
        break;
      case OpKind::Collective: {
        const int s = static_cast<int>(op.stream);
        coll[s] = std::max(coll[s], op.bytes);
        if (op.collective == CollKind::AllToAll) coll2[s] = std::max(coll2[s], op.bytes);
        break;
      }
      case OpKind::Copy: {
        const int s = static_cast<int>(op.stream);
        copy[s] = std::max(copy[s], op.bytes);
        break;
      }
      default:
        break;
    }
  }

  ZEROSIM_CUDA_CHECK(cudaEventCreate(&start_));
  for (int s = 0; s < kNumStreams; ++s) {
    if (!stream_used_[s] && s != static_cast<int>(StreamId::Compute)) continue;
    StreamRes& r = streams_[s];
    ZEROSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    ZEROSIM_CUBLAS_CHECK(cublasCreate(&r.blas));
    ZEROSIM_CUBLAS_CHECK(cublasSetStream(r.blas, r.stream));
    r.coll = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(coll[s]));
    r.coll2 = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(coll2[s]));
    const bool host_copy = s == static_cast<int>(StreamId::H2D) || s == static_cast<int>(StreamId::D2H);
    r.copy_dev = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(copy[s] * (host_copy ? 1 : 2)));
    if (host_copy) r.copy_host = PinnedBuffer(static_cast<std::size_t>(copy[s]));
    if (coll[s] > 0) ZEROSIM_CUDA_CHECK(cudaMemset(r.coll.data(), 0x3c, r.coll.bytes()));
    buffer_bytes_ += coll[s] + coll2[s] + static_cast<std::int64_t>(r.copy_dev.bytes());
  }
  gemm_a_ = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(a * 2));
  gemm_b_ = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(b * 2));
  gemm_c_ = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(c * 2));
  fill_random(gemm_a_, fp16_);
  fill_random(gemm_b_, fp16_);
  buffer_bytes_ += 2 * (a + b + c);

  if (max_attention > 0 && opt_.emulate_attention) {
    const auto& model = plan.scenario.is_object() ? plan.scenario.value("model", nlohmann::json::object())
                                                  : nlohmann::json::object();
    seq_ = model.value("seq_length", std::int64_t{0});
    const std::int64_t hidden = model.value("hidden_size", std::int64_t{0});
    const std::int64_t heads = model.value("num_attention_heads", std::int64_t{0});
    // The echo names head_dim only where it is not hidden / heads (Gemma's 256).
    head_dim_ = model.value("head_dim", heads > 0 ? hidden / heads : std::int64_t{0});
    if (seq_ > 0 && head_dim_ > 0) {
      attn_chunk_ = std::max<std::int64_t>(1, opt_.attention_chunk_bytes / (seq_ * seq_ * 2));
      const auto batches = static_cast<std::int64_t>(std::llround(max_attention / (4.0 * seq_ * seq_ * head_dim_)));
      attn_chunk_ = std::min(attn_chunk_, std::max<std::int64_t>(1, batches));
      attn_qk_ = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(2 * attn_chunk_ * seq_ * head_dim_ * 2));
      attn_s_ = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(attn_chunk_ * seq_ * seq_ * 2));
      fill_random(attn_qk_, fp16_);
      buffer_bytes_ += static_cast<std::int64_t>(attn_qk_.bytes() + attn_s_.bytes());
    } else {
      notes_.push_back("attention_flops not replayed: the plan's scenario lacks model.seq_length / head size");
    }
  } else if (max_attention > 0) {
    notes_.push_back("attention_flops not replayed (emulation off)");
  }
  if (ew > 0) {
    ew_src_ = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(ew));
    ew_dst_ = kernels::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(ew));
    buffer_bytes_ += 2 * ew;
  }
  if (adam > 0) {
    const kernels::DType copy = fp16_ ? kernels::DType::F16 : kernels::DType::BF16;
    adam_ = kernels::DeviceAdamShard(adam, opt_.adam_grad, copy);
    ZEROSIM_CUDA_CHECK(cudaMemset(adam_.grad.data(), 0x11, adam_.grad.bytes()));
    buffer_bytes_ += static_cast<std::int64_t>(adam_.bytes());
  }
  for (const PlanOp& op : ops.ops) {
    if (op.stream == StreamId::Cpu && op.work == "optimizer_step" && op.elements > 0) {
      auto t = std::make_unique<HostAdamTask>();
      t->shard = kernels::HostAdamShard(op.elements);
      t->shard.fill_grad(1e-3f);
      t->threads = opt_.cpu_threads > 0 ? opt_.cpu_threads
                                        : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
      host_adam_[op.id] = std::move(t);
    }
  }

  begin_.assign(ops.ops.size(), nullptr);
  end_.assign(ops.ops.size(), nullptr);
  for (std::size_t i = 0; i < ops.ops.size(); ++i) {
    ZEROSIM_CUDA_CHECK(cudaEventCreate(&begin_[i]));
    ZEROSIM_CUDA_CHECK(cudaEventCreate(&end_[i]));
  }
  ZEROSIM_CUDA_CHECK(cudaDeviceSynchronize());
  // Collective over every rank (each process reaches prepare() at the same point of the replay).
  comms_ = std::make_unique<NcclComms>(boot_, opt_.timeout);
}

void GpuBackend::begin_step() {
  accounted_live_ = 0;
  cudaStream_t origin = res(StreamId::Compute).stream;
  ZEROSIM_CUDA_CHECK(cudaEventRecord(start_, origin));
  for (int s = 0; s < kNumStreams; ++s) {
    streams_[s].issued.clear();
    if (streams_[s].stream != nullptr && streams_[s].stream != origin) {
      ZEROSIM_CUDA_CHECK(cudaStreamWaitEvent(streams_[s].stream, start_, 0));
    }
  }
}

void GpuBackend::issue(const PlanOp& op, int) {
  StreamRes& s = res(op.stream);
  for (int d : op.deps) {
    if (ops_->ops[d].stream != op.stream) ZEROSIM_CUDA_CHECK(cudaStreamWaitEvent(s.stream, end_[d], 0));
  }
  ZEROSIM_CUDA_CHECK(cudaEventRecord(begin_[op.id], s.stream));
  switch (op.kind) {
    case OpKind::Compute:
      run_compute(op, s);
      break;
    case OpKind::Collective:
      run_collective(op, s);
      break;
    case OpKind::Copy:
      if (op.bytes > 0) {
        const auto n = static_cast<std::size_t>(op.bytes);
        if (op.stream == StreamId::H2D) {
          ZEROSIM_CUDA_CHECK(cudaMemcpyAsync(s.copy_dev.data(), s.copy_host.data(), n, cudaMemcpyHostToDevice, s.stream));
        } else if (op.stream == StreamId::D2H) {
          ZEROSIM_CUDA_CHECK(cudaMemcpyAsync(s.copy_host.data(), s.copy_dev.data(), n, cudaMemcpyDeviceToHost, s.stream));
        } else {
          ZEROSIM_CUDA_CHECK(cudaMemcpyAsync(s.copy_dev.data() + n, s.copy_dev.data(), n, cudaMemcpyDeviceToDevice, s.stream));
        }
      }
      break;
    case OpKind::Alloc:
      accounted_live_ += op.bytes;
      accounted_peak_ = std::max(accounted_peak_, accounted_live_);
      break;
    case OpKind::Free:
      accounted_live_ -= op.bytes;
      break;
  }
  ZEROSIM_CUDA_CHECK(cudaGetLastError());
  ZEROSIM_CUDA_CHECK(cudaEventRecord(end_[op.id], s.stream));
  s.issued.push_back(op.id);
}

void GpuBackend::run_gemm(StreamRes& s, std::int64_t m, std::int64_t n, std::int64_t k) {
  // Row-major C[m x n] = A[m x k] B[k x n] is column-major C^T = B^T A^T.
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = fp16_ ? CUDA_R_16F : CUDA_R_16BF;
  ZEROSIM_CUBLAS_CHECK(cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                                    static_cast<int>(m), static_cast<int>(k), &alpha, gemm_b_.data(), t,
                                    static_cast<int>(n), gemm_a_.data(), t, static_cast<int>(k), &beta,
                                    gemm_c_.data(), t, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
}

void GpuBackend::run_attention(StreamRes& s, double flops) {
  if (attn_s_.size() == 0) return;
  auto batches = static_cast<std::int64_t>(std::llround(flops / (4.0 * seq_ * seq_ * head_dim_)));
  batches = std::max<std::int64_t>(batches, 1);
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = fp16_ ? CUDA_R_16F : CUDA_R_16BF;
  const int sq = static_cast<int>(seq_), d = static_cast<int>(head_dim_);
  auto* q = attn_qk_.data();
  auto* k = attn_qk_.data() + attn_qk_.size() / 2;
  for (std::int64_t done = 0; done < batches; done += attn_chunk_) {
    const int nb = static_cast<int>(std::min(attn_chunk_, batches - done));
    // S^T (s x s) = K_c^T Q_c, with Q, K row-major [s x d] (column-major d x s, ld d).
    ZEROSIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        s.blas, CUBLAS_OP_T, CUBLAS_OP_N, sq, sq, d, &alpha, k, t, d, seq_ * head_dim_, q, t, d,
        seq_ * head_dim_, &beta, attn_s_.data(), t, sq, seq_ * seq_, nb, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
    // O^T (d x s) = V_c S^T, written over K (V = Q).
    ZEROSIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        s.blas, CUBLAS_OP_N, CUBLAS_OP_N, d, sq, sq, &alpha, q, t, d, seq_ * head_dim_, attn_s_.data(),
        t, sq, seq_ * seq_, &beta, k, t, d, seq_ * head_dim_, nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

void GpuBackend::run_compute(const PlanOp& op, StreamRes& s) {
  if (op.stream == StreamId::Cpu) {
    auto it = host_adam_.find(op.id);
    if (it != host_adam_.end()) {
      HostAdamTask& t = *it->second;
      t.params = kernels::AdamParams{};
      t.params.weight_decay = 0.01f;
      t.params.step = ++adam_step_;
      kernels::check_adam_args("cpu-stream optimizer_step", t.shard.view(), t.params);
      ZEROSIM_CUDA_CHECK(cudaLaunchHostFunc(s.stream, host_adam, &t));
    }
    return;
  }
  for (const GemmShape& g : op.gemms) {
    for (std::int64_t i = 0; i < g.count; ++i) run_gemm(s, g.m, g.n, g.k);
  }
  if (op.attention_flops > 0 && opt_.emulate_attention) run_attention(s, op.attention_flops);
  if (op.elementwise_bytes > 0 && ew_src_.size() > 0) {
    const auto n = static_cast<std::size_t>(op.elementwise_bytes / 2);
    ZEROSIM_CUDA_CHECK(cudaMemcpyAsync(ew_dst_.data(), ew_src_.data(), n, cudaMemcpyDeviceToDevice, s.stream));
  }
  if (op.work == "optimizer_step" && op.elements > 0) {
    kernels::AdamParams p;
    p.weight_decay = 0.01f;
    p.step = ++adam_step_;
    kernels::launch_sharded_adam_async(adam_.view(0, op.elements), p, s.stream);
  }
}

void GpuBackend::run_collective(const PlanOp& op, StreamRes& s) {
  const int g = op.group;
  NcclCall c;
  c.kind = op.collective;
  c.buf = s.coll.data();
  c.recv_buf = s.coll2.data();
  c.dtype = fp16_ ? ncclFloat16 : ncclBfloat16;
  c.count = static_cast<std::size_t>(op.bytes) / nccl_type_size(c.dtype);
  c.n = comms_->size(g);
  c.position = comms_->position(g);
  if (op.collective == CollKind::SendRecv) {
    c.src = plan_->groups[g].position_of(op.src);
    c.dst = plan_->groups[g].position_of(op.dst);
  }
  launch_nccl(c, comms_->get(g), s.stream);
  comms_->wait(g, std::string("enqueueing ") + to_string(op.collective) + " (op " +
                      std::to_string(op.id) + " '" + op.name + "')");
}

std::vector<OpTiming> GpuBackend::end_step() {
  using clock = std::chrono::steady_clock;
  std::array<std::size_t, kNumStreams> next{};
  auto last_progress = clock::now();
  auto last_nccl_check = clock::now();
  for (;;) {
    bool progress = false, all_done = true;
    for (int s = 0; s < kNumStreams; ++s) {
      auto& issued = streams_[s].issued;
      while (next[s] < issued.size()) {
        const cudaError_t e = cudaEventQuery(end_[issued[next[s]]]);
        if (e == cudaErrorNotReady) break;
        ZEROSIM_CUDA_CHECK(e);
        ++next[s];
        progress = true;
      }
      if (next[s] < issued.size()) all_done = false;
    }
    if (all_done) break;
    const auto now = clock::now();
    if (progress) last_progress = now;
    const bool check_nccl = now - last_nccl_check > std::chrono::milliseconds(100);
    const std::string nccl_errors = check_nccl ? comms_->async_errors() : std::string();
    if (check_nccl) last_nccl_check = now;
    if (!nccl_errors.empty() || now - last_progress > opt_.timeout) {
      std::ostringstream msg;
      msg << "rank " << boot_.rank() << ": ";
      if (!nccl_errors.empty()) {
        msg << "NCCL reports an error (" << nccl_errors << ")";
      } else {
        msg << "no op finished for " << opt_.timeout.count() << " ms (hung collective?)";
      }
      msg << "; unfinished streams:";
      for (int s = 0; s < kNumStreams; ++s) {
        const auto& issued = streams_[s].issued;
        if (next[s] >= issued.size()) continue;
        const PlanOp& op = ops_->ops[issued[next[s]]];
        msg << "\n  " << to_string(static_cast<StreamId>(s)) << " at op " << op.id << " '" << op.name << "'";
        if (op.kind == OpKind::Collective) {
          msg << " (" << to_string(op.collective) << " on group " << plan_->groups[op.group].name << ", "
              << op.bytes << " B)";
        }
      }
      msg << "\ncommunicators aborted.";
      comms_->abort_all();
      throw ReplayError(msg.str());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<OpTiming> t(ops_->ops.size());
  for (const PlanOp& op : ops_->ops) {
    if (op.kind == OpKind::Alloc || op.kind == OpKind::Free) continue;
    float start_ms = 0, dur_ms = 0;
    ZEROSIM_CUDA_CHECK(cudaEventElapsedTime(&start_ms, start_, begin_[op.id]));
    ZEROSIM_CUDA_CHECK(cudaEventElapsedTime(&dur_ms, begin_[op.id], end_[op.id]));
    t[op.id] = {start_ms * 1e-3, dur_ms * 1e-3};
  }
  return t;
}

nlohmann::json GpuBackend::info() const {
  return {{"device", device()},
          {"cuda_device", device_},
          {"precision", fp16_ ? "fp16" : "bf16"},
          {"adam_grad", std::string(kernels::to_string(opt_.adam_grad))},
          {"attention_emulated", attn_s_.size() > 0},
          {"replay_buffer_bytes", buffer_bytes_},
          {"accounted_peak_bytes", accounted_peak_},
          {"notes", notes_}};
}

}  // namespace zerosim::validate::gpu
