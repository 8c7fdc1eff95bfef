#pragma once
// How the CUDA kernel splits a shard between its vector body and its scalar head and tail. Kept
// apart from the kernel so the split can be checked on a machine without a GPU
// (tests/kernels/test_vector_split.cpp).
//
// Elements [head, head + 4 * nvec) are taken 4 at a time (16-byte loads of master, m and v); the
// scalar elements are [0, head) and [head + 4 * nvec, n), numbered 0 .. n_scalar() - 1 in that
// order by scalar_index().

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/adam_math.h"
#include "kernels/adam_shard.h"

namespace zerosim::kernels {

inline constexpr std::int64_t kAdamVecWidth = 4;  // elements per vector access

struct VectorSplit {
  std::int64_t n;     // shard length
  std::int64_t head;  // scalar elements before the vector body (0-3, or n without common alignment)
  std::int64_t nvec;  // 4-element groups in the vector body

  [[nodiscard]] ZEROSIM_HOST_DEVICE std::int64_t body_end() const {
    return head + nvec * kAdamVecWidth;
  }
  [[nodiscard]] ZEROSIM_HOST_DEVICE std::int64_t n_scalar() const {
    return head + (n - body_end());
  }
  // Element index of the j-th scalar element, j in [0, n_scalar()).
  [[nodiscard]] ZEROSIM_HOST_DEVICE std::int64_t scalar_index(std::int64_t j) const {
    return j < head ? j : body_end() + (j - head);
  }
};

namespace detail {
inline bool aligned_at(const void* p, std::int64_t elem, std::size_t elem_size, std::size_t align) {
  const auto addr =
      reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(elem) * elem_size;
  return addr % align == 0;
}
}  // namespace detail

// The head brings master to a 16-byte boundary; the vector body is used only if m, v, the gradient
// (4 elements: 16 or 8 bytes) and the copy (8 bytes) are then aligned too, else the whole shard is
// scalar. Expects a shard that passed check_adam_args.
[[nodiscard]] inline VectorSplit split_for_vectors(const AdamShardView& s) {
  const auto master_addr = reinterpret_cast<std::uintptr_t>(s.master);
  const std::int64_t head = std::min<std::int64_t>(
      static_cast<std::int64_t>((16 - master_addr % 16) % 16 / sizeof(float)), s.n);
  const std::size_t gsize = dtype_size(s.grad_dtype);
  constexpr auto w = static_cast<std::size_t>(kAdamVecWidth);
  const bool together =
      detail::aligned_at(s.exp_avg, head, sizeof(float), 16) &&
      detail::aligned_at(s.exp_avg_sq, head, sizeof(float), 16) &&
      detail::aligned_at(s.grad, head, gsize, w * gsize) &&
      (s.param_copy == nullptr || detail::aligned_at(s.param_copy, head, 2, w * 2));
  if (!together) return {s.n, s.n, 0};
  return {s.n, head, (s.n - head) / kAdamVecWidth};
}

}  // namespace zerosim::kernels
