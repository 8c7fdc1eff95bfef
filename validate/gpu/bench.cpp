#include "validate/gpu/bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <chrono>
#include <cstring>
#include <ctime>
#include <set>
#include <tuple>

#include "kernels/adam_cuda.h"
#include "kernels/cuda_check.h"
#include "kernels/device_adam_shard.h"
#include "kernels/device_buffer.h"
#include "validate/busbw.h"
#include "validate/gpu/gpu_backend.h"
#include "validate/gpu/gpu_check.h"
#include "validate/gpu/nccl_collective.h"
#include "validate/gpu/nccl_comms.h"

namespace zerosim::validate::gpu {
namespace {

using Bytes = kernels::DeviceBuffer<std::uint8_t>;

// Mean seconds per call of fn() on `stream`, after `warmup` untimed calls.
template <class Fn>
double time_on(cudaStream_t stream, int warmup, int iters, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a = nullptr, b = nullptr;
  ZEROSIM_CUDA_CHECK(cudaEventCreate(&a));
  ZEROSIM_CUDA_CHECK(cudaEventCreate(&b));
  ZEROSIM_CUDA_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) fn();
  ZEROSIM_CUDA_CHECK(cudaEventRecord(b, stream));
  ZEROSIM_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  ZEROSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  ZEROSIM_CUDA_CHECK(cudaEventDestroy(a));
  ZEROSIM_CUDA_CHECK(cudaEventDestroy(b));
  return static_cast<double>(ms) * 1e-3 / iters;
}

std::uint16_t bf16_of(float f) {
  std::uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  return static_cast<std::uint16_t>(b >> 16);  // exact for the small integers used here
}
float float_of_bf16(std::uint16_t h) {
  const std::uint32_t b = static_cast<std::uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &b, 4);
  return f;
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void log_line(const BenchOptions& o, int rank, const std::string& s) {
  if (o.log != nullptr && rank == 0) *o.log << s << std::endl;
}

// One collective launch on the world communicator: `count` bf16 elements per NCCL's convention.
void launch(CollKind op, std::uint8_t* buf, std::uint8_t* buf2, std::size_t count, int n, int pos,
            ncclComm_t comm, cudaStream_t st) {
  NcclCall c;
  c.kind = op;
  c.buf = buf;
  c.recv_buf = buf2;
  c.count = count;
  c.n = n;
  c.position = pos;
  launch_nccl(c, comm, st);
}

// The untimed correctness pass: member p contributes (p + 1) everywhere (chunk q of an all_to_all
// input: (p + 1) * 8 + q); small integers, exact in bf16.
void check_collective(CollKind op, std::size_t count, int n, int pos, ncclComm_t comm,
                      cudaStream_t st, NcclComms& comms) {
  const std::size_t part = count / static_cast<std::size_t>(n);
  std::vector<std::uint16_t> host(count);
  for (std::size_t i = 0; i < count; ++i) {
    const float v = op == CollKind::AllToAll ? static_cast<float>((pos + 1) * 8 + static_cast<int>(i / part))
                                             : static_cast<float>(pos + 1);
    host[i] = bf16_of(v);
  }
  Bytes buf(count * 2), buf2(count * 2);
  ZEROSIM_CUDA_CHECK(cudaMemcpy(buf.data(), host.data(), count * 2, cudaMemcpyHostToDevice));
  launch(op, buf.data(), buf2.data(), count, n, pos, comm, st);
  comms.wait(0, std::string("check of ") + to_string(op));
  ZEROSIM_CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<std::uint16_t> out(count);
  ZEROSIM_CUDA_CHECK(cudaMemcpy(out.data(), op == CollKind::AllToAll ? buf2.data() : buf.data(),
                                count * 2, cudaMemcpyDeviceToHost));
  const float sum = static_cast<float>(n * (n + 1) / 2);
  // What element i must hold afterwards; NaN where NCCL makes no promise (outside this rank's
  // part of an in-place reduce_scatter, or a non-root's buffer after reduce).
  auto expect = [&](std::size_t i) -> float {
    const float any = std::numeric_limits<float>::quiet_NaN();
    switch (op) {
      case CollKind::AllReduce: return sum;
      case CollKind::AllGather: return static_cast<float>(i / part + 1);
      case CollKind::ReduceScatter: return i / part == static_cast<std::size_t>(pos) ? sum : any;
      case CollKind::Broadcast: return 1.0f;
      case CollKind::Reduce: return pos == 0 ? sum : any;
      case CollKind::AllToAll: return static_cast<float>((i / part + 1) * 8 + pos);
      default: return any;
    }
  };
  for (std::size_t i = 0; i < part * n; ++i) {
    const float want = expect(i);
    if (!std::isnan(want) && float_of_bf16(out[i]) != want) {
      throw ReplayError(std::string("bench: ") + to_string(op) + " returned a wrong result at element " +
                        std::to_string(i) + " (" + std::to_string(float_of_bf16(out[i])) + ", expected " +
                        std::to_string(want) + ")");
    }
  }
}

// cuBLAS GEMMs of square and transformer-layer shapes (and the options' extra ones), in each
// 16-bit dtype: the achieved TFLOP/s per shape.
void bench_gemms(const BenchOptions& o, int rank, cudaStream_t st, cublasHandle_t blas,
                 Calibration& cal) {
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes;
  const std::vector<std::int64_t> squares = o.quick ? std::vector<std::int64_t>{2048, 8192}
                                                    : std::vector<std::int64_t>{1024, 2048, 4096, 8192, 16384};
  for (auto s : squares) shapes.emplace(s, s, s);
  for (std::int64_t h : o.quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{4096, 8192}) {
    for (std::int64_t m : {std::int64_t{4096}, std::int64_t{8192}}) {
      shapes.emplace(m, 3 * h, h);
      shapes.emplace(m, h, h);
      shapes.emplace(m, 4 * h, h);
      shapes.emplace(m, h, 4 * h);
      if (o.quick) break;
    }
  }
  for (const GemmShape& g : o.extra_gemms) shapes.emplace(g.m, g.n, g.k);
  std::int64_t a_max = 0, b_max = 0, c_max = 0;
  for (auto [m, n, k] : shapes) {
    a_max = std::max(a_max, m * k);
    b_max = std::max(b_max, k * n);
    c_max = std::max(c_max, m * n);
  }
    Bytes a(static_cast<std::size_t>(a_max * 2)), b(static_cast<std::size_t>(b_max * 2)),
        c(static_cast<std::size_t>(c_max * 2));
    ZEROSIM_CUDA_CHECK(cudaMemset(a.data(), 0x3c, a.bytes()));
    ZEROSIM_CUDA_CHECK(cudaMemset(b.data(), 0x3b, b.bytes()));
    for (const char* dtype : o.quick ? std::vector<const char*>{"bf16"} : std::vector<const char*>{"bf16", "fp16"}) {
      const cudaDataType_t t = std::string(dtype) == "bf16" ? CUDA_R_16BF : CUDA_R_16F;
      for (auto [m, n, k] : shapes) {
        const float alpha = 1, beta = 0;
        auto gemm = [&] {
          ZEROSIM_CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                            static_cast<int>(k), &alpha, b.data(), t, static_cast<int>(n), a.data(), t,
                                            static_cast<int>(k), &beta, c.data(), t, static_cast<int>(n),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        };
        const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
        const int iters = std::clamp(static_cast<int>(2e13 / flops), 5, 200);  // ~20-40 ms per shape
        const double sec = time_on(st, 3, iters, gemm);
        cal.gemm.push_back({m, n, k, dtype, flops / sec / 1e12});
      }
    }
    log_line(o, rank, "gemm: " + std::to_string(cal.gemm.size()) + " shapes");
  }

// Device-to-device, host-to-device and device-to-host copy bandwidths.
void bench_copies(const BenchOptions& o, int rank, cudaStream_t st, Calibration& cal) {
    const auto bytes = static_cast<std::size_t>(o.quick ? std::min<std::int64_t>(o.copy_bytes, 256 << 20) : o.copy_bytes);
    Bytes src(bytes), dst(bytes);
    ZEROSIM_CUDA_CHECK(cudaMemset(src.data(), 1, bytes));
    const double d2d = time_on(st, 3, 10, [&] {
      ZEROSIM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, st));
    });
    cal.hbm_copy_GBps = 2.0 * static_cast<double>(bytes) / d2d / 1e9;
    PinnedBuffer host(bytes);
    const double h2d = time_on(st, 2, 5, [&] {
      ZEROSIM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), host.data(), bytes, cudaMemcpyHostToDevice, st));
    });
    const double d2h = time_on(st, 2, 5, [&] {
      ZEROSIM_CUDA_CHECK(cudaMemcpyAsync(host.data(), src.data(), bytes, cudaMemcpyDeviceToHost, st));
    });
    cal.h2d_GBps = static_cast<double>(bytes) / h2d / 1e9;
    cal.d2h_GBps = static_cast<double>(bytes) / d2h / 1e9;
    log_line(o, rank, "copies: hbm " + std::to_string(cal.hbm_copy_GBps) + " GB/s, h2d " +
                          std::to_string(cal.h2d_GBps) + ", d2h " + std::to_string(cal.d2h_GBps));
  }

