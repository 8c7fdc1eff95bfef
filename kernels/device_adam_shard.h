#pragma once
// DeviceAdamShard: owns one shard's arrays in device memory (DeviceBuffer) and hands out the
// AdamShardView the CUDA kernel takes; the device counterpart of HostAdamShard.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <stdexcept>

#include "kernels/adam_shard.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"

namespace zerosim::kernels {

struct DeviceAdamShard {
  DeviceAdamShard() = default;
  // n elements, every byte zero. Without copy_type the shard has no 16-bit parameter copy.
  explicit DeviceAdamShard(std::int64_t n, DType grad_type = DType::F32,
                           std::optional<DType> copy_type = std::nullopt)
      : grad_dtype(grad_type) {
    if (n < 0) throw std::invalid_argument("DeviceAdamShard: n must be >= 0");
    const auto un = static_cast<std::size_t>(n);
    master = DeviceBuffer<float>(un);
    exp_avg = DeviceBuffer<float>(un);
    exp_avg_sq = DeviceBuffer<float>(un);
    grad = DeviceBuffer<std::uint8_t>(un * dtype_size(grad_dtype));
    if (copy_type) {
      param_dtype = *copy_type;
      param_copy = DeviceBuffer<std::uint16_t>(un);
    }
    zero(master);
    zero(exp_avg);
    zero(exp_avg_sq);
    zero(grad);
    zero(param_copy);
  }

  DeviceBuffer<float> master, exp_avg, exp_avg_sq;
  DeviceBuffer<std::uint8_t> grad;  // raw grad_dtype elements
  DType grad_dtype = DType::F32;
  DeviceBuffer<std::uint16_t> param_copy;  // empty: no copy
  DType param_dtype = DType::BF16;

  [[nodiscard]] std::int64_t size() const noexcept {
    return static_cast<std::int64_t>(master.size());
  }
  // Device memory held, all arrays together.
  [[nodiscard]] std::size_t bytes() const noexcept {
    return master.bytes() + exp_avg.bytes() + exp_avg_sq.bytes() + grad.bytes() +
           param_copy.bytes();
  }

  // The whole shard, or elements [begin, end) of it (see slice()).
  [[nodiscard]] AdamShardView view() {
    return {master.data(), exp_avg.data(),    exp_avg_sq.data(), grad.data(),
            grad_dtype,    param_copy.data(), param_dtype,       size()};
  }
  [[nodiscard]] AdamShardView view(std::int64_t begin, std::int64_t end) {
    return slice(view(), begin, end);
  }

 private:
  template <class T>
  static void zero(DeviceBuffer<T>& b) {
    if (b.size() > 0) ZEROSIM_CUDA_CHECK(cudaMemset(b.data(), 0, b.bytes()));
  }
};

}  // namespace zerosim::kernels
