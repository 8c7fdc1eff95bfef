#include "validate/zero_check.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "kernels/adam_cpu.h"
#include "validate/thread_comm.h"

namespace zerosim::validate {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void check_config(const ZeroCheckConfig& cfg, int ranks) {
  if (cfg.stage < 1 || cfg.stage > 3) throw std::invalid_argument("zero check: stage must be 1, 2 or 3");
  if (ranks < 1) throw std::invalid_argument("zero check: need at least one rank");
  if (cfg.steps < 1) throw std::invalid_argument("zero check: steps must be >= 1");
  for (auto s : cfg.tensor_sizes) {
    if (s < 0) throw std::invalid_argument("zero check: tensor sizes must be >= 0");
  }
}

std::int64_t total_size(const ZeroCheckConfig& cfg) {
  return std::accumulate(cfg.tensor_sizes.begin(), cfg.tensor_sizes.end(), std::int64_t{0});
}

std::vector<std::int64_t> partition_counts(std::int64_t n, int ranks, Partition p) {
  std::vector<std::int64_t> c(ranks);
  if (p == Partition::Padded) {
    const std::int64_t per = (n + ranks - 1) / ranks;
    for (auto& x : c) x = per;
  } else {
    for (int r = 0; r < ranks; ++r) c[r] = n / ranks + (r < n % ranks ? 1 : 0);
  }
  return c;
}

kernels::AdamParams step_params(const ZeroCheckConfig& cfg, int ranks, int step) {
  kernels::AdamParams p = cfg.adam;
  p.step = step;
  p.grad_scale = static_cast<float>(ranks);
  return p;
}

void adam(std::span<float> master, std::span<float> m, std::span<float> v, std::span<const float> g,
          const kernels::AdamParams& p) {
  kernels::sharded_adam_cpu({.master = master.data(),
                             .exp_avg = m.data(),
                             .exp_avg_sq = v.data(),
                             .grad = g.data(),
                             .grad_dtype = kernels::DType::F32,
                             .n = static_cast<std::int64_t>(master.size())},
                            p);
}

}  // namespace

const char* to_string(Partition p) { return p == Partition::Padded ? "padded" : "uneven"; }