// The sharded Adam kernel's parameters per second (bf16 gradients and parameter copy).
void bench_adam(const BenchOptions& o, int rank, cudaStream_t st, Calibration& cal) {
    const auto n = static_cast<std::size_t>(o.quick ? std::min<std::int64_t>(o.adam_params, 1 << 26) : o.adam_params);
    kernels::DeviceAdamShard shard(static_cast<std::int64_t>(n), kernels::DType::BF16, kernels::DType::BF16);
    ZEROSIM_CUDA_CHECK(cudaMemset(shard.grad.data(), 0x11, shard.grad.bytes()));
    const kernels::AdamShardView s = shard.view();
    kernels::AdamParams p;
    p.weight_decay = 0.01f;
    const double sec = time_on(st, 3, 20, [&] {
      kernels::launch_sharded_adam_async(s, p, st);
      ++p.step;
    });
    cal.adam_params_per_s = static_cast<double>(n) / sec;
    const double bpp = 28.0;
    cal.adam = {{"grad", "bf16"}, {"copy", "bf16"}, {"bytes_per_param", bpp},
                {"GBps", bpp * static_cast<double>(n) / sec / 1e9}, {"params", n}};
    log_line(o, rank, "adam: " + std::to_string(cal.adam_params_per_s) + " params/s");
  }

