#include "sim/parallel/zero3_params.h"

#include <algorithm>

namespace zerosim::plan_detail {

std::int32_t tensor_list_op(Emitter& e, const Scenario& s, const std::string& name,
                            const std::vector<std::int32_t>& deps) {
  // A narrow() and a copy_() per rank.
  return e.work_op(OpKind::Compute, {WorkKind::HostOverhead, 2 * s.parallel.dp_cp(), 0}, Stream::Compute,
                   Phase::Communication, name, deps);
}

std::int32_t quantize_op(Emitter& e, Bytes bytes, Stream stream, const std::string& name,
                         const std::vector<std::int32_t>& deps) {
  return e.work_op(OpKind::Compute, {WorkKind::Quantize, bytes, 0}, stream, Phase::Communication,
                   name, deps);
}

void Zero3Params::plan() {
  residency_.resize(chunks_.size());
  for (std::size_t c = 0; c < chunks_.size(); ++c) plan_chunk(static_cast<int>(c));
}

bool Zero3Params::smalls_persist(const Unit& u) const {
  return policy_.persistent_per_tensor && u.small_tensors > 0 &&
         small_tensor_elements(u) / u.small_tensors <= s_.zero.stage3_param_persistence_threshold;
}

std::vector<std::int64_t> Zero3Params::persistent_tensors() const {
  std::vector<std::int64_t> tensors;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    for (std::size_t i = 0; i < chunks_[c].size(); ++i) {
      const Unit& u = chunks_[c][i];
      const bool whole = residency_[c].persistent[i];
      if (whole) tensors.insert(tensors.end(), u.weights.begin(), u.weights.end());
      if ((whole || smalls_persist(u)) && u.small_tensors > 0) {
        const std::int64_t small = small_tensor_elements(u);
        for (int t = 0; t < u.small_tensors; ++t) {
          tensors.push_back(small / u.small_tensors + (t == 0 ? small % u.small_tensors : 0));
        }
      }
    }
  }
  return tensors;
}

Bytes Zero3Params::persistent_bytes() const {
  Bytes persistent = 0;
  for (std::int64_t t : persistent_tensors()) persistent += 2 * t;
  return persistent;
}

// 1/k of every partitioned parameter in 16 bits, from its first gather until the optimizer step
// (ZeRO++ §3.2's memory cost).
Bytes Zero3Params::hpz_secondary_bytes() const {
  Bytes secondary = 0;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    for (std::size_t u = 0; u < chunks_[c].size(); ++u) {
      if (!residency_[c].persistent[u]) {
        secondary += 2 * ceil_div(fetched(chunks_[c][u]), dp_subgroup_);
      }
    }
  }
  return secondary;
}

void Zero3Params::plan_chunk(int chunk) {
  const std::vector<Unit>& units = chunks_[chunk];
  const std::size_t n = units.size();
  const ZeroConfig& z = s_.zero;
  Residency& r = residency_[chunk];
  r.persistent.assign(n, false);
  r.keep_after_forward.assign(n, false);
  for (std::size_t u = 0; u < n; ++u) r.persistent[u] = units[u].params <= z.stage3_param_persistence_threshold;
  // A unit stays gathered from its forward to its backward when the parameters used in between
  // (the later units' forward and backward) are within stage3_max_reuse_distance.
  std::int64_t between = 0;
  for (std::size_t i = n; i-- > 0;) {
    // DeepSpeed's __params_to_release stops looking once the parameters traversed reach
    // max_reuse_distance, so only strictly nearer reuses keep a parameter.
    r.keep_after_forward[i] = between < z.stage3_max_reuse_distance;
    between += 2 * units[i].params;
  }
  r.trace.clear();
  for (std::size_t u = 0; u < n; ++u) r.trace.push_back({static_cast<int>(u), false});
  for (std::size_t u = n; u-- > 0;) r.trace.push_back({static_cast<int>(u), true});
  r.needs_fetch.assign(r.trace.size(), false);
  for (std::size_t k = 0; k < r.trace.size(); ++k) {
    auto [u, bwd] = r.trace[k];
    r.needs_fetch[k] = !r.persistent[u] && !(bwd && r.keep_after_forward[u]);
  }
  // The pre-hook of use c fetches c and prefetches the following uses that need a fetch, up to
  // stage3_prefetch_bucket_size elements (the last may overshoot) within
  // stage3_max_live_parameters. issue_at[k]: the first use whose pre-hook issues k's fetch.
  r.issue_at.assign(r.trace.size(), -1);
  std::int64_t budget =
      std::min<std::int64_t>(z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters);
  // DeepSpeed 0.3-0.5 waited for every gather at once (fetch_sub_module synchronizes), so no
  // prefetch was ever in flight beside the compute.
  if (z.per_parameter_stage3) budget = 0;
  for (std::size_t c = 0; c < r.trace.size(); ++c) {
    if (r.needs_fetch[c] && r.issue_at[c] < 0) r.issue_at[c] = static_cast<int>(c);
    std::int64_t taken = 0;
    for (std::size_t k = c + 1; k < r.trace.size() && taken < budget; ++k) {
      if (!r.needs_fetch[k]) continue;
      if (r.issue_at[k] < 0) r.issue_at[k] = static_cast<int>(c);
      taken += units[r.trace[k].first].params;
    }
  }
}

