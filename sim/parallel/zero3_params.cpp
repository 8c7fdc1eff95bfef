#include "sim/parallel/zero3_params.h"

#include <algorithm>
#include <cstdlib>

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
  Residency& r = residency_[chunk];
  r.calls.assign(n, {});
  r.persistent.assign(n, false);
  for (std::size_t u = 0; u < n; ++u) {
    r.calls[u] = gather_calls(units[u]);
    r.persistent[u] = units[u].params <= s_.zero.stage3_param_persistence_threshold;
  }
  r.trace.clear();
  for (std::size_t u = 0; u < n; ++u) r.trace.push_back({static_cast<int>(u), UseKind::Forward});
  r.backward_use.assign(n, 0);
  r.replay_use.assign(n, 0);
  const bool replay = s_.replays_layers_before_backward();
  for (std::size_t u = n; u-- > 0;) {
    // The layer's last block begins its backward: DeepSpeed's CheckpointFunction.backward replays
    // the layer's forward, each module's pre-forward hook firing again, before the backward hooks.
    if (replay && ends_layer(units, u)) {
      for (std::size_t j = layer_first_unit(units, u); j <= u; ++j) {
        r.replay_use[j] = r.trace.size();
        r.trace.push_back({static_cast<int>(j), UseKind::Replay});
      }
    }
    r.backward_use[u] = r.trace.size();
    r.trace.push_back({static_cast<int>(u), UseKind::Backward});
  }
  r.issues.assign(r.trace.size(), {});
  r.release_after.assign(r.trace.size(), false);
  if (policy_.coordinator_queue) {
    plan_queue(r, units);
  } else {
    plan_window(r, units);
  }
}

std::size_t Zero3Params::backward_use(int chunk, std::size_t unit) const {
  return residency_[chunk].backward_use[unit];
}

std::size_t Zero3Params::replay_use(int chunk, std::size_t unit) const {
  return residency_[chunk].replay_use[unit];
}

void Zero3Params::plan_window(Residency& r, const std::vector<Unit>& units) const {
  const std::size_t n = units.size();
  const ZeroConfig& z = s_.zero;
  // A unit stays gathered from its forward to its backward when the parameters used in between
  // (the later units' forward and backward) are within stage3_max_reuse_distance.
  std::vector<bool> keep_after_forward(n, false);
  std::int64_t between = 0;
  for (std::size_t i = n; i-- > 0;) {
    // DeepSpeed's __params_to_release stops looking once the parameters traversed reach
    // max_reuse_distance, so only strictly nearer reuses keep a parameter.
    keep_after_forward[i] = between < z.stage3_max_reuse_distance;
    between += 2 * units[i].params;
  }
  std::vector<bool> needs_fetch(r.trace.size(), false);
  for (std::size_t k = 0; k < r.trace.size(); ++k) {
    const int u = r.trace[k].unit;
    const bool bwd = r.trace[k].kind == UseKind::Backward;
    needs_fetch[k] = !r.persistent[u] && !(bwd && keep_after_forward[u]);
    // Released after the forward unless kept; after the backward whatever is gathered.
    r.release_after[k] = bwd ? !r.persistent[u] : needs_fetch[k] && !keep_after_forward[u];
  }
  // The pre-hook of use c fetches c and prefetches the following uses that need a fetch, up to
  // stage3_prefetch_bucket_size elements (the last may overshoot) within
  // stage3_max_live_parameters: issue_at[k], the first use whose pre-hook issues k's fetch.
  std::vector<int> issue_at(r.trace.size(), -1);
  std::int64_t budget =
      std::min<std::int64_t>(z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters);
  // DeepSpeed 0.3-0.5 waited for every gather at once (fetch_sub_module synchronizes), so no
  // prefetch was ever in flight beside the compute.
  if (z.per_parameter_stage3()) budget = 0;
  for (std::size_t c = 0; c < r.trace.size(); ++c) {
    if (needs_fetch[c] && issue_at[c] < 0) issue_at[c] = static_cast<int>(c);
    std::int64_t taken = 0;
    for (std::size_t k = c + 1; k < r.trace.size() && taken < budget; ++k) {
      if (!needs_fetch[k]) continue;
      if (issue_at[k] < 0) issue_at[k] = static_cast<int>(c);
      taken += units[r.trace[k].unit].params;
    }
  }
  for (std::size_t k = 0; k < r.trace.size(); ++k) {
    if (issue_at[k] < 0) continue;
    for (std::size_t m = 0; m < r.calls[r.trace[k].unit].size(); ++m) {
      r.issues[issue_at[k]].push_back({static_cast<int>(k), static_cast<int>(m)});
    }
  }
}

