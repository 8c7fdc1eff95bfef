#include "validate/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/adam_cpu.h"

namespace zerosim::validate {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string where(const PlanOp& op, int rank) {
  return "rank " + std::to_string(rank) + " op " + std::to_string(op.id) + " '" + op.name + "'";
}

}  // namespace

CpuBackend::CpuBackend(Comm& comm, CpuBackendOptions opt) : comm_(comm), opt_(opt) {
  if (opt_.max_elements < 0 || opt_.max_gemm_macs < 0) {
    throw ReplayError("CpuBackend: max_elements and max_gemm_macs must be >= 0");
  }
}

std::string CpuBackend::device() const {
  return "host CPU (" + comm_.name() + ", " + std::to_string(std::thread::hardware_concurrency()) +
         " hardware threads)";
}

float CpuBackend::input_value(int position, int group, int seq, std::int64_t i) {
  const std::int64_t h = (position + 1) * 131 + group * 37 + seq * 31 + i * 7;
  return static_cast<float>(h % 97) * 0.25f - 12.0f;
}

void CpuBackend::prepare(const ReplayPlan& plan, const RankOps& ops, const RankSchedule&) {
  plan_ = &plan;
  ops_ = &ops;
  timings_.assign(ops.ops.size(), {});
}

void CpuBackend::begin_step() {
  std::fill(timings_.begin(), timings_.end(), OpTiming{});
  live_.clear();
  live_total_ = 0;
  step_origin_ = now_s();
}

void CpuBackend::issue(const PlanOp& op, int coll_seq) {
  const double t0 = now_s();
  switch (op.kind) {
    case OpKind::Collective:
      run_collective(op, coll_seq);
      break;
    case OpKind::Compute:
      run_compute(op);
      break;
    case OpKind::Copy: {
      const auto n = static_cast<std::size_t>(std::min(op.bytes / 4, opt_.max_elements));
      if (copy_src_.size() < n) copy_src_.assign(n, 1.0f);
      if (copy_dst_.size() < n) copy_dst_.resize(n);
      std::memcpy(copy_dst_.data(), copy_src_.data(), n * sizeof(float));
      break;
    }
    case OpKind::Alloc: {
      live_[op.category] += op.bytes;
      live_total_ += op.bytes;
      peak_by_category_[op.category] = std::max(peak_by_category_[op.category], live_[op.category]);
      peak_total_ = std::max(peak_total_, live_total_);
      break;
    }
    case OpKind::Free:
      live_[op.category] -= op.bytes;
      live_total_ -= op.bytes;
      break;
  }
  const double t1 = now_s();
  if (op.kind != OpKind::Alloc && op.kind != OpKind::Free) {
    timings_[op.id] = {t0 - step_origin_, t1 - t0};
  } else {
    timings_[op.id] = {t0 - step_origin_, 0};
  }
}

std::vector<OpTiming> CpuBackend::end_step() { return timings_; }

void CpuBackend::run_compute(const PlanOp& op) {
  for (const GemmShape& g : op.gemms) {
    const std::int64_t macs = g.m * g.n * g.k * g.count;
    if (macs > opt_.max_gemm_macs || g.count == 0) {
      ++gemms_skipped_;
      continue;
    }
    const auto m = static_cast<std::size_t>(g.m), n = static_cast<std::size_t>(g.n),
               k = static_cast<std::size_t>(g.k);
    if (a_.size() < m * k) a_.assign(m * k, 0.5f);
    if (b_.size() < k * n) b_.assign(k * n, 0.25f);
    if (c_.size() < m * n) c_.resize(m * n);
    for (std::int64_t rep = 0; rep < g.count; ++rep) {
      for (std::size_t i = 0; i < m; ++i) {
        float* crow = c_.data() + i * n;
        std::fill(crow, crow + n, 0.0f);
        for (std::size_t p = 0; p < k; ++p) {
          const float aik = a_[i * k + p];
          const float* brow = b_.data() + p * n;
          for (std::size_t j = 0; j < n; ++j) crow[j] += aik * brow[j];
        }
      }
    }
    ++gemms_run_;
  }
  if (op.work == "optimizer_step" && op.elements > 0) {
    AdamState& st = adam_[op.id];
    const std::int64_t n = std::min(op.elements, opt_.max_elements);
    if (st.shard.size() != n) {
      st.shard = kernels::HostAdamShard(n);
      std::fill(st.shard.master.begin(), st.shard.master.end(), 0.5f);
      for (std::int64_t i = 0; i < n; ++i) {
        st.shard.set_grad(i, static_cast<float>(i % 17) * 1e-3f - 8e-3f);
      }
    }
    kernels::AdamParams p;
    p.step = ++st.step;
    p.weight_decay = 0.01f;
    kernels::sharded_adam_cpu(st.shard.view(), p);
    adam_params_ += n;
  }
}