void Zero3Params::begin_forward(int chunk, bool first_forward) {
  first_forward_ = first_forward;
  fetch_op_.assign(residency_[chunk].trace.size(), -1);
}

std::int32_t Zero3Params::fetch_forward(int chunk, std::size_t u, std::int32_t hook_after) {
  issue_fetches(chunk, u, hook_after);
  return fetch_op_[u];
}

bool Zero3Params::release_after_forward(int chunk, std::size_t u) const {
  return fetch_op_[u] >= 0 && !residency_[chunk].keep_after_forward[u];
}

void Zero3Params::end_forward(int mb, int chunk) { pending_fetches_[{mb, chunk}] = fetch_op_; }

void Zero3Params::begin_backward(int mb, int chunk) {
  auto it = pending_fetches_.find({mb, chunk});
  fetch_op_ = it->second;
  pending_fetches_.erase(it);
}

std::int32_t Zero3Params::fetch_backward(int chunk, std::size_t use, std::int32_t hook_after) {
  issue_fetches(chunk, use, hook_after);
  return fetch_op_[use];
}

bool Zero3Params::release_after_backward(int chunk, std::size_t unit, std::size_t use) const {
  const Residency& res = residency_[chunk];
  const bool gathered_now = fetch_op_[use] >= 0;
  const bool kept = !gathered_now && res.keep_after_forward[unit] && !res.persistent[unit];
  return gathered_now || kept;
}

