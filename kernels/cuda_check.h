#pragma once
// CUDA runtime error checking: ZEROSIM_CUDA_CHECK(expr) throws zerosim::kernels::CudaError with the
// file, line, the failing expression and the CUDA error name, e.g.
//   "kernels/adam_cuda.cu:120: cudaGetLastError() failed: cudaErrorInvalidConfiguration (invalid
//   configuration argument)"
// Only for code built with the CUDA toolkit (zerosim::kernels_cuda and its dependents).

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace zerosim::kernels {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace detail {
inline void cuda_check(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw CudaError(err, std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                           ")");
}
}  // namespace detail

}  // namespace zerosim::kernels

#define ZEROSIM_CUDA_CHECK(expr) \
  ::zerosim::kernels::detail::cuda_check((expr), #expr, __FILE__, __LINE__)