// Each collective checked once for correctness, then swept over sizes, nccl-tests style.
void bench_collectives(Comm& boot, const BenchOptions& o, int rank, cudaStream_t st,
                       Calibration& cal) {
    NcclComms comms(boot, o.timeout);
    ncclComm_t comm = comms.get(0);
    const int n = comms.size(0), pos = comms.position(0);
    const std::int64_t max_bytes = o.quick ? std::min<std::int64_t>(o.max_coll_bytes, 64 << 20) : o.max_coll_bytes;
    Bytes buf(static_cast<std::size_t>(max_bytes)), buf2(static_cast<std::size_t>(max_bytes));
    ZEROSIM_CUDA_CHECK(cudaMemset(buf.data(), 0, buf.bytes()));
    const std::vector<CollKind> ops{CollKind::AllReduce, CollKind::AllGather, CollKind::ReduceScatter,
                                    CollKind::Broadcast, CollKind::Reduce, CollKind::AllToAll};
    for (CollKind op : ops) {
      check_collective(op, static_cast<std::size_t>(n) * 4096, n, pos, comm, st, comms);
      for (std::int64_t bytes = 8; bytes <= max_bytes; bytes *= o.quick ? 16 : 4) {
        const auto count = static_cast<std::size_t>(bytes / 2 / n * n);
        if (count == 0) continue;
        const int iters = bytes <= (std::int64_t{64} << 20) ? 20 : 5;
        boot.barrier();
        const double sec = time_on(st, 5, iters, [&] {
          launch(op, buf.data(), buf2.data(), count, n, pos, comm, st);
          comms.wait(0, std::string("bench ") + to_string(op));
        });
        const auto real_bytes = static_cast<std::int64_t>(count * 2);
        const Bandwidth bw = nccl_tests_bandwidth(op, n, real_bytes, sec);
        cal.collectives.push_back({to_string(op), n, real_bytes, sec * 1e6, bw.algbw_GBps, bw.busbw_GBps});
      }
      log_line(o, rank, std::string("collective ") + to_string(op) + ": checked and swept");
    }
  }

}  // namespace

Calibration run_bench(Comm& boot, int local_rank, const BenchOptions& o) {
  const int device = select_device(local_rank);
  const int rank = boot.rank();
  Calibration cal;
  cal.gpu = device_name(device);
  cal.num_gpus = boot.world_size();
  cal.date = today();
  int rt = 0;
  ZEROSIM_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  cal.cuda_runtime = std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
  int nv = 0;
  ZEROSIM_NCCL_CHECK(ncclGetVersion(&nv));
  cal.nccl_version = std::to_string(nv / 10000) + "." + std::to_string(nv / 100 % 100) + "." + std::to_string(nv % 100);

  cudaStream_t st = nullptr;
  ZEROSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  ZEROSIM_CUBLAS_CHECK(cublasCreate(&blas));
  ZEROSIM_CUBLAS_CHECK(cublasSetStream(blas, st));

  bench_gemms(o, rank, st, blas, cal);
  bench_copies(o, rank, st, cal);
  bench_adam(o, rank, st, cal);
  bench_collectives(boot, o, rank, st, cal);

  ZEROSIM_CUBLAS_CHECK(cublasDestroy(blas));
  ZEROSIM_CUDA_CHECK(cudaStreamDestroy(st));
  return cal;
}

}  // namespace zerosim::validate::gpu
