// The CUDA kernel's split of a shard into a scalar head, a 4-wide vector body and a scalar tail
// (kernels/vector_split.h), checked without a GPU: every element is visited exactly once, vector
// accesses are aligned for every array, and the vector body is used whenever the arrays share
// alignment. Addresses are synthetic; nothing is dereferenced.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/vector_split.h"

namespace zk = zerosim::kernels;
using zk::DType;

namespace {

constexpr std::uintptr_t kBase = 0x100000;  // 16-byte aligned; each array gets its own 1 MiB
template <class T>
T* fake(int array, std::int64_t elem_offset, std::size_t elem_size) {
  return reinterpret_cast<T*>(kBase * static_cast<std::uintptr_t>(array + 1) +
                              static_cast<std::uintptr_t>(elem_offset) * elem_size);
}

bool aligned(const void* p, std::int64_t elem, std::size_t elem_size, std::size_t align) {
  return (reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(elem) * elem_size) %
             align == 0;
}

TEST(VectorSplit, CoversEveryElementOnceWithAlignedVectors) {
  std::vector<int> visits;
  for (DType g : {DType::F32, DType::F16, DType::BF16}) {
    const std::size_t gsize = zk::dtype_size(g);
    for (bool copy : {false, true}) {
      for (std::int64_t n : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 33, 1000, 1001, 1002, 1003}) {
        // Element offsets 0-3 of master, m, v, grad and copy from a 16-byte boundary.
        for (int combo = 0; combo < 4 * 4 * 4 * 4 * 4; ++combo) {
          const int o[5] = {combo % 4, combo / 4 % 4, combo / 16 % 4, combo / 64 % 4,
                            combo / 256 % 4};
          if (!copy && o[4] != 0) continue;
          zk::AdamShardView s{fake<float>(0, o[0], 4), fake<float>(1, o[1], 4),
                              fake<float>(2, o[2], 4), fake<const void>(3, o[3], gsize), g,
                              copy ? fake<void>(4, o[4], 2) : nullptr, DType::BF16, n};
          const zk::VectorSplit sp = zk::split_for_vectors(s);
          const std::string what = "n=" + std::to_string(n) + " grad=" +
                                   std::string(zk::to_string(g)) + " offsets " +
                                   std::to_string(o[0]) + std::to_string(o[1]) +
                                   std::to_string(o[2]) + std::to_string(o[3]) +
                                   std::to_string(o[4]);
          ASSERT_EQ(sp.n, n) << what;
          ASSERT_GE(sp.head, 0) << what;
          ASSERT_GE(sp.nvec, 0) << what;
          ASSERT_LE(sp.body_end(), n) << what;

          if (sp.nvec > 0) {
            ASSERT_TRUE(aligned(s.master, sp.head, 4, 16)) << what;
            ASSERT_TRUE(aligned(s.exp_avg, sp.head, 4, 16)) << what;
            ASSERT_TRUE(aligned(s.exp_avg_sq, sp.head, 4, 16)) << what;
            ASSERT_TRUE(aligned(s.grad, sp.head, gsize, 4 * gsize)) << what;
            if (copy) {
              ASSERT_TRUE(aligned(s.param_copy, sp.head, 2, 8)) << what;
            }
          }

          visits.assign(static_cast<std::size_t>(n), 0);
          for (std::int64_t j = 0; j < sp.nvec; ++j)
            for (std::int64_t e = 0; e < zk::kAdamVecWidth; ++e)
              ++visits[static_cast<std::size_t>(sp.head + j * zk::kAdamVecWidth + e)];
          for (std::int64_t j = 0; j < sp.n_scalar(); ++j) {
            const std::int64_t i = sp.scalar_index(j);
            ASSERT_TRUE(i >= 0 && i < n) << what << " scalar " << j << " -> " << i;
            ++visits[static_cast<std::size_t>(i)];
          }
          for (std::int64_t i = 0; i < n; ++i)
            ASSERT_EQ(visits[static_cast<std::size_t>(i)], 1) << what << " element " << i;

          // Same element offset everywhere: the arrays share alignment, so after the head (which
          // brings master to 16 bytes: (4 - offset) % 4 elements) everything is vectorized but a
          // tail of at most 3.
          const bool shared =
              o[1] == o[0] && o[2] == o[0] && o[3] == o[0] && (!copy || o[4] == o[0]);
          if (shared) {
            const std::int64_t head = std::min<std::int64_t>((4 - o[0]) % 4, n);
            EXPECT_EQ(sp.head, head) << what;
            EXPECT_EQ(sp.nvec, (n - head) / 4) << what;
          }
        }
      }
    }
  }
}

}  // namespace