// DeepSpeed's PartitionedParameterCoordinator (partitioned_param_coordinator.py; v0.6.6 to the
// newest release, and v0.6.0-0.6.3 under zero.stage3_implementation coalesced-v0.6.0), played
// over the trace at module granularity:
//  - the queue holds every traced module's parameters in trace order (a backward use's modules
//    in reverse); a module's pre-hook (fetch_sub_module) gathers its own parameters if they are
//    not available, pops its own entry, then pops entries to prefetch: those not available are
//    gathered and count toward the budget, min(stage3_prefetch_bucket_size,
//    stage3_max_live_parameters - the elements gathered and not released); in 0.6.0-0.6.3 every
//    popped entry counts, so a module's next use, already gathered, can use up the budget;
//  - after a use (release_sub_module) a module's parameters are released unless they persist,
//    or are used again before stage3_max_reuse_distance elements of other uses have passed
//    (__params_to_release; 0.6.0-0.6.5 also at exactly that distance), or (0.6.6 on, PR #2016)
//    the prefetcher has popped a later use of them while they were gathered.
// ASSUMPTION: a unit's modules are released together and their pre-hooks run together, when the
// unit's compute op begins; a module's parameters are those of its gather call. Not modelled:
// with parameters on NVMe the real queue stops at a partition still there and leaves it to its
// NVMe prefetch (__prefetch_nvme_param_partitions); here it is prefetched as any other, its
// swap-in before its gather.
void Zero3Params::plan_queue(Residency& r, const std::vector<Unit>& units) const {
  const ZeroConfig& z = s_.zero;
  const bool v060 = z.stage3_implementation == Stage3Implementation::CoalescedV060;
  const std::size_t n = r.trace.size();
  // Whether use k's unit is used again within the reuse distance.
  const auto reused_soon = [&](std::size_t k) {
    const int u = r.trace[k].unit;
    std::int64_t between = 0;
    for (std::size_t j = k + 1; j < n; ++j) {
      if (v060 ? between > z.stage3_max_reuse_distance
               : between >= z.stage3_max_reuse_distance) {
        return false;
      }
      if (r.trace[j].unit == u) return true;
      between += units[r.trace[j].unit].params;
    }
    return false;
  };
  struct Entry {
    int use, call;
    std::int64_t elements;
  };
  std::vector<Entry> queue;
  // A module's elements: its call's, the unit's routed experts with the last.
  const auto elements = [&](int u, int call) {
    const std::vector<std::int64_t>& c = r.calls[u];
    const bool last = call + 1 == static_cast<int>(c.size());
    return c[call] + (last ? expert_group_params(s_, units[u]) : 0);
  };
  std::vector<std::vector<std::size_t>> entries_of(n);  // per use: its entries, in hook order
  for (std::size_t k = 0; k < n; ++k) {
    const int u = r.trace[k].unit;
    const int m = static_cast<int>(r.calls[u].size());
    const bool reverse = r.trace[k].kind == UseKind::Backward;
    for (int i = 0; i < m; ++i) {
      const int call = reverse ? m - 1 - i : i;
      entries_of[k].push_back(queue.size());
      queue.push_back({static_cast<int>(k), call, elements(u, call)});
    }
  }
  enum class Status : std::uint8_t { NotAvailable, Inflight, Available };
  std::vector<std::vector<Status>> status(units.size());
  for (std::size_t u = 0; u < units.size(); ++u) {
    status[u].assign(r.calls[u].size(),
                     r.persistent[u] ? Status::Available : Status::NotAvailable);
  }
  std::vector<int> popped_for(units.size(), -1);  // the latest use the prefetcher popped
  std::size_t head = 0;
  std::int64_t available = 0;  // __n_available_params
  int batch = 0;               // __all_gather_params calls so far
  for (std::size_t c = 0; c < n; ++c) {
    const int u = r.trace[c].unit;
    for (std::size_t e : entries_of[c]) {
      const Entry& own = queue[e];
      if (status[u][own.call] == Status::NotAvailable) {
        r.issues[c].push_back({static_cast<int>(c), own.call, batch++});
        available += own.elements;
      }
      status[u][own.call] = Status::Available;
      if (head == e) ++head;
      if (z.stage3_prefetch_bucket_size <= 0) continue;
      const std::int64_t budget = std::min<std::int64_t>(
          z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters - available);
      std::int64_t prefetching = 0;
      const int prefetch_batch = batch++;
      while (head < queue.size() && prefetching < budget) {
        const Entry& next = queue[head++];
        const int v = r.trace[next.use].unit;
        popped_for[v] = std::max(popped_for[v], next.use);
        Status& st = status[v][next.call];
        if (st == Status::NotAvailable) {
          r.issues[c].push_back({next.use, next.call, prefetch_batch});
          st = Status::Inflight;
          available += next.elements;
          prefetching += next.elements;
        } else if (v060) {
          prefetching += next.elements;
        }
      }
    }
    const bool skipped = !v060 && popped_for[u] > static_cast<int>(c);
    r.release_after[c] = !r.persistent[u] && !skipped && !reused_soon(c);
    if (r.release_after[c]) {
      for (std::size_t m = 0; m < r.calls[u].size(); ++m) {
        status[u][m] = Status::NotAvailable;
        available -= elements(u, static_cast<int>(m));
      }
    }
  }
}