void Zero3Params::issue_fetches(int chunk, std::size_t use, std::int32_t hook_after) {
  issued_before_hook_ = last_issued_;
  const Residency& r = residency_[chunk];
  const Stream stream = s_.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
  const std::int64_t dp = s_.parallel.dp_cp();
  for (std::size_t k = use; k < r.trace.size(); ++k) {
    if (r.issue_at[k] != static_cast<int>(use)) {
      if (k > use && r.issue_at[k] > static_cast<int>(use)) break;
      continue;
    }
    const Unit& u = chunks_[chunk][r.trace[k].first];
    const bool backward = r.trace[k].second;
    if (s_.zero.per_parameter_stage3) {
      fetch_op_[k] = per_parameter_gather(u, backward, hook_after);
      continue;
    }
    std::int32_t a =
        e_.alloc(MemCategory::Buffers, gathered_bytes(u), "gathered " + u.label, stream, {hook_after});
    std::vector<std::int32_t> deps = {a};
    const std::vector<std::int64_t> calls = gather_calls(u);
    if (offloads_params(s_)) {
      // The partition comes in from host memory (or NVMe through it) before the all-gather.
      const WorkKind from = s_.zero.offload_param == OffloadDevice::Nvme ? WorkKind::NvmeToDevice
                                                                          : WorkKind::HostToDevice;
      Bytes partition = 0;
      for (std::int64_t elements : calls) partition += 2 * ceil_div(elements, dp);
      deps.push_back(offload_.host_copy(from, partition, Stream::H2D,
                                        "param partition in " + u.label, {hook_after}));
    }
    // Which ranks hold the pieces: MiCS gathers inside its shard group; with hpZ only the first
    // gather of a parameter in a step (the first forward) reads the primary partition over the
    // whole DP group, every later one the node's secondary copy (DeepSpeed
    // partition_parameters.py: ds_secondary_tensor, dropped after the optimizer step).
    const bool shard_group = s_.zero.mics_shard_size > 0 ||
                             (s_.zero.hpz_partition_size > 1 && (backward || !first_forward_));
    const std::int64_t n = shard_group ? dp_subgroup_ : dp;
    const Peer peer = shard_group ? Peer::DpShard : Peer::Dp;
    const std::string unit_name = unit_op_name(u, backward ? "gather(bwd)" : "gather(fwd)");
    std::int32_t prev = -1;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (calls[i] == 0) continue;
      const std::string name =
          calls.size() > 1 ? unit_name + " module " + std::to_string(i) : unit_name;
      const std::vector<std::int32_t> d = i == 0 ? deps : std::vector<std::int32_t>{prev};
      const std::int64_t piece = ceil_div(calls[i], n);
      // qwZ: int8 with one fp32 scale per group of at most kQwzGroup elements; the codes and the
      // scales are two all-gathers on the same group, and the gathered weights are dequantized
      // before use. MiCS ignores the flag (mics.py).
      if (s_.zero.quantized_weights && s_.zero.mics_shard_size <= 0) {
        const std::int32_t q = quantize_op(e_, 3 * piece, stream, "quantize " + name, d);
        const std::int32_t codes = e_.collective(peer, CollectiveKind::AllGather, piece * n,
                                                 stream, name + " int8", {q});
        const std::int32_t scales = e_.collective(peer, CollectiveKind::AllGather,
                                                  4 * ceil_div(piece, kQwzGroup) * n, stream,
                                                  name + " scales", {codes});
        prev = quantize_op(e_, 3 * calls[i], stream, "dequantize " + name, {scales});
      } else {
        prev = e_.collective(peer, CollectiveKind::AllGather,
                             gathered_param_bytes(s_, u) * piece * n, stream, name, d);
      }
    }
    // With expert parallelism the routed experts are sharded over the ranks holding the same
    // experts (torchtitan: the block's expert parameters on the efsdp mesh, the others on the
    // dp mesh, distributed/fsdp.py), so they come in an all-gather over that group of their own.
    if (const std::int64_t experts = expert_group_params(s_, u); experts > 0) {
      const std::int64_t edp = s_.expert_dp();
      const std::vector<std::int32_t> after = prev >= 0 ? std::vector<std::int32_t>{prev} : deps;
      prev = e_.collective(Peer::Edp, CollectiveKind::AllGather,
                           gathered_param_bytes(s_, u) * ceil_div(experts, edp) * edp, stream,
                           unit_name + " experts", after);
    }
    fetch_op_[k] = prev;
    last_issued_ = prev;
  }
}

// The elements of each all-gather call that fetches a unit: one call for the whole unit, or,
// when the framework's hooks fetch modules one by one, one per module (the unit's small tensors
// with the first, unless they persist). Each call pads its own pieces, as each parameter is
// partitioned on its own.
std::vector<std::int64_t> Zero3Params::gather_calls(const Unit& u) const {
  if (!policy_.gather_per_module || u.weights.size() < 2) return {fetched(u) - expert_group_params(s_, u)};
  std::vector<std::int64_t> calls = u.weights;
  if (!smalls_persist(u)) calls[0] += small_tensor_elements(u);
  return calls;
}

// DeepSpeed 0.3.13-0.5 stage 3 (the 2021 code, partition_parameters.py _allgather_param): one
// synchronous all-gather per parameter tensor, on the main stream after a
// torch.cuda.synchronize(), each after its tensor list is built on the host.
std::int32_t Zero3Params::per_parameter_gather(const Unit& u, bool backward, std::int32_t after) {
  const std::int64_t dp = s_.parallel.dp_cp();
  // A unit of small tensors only (a head that is just the final norm) is gathered tensor by
  // tensor when the persistence threshold lets it be partitioned at all.
  const int tensors = u.big_tensors > 0 ? u.big_tensors : std::max(1, u.small_tensors);
  const std::int64_t each = ceil_div(u.params, tensors);
  std::int32_t prev = e_.alloc(MemCategory::Buffers, 2 * u.params, "gathered " + u.label,
                               Stream::Compute, {after});
  const char* pass = backward ? "gather(bwd)" : "gather(fwd)";
  for (int t = 0; t < tensors; ++t) {
    const std::string name = unit_op_name(u, pass) + " tensor " + std::to_string(t);
    prev = tensor_list_op(e_, s_, "tensor list " + name, {prev});
    prev = e_.collective(Peer::Dp, CollectiveKind::AllGather, 2 * ceil_div(each, dp) * dp,
                         Stream::Compute, name, {prev});
  }
  return prev;
}

}  // namespace zerosim::plan_detail
