#pragma once
// Error checks for the GPU harness, in the style of kernels/cuda_check.h (which covers the CUDA
// runtime: ZEROSIM_CUDA_CHECK): each throws with file, line, the failing call and the library's
// error name and text.
//   ZEROSIM_NCCL_CHECK(expr)    NcclError; ncclInProgress counts as success (non-blocking
//                               communicators; NcclComms::wait() then polls for completion)
//   ZEROSIM_CUBLAS_CHECK(expr)  CublasError
#include <cublas_v2.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace zerosim::validate::gpu {

class NcclError : public std::runtime_error {
 public:
  NcclError(ncclResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ncclResult_t code() const noexcept { return code_; }

 private:
  ncclResult_t code_;
};

class CublasError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void nccl_check(ncclResult_t r, const char* expr, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw NcclError(r, std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                         ncclGetErrorString(r) + " (" + ncclGetLastError(nullptr) + ")");
}
inline void cublas_check(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw CublasError(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                    cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}
}  // namespace detail

}  // namespace zerosim::validate::gpu

#define ZEROSIM_NCCL_CHECK(expr) \
  ::zerosim::validate::gpu::detail::nccl_check((expr), #expr, __FILE__, __LINE__)
#define ZEROSIM_CUBLAS_CHECK(expr) \
  ::zerosim::validate::gpu::detail::cublas_check((expr), #expr, __FILE__, __LINE__)
