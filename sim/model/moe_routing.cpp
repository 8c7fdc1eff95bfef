#include "sim/model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace zerosim {
namespace {

// C(a, k) / C(b, k) for a <= b: the chance that k distinct picks among b all land among a given
// a of them.
double choose_ratio(std::int64_t a, std::int64_t b, std::int64_t k) {
  if (a < k) return 0.0;
  double r = 1.0;
  for (std::int64_t i = 0; i < k; ++i) {
    r *= static_cast<double>(a - i) / static_cast<double>(b - i);
  }
  return r;
}

// log C(n, k).
double log_choose(std::int64_t n, std::int64_t k) {
  return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
         std::lgamma(static_cast<double>(n - k) + 1);
}

}  // namespace

double expert_range_hit_probability(const MoeSpec& e, std::int64_t first, std::int64_t count) {
  const std::int64_t n = e.num_experts, k = e.top_k;
  if (count <= 0 || first < 0 || first + count > n) {
    throw std::invalid_argument("expert range outside the experts");
  }
  if (e.router_num_groups == 0) return 1.0 - choose_ratio(n - count, n, k);
  const std::int64_t groups = e.router_num_groups, picked = e.router_group_topk;
  const std::int64_t width = n / groups;  // experts per group
  const std::int64_t pool = picked * width;  // experts the token chooses among
  // The range's overlap with each group it touches.
  std::vector<std::int64_t> overlap;
  for (std::int64_t g = first / width; g * width < first + count; ++g) {
    overlap.push_back(std::min(first + count, (g + 1) * width) - std::max(first, g * width));
  }
  const std::int64_t touched = static_cast<std::int64_t>(overlap.size());
  // ways[j][o]: the sets of j touched groups whose overlaps sum to o.
  std::vector<std::vector<double>> ways(touched + 1, std::vector<double>(count + 1, 0.0));
  ways[0][0] = 1.0;
  for (std::int64_t g = 0; g < touched; ++g) {
    for (std::int64_t j = g; j >= 0; --j) {
      for (std::int64_t o = count - overlap[g]; o >= 0; --o) {
        ways[j + 1][o + overlap[g]] += ways[j][o];
      }
    }
  }
  // A set of j touched groups is completed by picked - j of the other groups.
  double miss = 0.0;
  for (std::int64_t j = 0; j <= std::min(touched, picked); ++j) {
    if (picked - j > groups - touched) continue;
    const double completions =
        std::exp(log_choose(groups - touched, picked - j) - log_choose(groups, picked));
    for (std::int64_t o = 0; o <= count; ++o) {
      if (ways[j][o] == 0.0) continue;
      miss += ways[j][o] * completions * choose_ratio(pool - o, pool, k);
    }
  }
  return 1.0 - miss;
}

double unit_hit_probability(const MoeSpec& e, std::int64_t unit) {
  if (unit <= 0 || e.num_experts % unit != 0) {
    throw std::invalid_argument("a unit of experts must divide the experts");
  }
  const std::int64_t units = e.num_experts / unit;
  // With groups aligned to the units (one divides the other) every unit has the same chance.
  const std::int64_t width = e.router_num_groups == 0 ? 0 : e.num_experts / e.router_num_groups;
  const bool aligned = width == 0 || unit % width == 0 || width % unit == 0;
  if (aligned) return expert_range_hit_probability(e, 0, unit);
  double sum = 0.0;
  for (std::int64_t u = 0; u < units; ++u) sum += expert_range_hit_probability(e, u * unit, unit);
  return sum / static_cast<double>(units);
}

}  // namespace zerosim