float synthetic_grad(int rank, int step, std::int64_t i, float param) {
  const std::uint64_t h = splitmix((static_cast<std::uint64_t>(rank) << 48) ^
                                   (static_cast<std::uint64_t>(step) << 32) ^
                                   static_cast<std::uint64_t>(i));
  const float noise = static_cast<float>(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
  return noise + 0.01f * static_cast<float>(rank + 1) * param;
}

float initial_param(std::int64_t i) { return static_cast<float>((i * 37) % 101) / 101.0f - 0.5f; }

ShardLayout shard_layout(const ZeroCheckConfig& cfg, int ranks, int position) {
  check_config(cfg, ranks);
  ShardLayout lay;
  auto add = [&](std::int64_t offset, std::int64_t length) {
    ShardLayout::Segment s;
    s.offset = offset;
    s.length = length;
    s.counts = partition_counts(length, ranks, cfg.partition);
    s.padded = std::accumulate(s.counts.begin(), s.counts.end(), std::int64_t{0});
    lay.segments.push_back(std::move(s));
  };
  if (cfg.stage == 3) {
    std::int64_t off = 0;
    for (auto n : cfg.tensor_sizes) {
      add(off, n);
      off += n;
    }
  } else {
    add(0, total_size(cfg));
  }
  for (std::size_t i = 0; i < lay.segments.size(); ++i) {
    const auto& s = lay.segments[i];
    std::int64_t begin = 0;
    for (int r = 0; r < position; ++r) begin += s.counts[r];
    lay.pieces.push_back({static_cast<int>(i), begin, s.counts[position]});
    lay.shard_size += s.counts[position];
  }
  return lay;
}

ModelState run_unsharded(int ranks, const ZeroCheckConfig& cfg) {
  check_config(cfg, ranks);
  const std::int64_t n = total_size(cfg);
  ModelState st;
  st.params.resize(n);
  st.exp_avg.assign(n, 0.0f);
  st.exp_avg_sq.assign(n, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) st.params[i] = initial_param(i);
  std::vector<std::vector<float>> grads(ranks, std::vector<float>(n));
  std::vector<float> sum(n);
  for (int step = 1; step <= cfg.steps; ++step) {
    std::vector<const float*> parts;
    for (int r = 0; r < ranks; ++r) {
      for (std::int64_t i = 0; i < n; ++i) grads[r][i] = synthetic_grad(r, step, i, st.params[i]);
      parts.push_back(grads[r].data());
    }
    ordered_sum(parts, n, sum.data());
    adam(st.params, st.exp_avg, st.exp_avg_sq, sum, step_params(cfg, ranks, step));
  }
  return st;
}

ModelState run_sharded(Comm& comm, int g, const ZeroCheckConfig& cfg) {
  const int ranks = comm.group_size(g);
  const int pos = comm.position(g);
  const ShardLayout lay = shard_layout(cfg, ranks, pos);
  const std::int64_t n = total_size(cfg);

  // This rank's partition of fp32 master weights and Adam state, and its gradient partition.
  std::vector<float> master(lay.shard_size), m(lay.shard_size, 0.0f), v(lay.shard_size, 0.0f),
      grad(lay.shard_size);
  // Padded full buffers per segment (parameters and gradients).
  std::vector<std::vector<float>> full_p(lay.segments.size()), full_g(lay.segments.size());
  for (std::size_t s = 0; s < lay.segments.size(); ++s) {
    full_p[s].assign(lay.segments[s].padded, 0.0f);
    full_g[s].assign(lay.segments[s].padded, 0.0f);
    for (std::int64_t i = 0; i < lay.segments[s].length; ++i) {
      full_p[s][i] = initial_param(lay.segments[s].offset + i);
    }
  }
  // Shard <-> segment copies.
  auto to_shard = [&](std::vector<std::vector<float>>& full, std::vector<float>& shard) {
    std::int64_t k = 0;
    for (const ShardPiece& p : lay.pieces) {
      std::copy_n(full[p.segment].begin() + p.begin, p.count, shard.begin() + k);
      k += p.count;
    }
  };
  auto gather = [&](const std::vector<float>& shard, std::vector<std::vector<float>>& full) {
    std::int64_t k = 0;
    for (const ShardPiece& p : lay.pieces) {
      const auto& seg = lay.segments[p.segment];
      comm.all_gather(g, std::span<const float>(shard).subspan(k, p.count), seg.counts, full[p.segment]);
      k += p.count;
    }
  };
  to_shard(full_p, master);

  for (int step = 1; step <= cfg.steps; ++step) {
    if (cfg.stage == 3) gather(master, full_p);  // fetch parameters before the forward pass
    for (std::size_t s = 0; s < lay.segments.size(); ++s) {
      const auto& seg = lay.segments[s];
      for (std::int64_t i = 0; i < seg.length; ++i) {
        full_g[s][i] = synthetic_grad(comm.rank(), step, seg.offset + i, full_p[s][i]);
      }
    }
    if (cfg.stage == 1) {
      for (std::size_t s = 0; s < lay.segments.size(); ++s) comm.all_reduce(g, full_g[s]);
      to_shard(full_g, grad);
    } else {
      std::int64_t k = 0;
      for (const ShardPiece& p : lay.pieces) {
        comm.reduce_scatter(g, full_g[p.segment], lay.segments[p.segment].counts,
                            std::span<float>(grad).subspan(k, p.count));
        k += p.count;
      }
    }
    adam(master, m, v, grad, step_params(cfg, ranks, step));
    if (cfg.stage != 3) gather(master, full_p);  // updated parameters to every rank
  }

  // The final state, gathered on every rank, padding dropped.
  ModelState st;
  st.params.resize(n);
  st.exp_avg.resize(n);
  st.exp_avg_sq.resize(n);
  auto collect = [&](const std::vector<float>& shard, std::vector<float>& out) {
    std::vector<std::vector<float>> full(lay.segments.size());
    for (std::size_t s = 0; s < lay.segments.size(); ++s) full[s].assign(lay.segments[s].padded, 0.0f);
    gather(shard, full);
    for (std::size_t s = 0; s < lay.segments.size(); ++s) {
      std::copy_n(full[s].begin(), lay.segments[s].length, out.begin() + lay.segments[s].offset);
    }
  };
  collect(master, st.params);
  collect(m, st.exp_avg);
  collect(v, st.exp_avg_sq);
  return st;
}

std::vector<ModelState> run_sharded_threads(int ranks, const ZeroCheckConfig& cfg) {
  check_config(cfg, ranks);
  std::vector<int> all(ranks);
  std::iota(all.begin(), all.end(), 0);
  ThreadWorld world(ranks, {all});
  std::vector<ModelState> out(ranks);
  std::mutex mu;
  std::string error;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = world.comm(r);
        out[r] = run_sharded(*comm, 0, cfg);
      } catch (const std::exception& e) {
        {
          std::lock_guard lock(mu);
          if (error.empty()) error = "rank " + std::to_string(r) + ": " + e.what();
        }
        world.abort(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error(error);
  return out;
}

std::string first_difference(const ModelState& a, const ModelState& b) {
  auto cmp = [](const char* what, const std::vector<float>& x, const std::vector<float>& y) -> std::string {
    if (x.size() != y.size()) {
      return std::string(what) + ": " + std::to_string(x.size()) + " vs " + std::to_string(y.size()) + " elements";
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) {
        return std::string(what) + "[" + std::to_string(i) + "]: " + std::to_string(x[i]) + " vs " +
               std::to_string(y[i]);
      }
    }
    return "";
  };
  for (auto d : {cmp("params", a.params, b.params), cmp("exp_avg", a.exp_avg, b.exp_avg),
                 cmp("exp_avg_sq", a.exp_avg_sq, b.exp_avg_sq)}) {
    if (!d.empty()) return d;
  }
  return "";
}

}  // namespace zerosim::validate