void Zero3Params::begin_forward(int chunk, bool first_forward) {
  first_forward_ = first_forward;
  fetch_op_.assign(residency_[chunk].trace.size(), -1);
}

void Zero3Params::end_forward(int mb, int chunk) { pending_fetches_[{mb, chunk}] = fetch_op_; }

void Zero3Params::begin_backward(int mb, int chunk) {
  auto it = pending_fetches_.find({mb, chunk});
  fetch_op_ = it->second;
  pending_fetches_.erase(it);
}

std::int32_t Zero3Params::fetch(int chunk, std::size_t use, std::int32_t hook_after) {
  issue_fetches(chunk, use, hook_after);
  return fetch_op_[use];
}

void Zero3Params::issue_fetches(int chunk, std::size_t use, std::int32_t hook_after) {
  const std::vector<Issue>& issues = residency_[chunk].issues[use];
  const Stream stream = s_.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
  for (std::size_t i = 0; i < issues.size();) {
    // One all-gather call: its flat buffer (if any) before its gathers, dropped after the last
    // of them has copied its parameters out.
    std::size_t end = i;
    while (end < issues.size() && issues[end].batch == issues[i].batch) ++end;
    const Bytes flat = flat_buffer_bytes(chunk, issues, i, end);
    const std::int32_t flat_op =
        flat > 0 ? e_.alloc(MemCategory::Buffers, flat, "gather flat buffer", stream, {hook_after}) : -1;
    std::vector<std::int32_t> copied;
    while (i < end) {
      // The calls of one use issued in a row (in module order, or reversed for a backward) go
      // together, in module order.
      std::size_t j = i;
      while (j + 1 < end && issues[j + 1].use == issues[i].use &&
             std::abs(issues[j + 1].call - issues[j].call) == 1 &&
             (j == i || issues[j + 1].call - issues[j].call == issues[j].call - issues[j - 1].call)) {
        ++j;
      }
      const std::size_t k = static_cast<std::size_t>(issues[i].use);
      const std::size_t first = static_cast<std::size_t>(std::min(issues[i].call, issues[j].call));
      const std::size_t last = static_cast<std::size_t>(std::max(issues[i].call, issues[j].call));
      fetch_op_[k] = gather(chunk, k, first, last, hook_after, flat_op);
      copied.push_back(fetch_op_[k]);
      i = j + 1;
    }
    if (flat > 0) e_.free_op(MemCategory::Buffers, flat, "gather flat buffer", stream, copied);
  }
}

bool Zero3Params::gathers_in_shard_group(int chunk, std::size_t k) const {
  const bool backward = residency_[chunk].trace[k].kind != UseKind::Forward;
  return s_.zero.mics_shard_size > 0 ||
         (s_.zero.hpz_partition_size > 1 && (backward || !first_forward_));
}

Bytes Zero3Params::flat_buffer_bytes(int chunk, const std::vector<Issue>& issues,
                                     std::size_t first, std::size_t end) const {
  // MiCS gathers into one output tensor per parameter (mics.py,
  // _flat_all_gather_with_coalescing_manager). (DeepSpeed's stage 3 has no expert parallelism.)
  if (!policy_.allocates_tensor_by_tensor || s_.zero.mics_shard_size > 0) return 0;
  const Residency& r = residency_[chunk];
  int tensors = 0;
  Bytes bytes = 0;
  for (std::size_t i = first; i < end; ++i) {
    const std::size_t k = static_cast<std::size_t>(issues[i].use);
    const Unit& u = chunks_[chunk][r.trace[k].unit];
    const std::int64_t elements = r.calls[r.trace[k].unit][static_cast<std::size_t>(issues[i].call)];
    if (elements <= 0) continue;
    const std::int64_t n = gathers_in_shard_group(chunk, k) ? dp_subgroup_ : s_.parallel.dp_cp();
    // qwZ gathers int8 codes and dequantizes them into a 16-bit flat copy.
    const int per_element = s_.zero.quantized_weights ? 1 + 2 : gathered_param_bytes(s_, u);
    ++tensors;
    bytes += per_element * ceil_div(elements, n) * n;
  }
  return tensors > 1 ? bytes : 0;
}

