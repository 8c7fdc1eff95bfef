#include "validate/comm.h"

#include <algorithm>

namespace zerosim::validate {

int Comm::position(int g) const {
  const auto& m = groups_.at(g);
  auto it = std::find(m.begin(), m.end(), rank());
  if (it == m.end()) {
    throw CommError("rank " + std::to_string(rank()) + " is not a member of group " + std::to_string(g));
  }
  return static_cast<int>(it - m.begin());
}

void Comm::reduce_scatter(int g, std::span<const float> in, std::span<float> out) {
  const std::vector<std::int64_t> counts(group_size(g), static_cast<std::int64_t>(out.size()));
  reduce_scatter(g, in, counts, out);
}

void Comm::all_gather(int g, std::span<const float> in, std::span<float> out) {
  const std::vector<std::int64_t> counts(group_size(g), static_cast<std::int64_t>(in.size()));
  all_gather(g, in, counts, out);
}

void ordered_sum(const std::vector<const float*>& parts, std::int64_t n, float* out) {
  if (parts.empty() || n == 0) return;
  // Copy first, then add in order; the loop over i is inside so each element sees the same order.
  std::copy_n(parts[0], n, out);
  for (std::size_t p = 1; p < parts.size(); ++p) {
    const float* x = parts[p];
    for (std::int64_t i = 0; i < n; ++i) out[i] = out[i] + x[i];
  }
}

std::vector<std::int64_t> prefix_offsets(std::span<const std::int64_t> counts) {
  std::vector<std::int64_t> off(counts.size() + 1, 0);
  for (std::size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] < 0) throw CommError("negative element count");
    off[p + 1] = off[p] + counts[p];
  }
  return off;
}

}  // namespace zerosim::validate
