// adam_bench: times the sharded fused Adam kernel on one GPU and compares its achieved bandwidth
// with a device-to-device cudaMemcpy.
//
//   adam_bench [--n PARAMS] [--grad f32|f16|bf16] [--copy none|f16|bf16] [--iters K] [--warmup W]
//
// Bytes per parameter counted for the kernel: read master, m, v and the gradient; write master, m,
// v and the 16-bit copy: 24 + sizeof(grad) + sizeof(copy). For the memcpy, bytes read + written.
// Prints one "key=value" line per measurement, for scripts.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/adam_cuda.h"
#include "kernels/cuda_check.h"
#include "kernels/device_adam_shard.h"
#include "kernels/device_buffer.h"

namespace zk = zerosim::kernels;

namespace {

struct Options {
  std::int64_t n = std::int64_t{1} << 28;
  zk::DType grad = zk::DType::BF16;
  bool copy = true;
  zk::DType copy_dtype = zk::DType::BF16;
  int iters = 20;
  int warmup = 5;
};

zk::DType parse_dtype(std::string_view s) {
  if (s == "f32") return zk::DType::F32;
  if (s == "f16") return zk::DType::F16;
  if (s == "bf16") return zk::DType::BF16;
  throw std::invalid_argument("unknown dtype '" + std::string(s) + "' (f32, f16, bf16)");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + std::string(a));
    const std::string v = argv[++i];
    if (a == "--n") o.n = std::stoll(v);
    else if (a == "--grad") o.grad = parse_dtype(v);
    else if (a == "--copy") {
      o.copy = v != "none";
      if (o.copy) o.copy_dtype = parse_dtype(v);
    } else if (a == "--iters") o.iters = std::stoi(v);
    else if (a == "--warmup") o.warmup = std::stoi(v);
    else throw std::invalid_argument("unknown option " + std::string(a));
  }
  if (o.n <= 0 || o.iters <= 0 || o.warmup < 0)
    throw std::invalid_argument("--n and --iters must be > 0, --warmup >= 0");
  return o;
}

// Mean milliseconds per call of fn over `iters` calls after `warmup` untimed ones.
template <class Fn>
double time_ms(int warmup, int iters, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t start{};
  cudaEvent_t stop{};
  ZEROSIM_CUDA_CHECK(cudaEventCreate(&start));
  ZEROSIM_CUDA_CHECK(cudaEventCreate(&stop));
  ZEROSIM_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) fn();
  ZEROSIM_CUDA_CHECK(cudaEventRecord(stop));
  ZEROSIM_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  ZEROSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  ZEROSIM_CUDA_CHECK(cudaEventDestroy(start));
  ZEROSIM_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / iters;
}

int run(const Options& o) {
  int device = 0;
  ZEROSIM_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  ZEROSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));

  const auto n = static_cast<std::size_t>(o.n);
  const std::size_t gsize = zk::dtype_size(o.grad);
  zk::DeviceAdamShard buffers(o.n, o.grad,
                              o.copy ? std::optional<zk::DType>(o.copy_dtype) : std::nullopt);
  // Small values: the step stays finite however often it runs; the bytes are what is measured.
  ZEROSIM_CUDA_CHECK(cudaMemset(buffers.grad.data(), 0x11, buffers.grad.bytes()));
  const zk::AdamShardView shard = buffers.view();
  zk::AdamParams params;
  params.weight_decay = 0.01f;

  const double adam_ms = time_ms(o.warmup, o.iters, [&] {
    zk::launch_sharded_adam_async(shard, params, nullptr);
    ++params.step;
  });
  const double bytes_per_param = 24.0 + static_cast<double>(gsize) + (o.copy ? 2.0 : 0.0);
  const double adam_bytes = bytes_per_param * static_cast<double>(n);

  const std::size_t copy_bytes = 4 * n * sizeof(float);  // the fp32 footprint of master, m, v, grad
  zk::DeviceBuffer<std::uint8_t> src(copy_bytes), dst(copy_bytes);
  ZEROSIM_CUDA_CHECK(cudaMemset(src.data(), 0, copy_bytes));
  const double memcpy_ms = time_ms(o.warmup, o.iters, [&] {
    ZEROSIM_CUDA_CHECK(cudaMemcpy(dst.data(), src.data(), copy_bytes, cudaMemcpyDeviceToDevice));
  });

  std::printf("device=\"%s\" sm=%d%d params=%lld grad=%s copy=%s bytes_per_param=%.0f\n", prop.name,
              prop.major, prop.minor, static_cast<long long>(o.n), zk::to_string(o.grad).data(),
              o.copy ? zk::to_string(o.copy_dtype).data() : "none", bytes_per_param);
  std::printf("adam ms=%.4f params_per_s=%.4e GB_per_s=%.1f\n", adam_ms,
              static_cast<double>(n) / (adam_ms * 1e-3), adam_bytes / (adam_ms * 1e-3) / 1e9);
  std::printf("memcpy_d2d bytes=%zu ms=%.4f GB_per_s=%.1f (read + write)\n", copy_bytes, memcpy_ms,
              2.0 * static_cast<double>(copy_bytes) / (memcpy_ms * 1e-3) / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "adam_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "adam_bench: %s\n", e.what());
    return 1;
  }
}