std::int32_t Zero3Params::gather(int chunk, std::size_t k, std::size_t first, std::size_t last,
                                 std::int32_t hook_after, std::int32_t flat) {
  const Residency& r = residency_[chunk];
  const Unit& u = chunks_[chunk][r.trace[k].unit];
  const bool backward = r.trace[k].kind != UseKind::Forward;
  if (s_.zero.per_parameter_stage3()) return per_parameter_gather(u, backward, hook_after);
  const Stream stream = s_.zero.overlap_comm ? Stream::DpComm : Stream::Compute;
  const std::int64_t dp = s_.parallel.dp_cp();
  const std::vector<std::int64_t>& calls = r.calls[r.trace[k].unit];
  const bool with_experts = last + 1 == calls.size();
  const std::int64_t experts = with_experts ? expert_group_params(s_, u) : 0;
  std::int64_t elements = experts;
  std::vector<double> tensors;  // the gathered parameters, one per module (and the experts)
  for (std::size_t i = first; i <= last; ++i) {
    elements += calls[i];
    if (calls[i] > 0) tensors.push_back(static_cast<double>(calls[i]));
  }
  if (experts > 0) tensors.push_back(static_cast<double>(experts));
  const std::string gathered = "gathered " + u.label;
  const Bytes gathered_bytes = gathered_param_bytes(s_, u) * elements;
  // Into a flat buffer the parameters are copied out of once gathered; otherwise into their own
  // tensors (a framework that gathers tensor by tensor) or the unit's one block.
  std::int32_t a = flat;
  if (flat < 0) {
    a = policy_.allocates_tensor_by_tensor
            ? e_.alloc_tensors(MemCategory::Buffers, gathered_bytes, gathered, tensors, stream, {hook_after})
            : e_.alloc(MemCategory::Buffers, gathered_bytes, gathered, stream, {hook_after});
  }
  std::vector<std::int32_t> deps = {a};
  if (offloads_params(s_)) {
    // The partition comes in from host memory (or NVMe through it) before the all-gather.
    const WorkKind from = s_.zero.offload_param == OffloadDevice::Nvme ? WorkKind::NvmeToDevice
                                                                        : WorkKind::HostToDevice;
    Bytes partition = 0;
    for (std::size_t i = first; i <= last; ++i) partition += 2 * ceil_div(calls[i], dp);
    deps.push_back(offload_.host_copy(from, partition, Stream::H2D,
                                      "param partition in " + u.label, {hook_after}));
  }
  // Which ranks hold the pieces: MiCS gathers inside its shard group; with hpZ only the first
  // gather of a parameter in a step (the first forward) reads the primary partition over the
  // whole DP group, every later one the node's secondary copy (DeepSpeed
  // partition_parameters.py: ds_secondary_tensor, dropped after the optimizer step).
  const bool shard_group = gathers_in_shard_group(chunk, k);
  const std::int64_t n = shard_group ? dp_subgroup_ : dp;
  const Peer peer = shard_group ? Peer::DpShard : Peer::Dp;
  const char* pass = r.trace[k].kind == UseKind::Forward  ? "gather(fwd)"
                     : r.trace[k].kind == UseKind::Replay ? "gather(recompute)"
                                                          : "gather(bwd)";
  const std::string unit_name = unit_op_name(u, pass);
  std::int32_t prev = -1;
  for (std::size_t i = first; i <= last; ++i) {
    if (calls[i] == 0) continue;
    const std::string name =
        calls.size() > 1 ? unit_name + " module " + std::to_string(i) : unit_name;
    const std::vector<std::int32_t> d = prev < 0 ? deps : std::vector<std::int32_t>{prev};
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
  if (experts > 0) {
    const std::int64_t edp = s_.expert_dp();
    const std::vector<std::int32_t> after = prev >= 0 ? std::vector<std::int32_t>{prev} : deps;
    prev = e_.collective(Peer::Edp, CollectiveKind::AllGather,
                         gathered_param_bytes(s_, u) * ceil_div(experts, edp) * edp, stream,
                         unit_name + " experts", after);
  }
  if (flat >= 0) {
    const std::vector<std::int32_t> after = prev >= 0 ? std::vector<std::int32_t>{prev} : deps;
    prev = e_.alloc_tensors(MemCategory::Buffers, gathered_bytes, gathered, tensors, stream, after);
  }
  return prev;
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
