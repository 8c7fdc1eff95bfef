#pragma once
// DeviceBuffer<T>: owning, move-only array in device memory (cudaMalloc/cudaFree). The kernels take
// non-owning views (AdamShardView); this is what owns the memory behind them, one shard's arrays
// together in DeviceAdamShard (device_adam_shard.h).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <utility>

#include "kernels/cuda_check.h"

namespace zerosim::kernels {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : size_(count) {
    if (count > 0) ZEROSIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }

  void copy_from_host(std::span<const T> src) {
    check_size(src.size());
    ZEROSIM_CUDA_CHECK(cudaMemcpy(data_, src.data(), bytes(), cudaMemcpyHostToDevice));
  }
  void copy_to_host(std::span<T> dst) const {
    check_size(dst.size());
    ZEROSIM_CUDA_CHECK(cudaMemcpy(dst.data(), data_, bytes(), cudaMemcpyDeviceToHost));
  }

 private:
  void check_size(std::size_t n) const {
    if (n != size_) throw std::invalid_argument("DeviceBuffer: host span size does not match");
  }
  void release() noexcept {
    if (data_ != nullptr) cudaFree(data_);  // errors here cannot be reported from a destructor
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace zerosim::kernels