void CpuBackend::run_collective(const PlanOp& op, int seq) {
  const int g = op.group;
  const int gs = comm_.group_size(g);
  const int pos = comm_.position(g);
  const std::int64_t n = std::min<std::int64_t>(op.bytes / plan_->element_bytes(), opt_.max_elements);
  const std::int64_t chunk = n / gs;
  auto fill = [&](int member, std::int64_t count, std::int64_t offset, float* out) {
    for (std::int64_t i = 0; i < count; ++i) out[i] = input_value(member, g, seq, offset + i);
  };
  // Expected ordered sum over members of their elements [offset, offset + count).
  auto expected_sum = [&](std::int64_t count, std::int64_t offset) {
    std::vector<std::vector<float>> inputs(gs, std::vector<float>(count));
    std::vector<const float*> parts;
    for (int q = 0; q < gs; ++q) {
      fill(q, count, offset, inputs[q].data());
      parts.push_back(inputs[q].data());
    }
    std::vector<float> out(count);
    ordered_sum(parts, count, out.data());
    return out;
  };
  auto check = [&](const std::vector<float>& want, const float* got) {
    if (!opt_.verify) return;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
        throw ReplayError(where(op, comm_.rank()) + ": " + to_string(op.collective) +
                          " result differs from the expected at element " + std::to_string(i) +
                          " (" + std::to_string(got[i]) + " instead of " + std::to_string(want[i]) + ")");
      }
    }
    ++collectives_checked_;
  };

  switch (op.collective) {
    case CollKind::AllReduce: {
      std::vector<float> data(n);
      fill(pos, n, 0, data.data());
      comm_.all_reduce(g, data);
      check(expected_sum(n, 0), data.data());
      break;
    }
    case CollKind::ReduceScatter: {
      std::vector<float> in(chunk * gs), out(chunk);
      fill(pos, chunk * gs, 0, in.data());
      comm_.reduce_scatter(g, in, out);
      check(expected_sum(chunk, pos * chunk), out.data());
      break;
    }
    case CollKind::AllGather: {
      std::vector<float> in(chunk), out(chunk * gs), want(chunk * gs);
      fill(pos, chunk, 0, in.data());
      comm_.all_gather(g, in, out);
      for (int q = 0; q < gs; ++q) fill(q, chunk, 0, want.data() + q * chunk);
      check(want, out.data());
      break;
    }
    case CollKind::Broadcast: {
      std::vector<float> data(n), want(n);
      fill(pos, n, 0, data.data());
      comm_.broadcast(g, 0, data);
      fill(0, n, 0, want.data());
      check(want, data.data());
      break;
    }
    case CollKind::Reduce: {
      std::vector<float> in(n), out(pos == 0 ? n : 0);
      fill(pos, n, 0, in.data());
      comm_.reduce(g, 0, in, out);
      if (pos == 0) check(expected_sum(n, 0), out.data());
      break;
    }
    case CollKind::AllToAll: {
      std::vector<float> in(chunk * gs), out(chunk * gs), want(chunk * gs);
      fill(pos, chunk * gs, 0, in.data());
      comm_.all_to_all(g, in, out);
      for (int q = 0; q < gs; ++q) fill(q, chunk, pos * chunk, want.data() + q * chunk);
      check(want, out.data());
      break;
    }
    case CollKind::SendRecv: {
      const PlanGroup& grp = plan_->groups[g];
      const int src = grp.position_of(op.src), dst = grp.position_of(op.dst);
      std::vector<float> data(n);
      fill(pos, n, 0, data.data());
      comm_.send_recv(g, src, dst, data);
      if (pos == dst) {
        std::vector<float> want(n);
        fill(src, n, 0, want.data());
        check(want, data.data());
      }
      break;
    }
  }
}

nlohmann::json CpuBackend::info() const {
  nlohmann::json peak = nlohmann::json::object();
  for (const auto& [c, b] : peak_by_category_) peak[c] = b;
  return {{"comm", comm_.name()},
          {"max_elements", opt_.max_elements},
          {"max_gemm_macs", opt_.max_gemm_macs},
          {"gemms_run", gemms_run_},
          {"gemms_skipped", gemms_skipped_},
          {"collectives_checked", collectives_checked_},
          {"adam_params_updated", adam_params_},
          {"accounted_peak_bytes", peak_total_},
          {"accounted_peak_bytes_by_category", peak}};
}

}  // namespace zerosim::validate
