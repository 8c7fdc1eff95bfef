#include "sim/parallel/gradients.h"

#include <algorithm>

#include "sim/parallel/zero3_params.h"

namespace zerosim::plan_detail {

void GradientReducer::begin_backward(bool accumulating, int chunk) {
  chunk_ = chunk;
  bucket_elements_ = expert_bucket_elements_ = 0;
  bucket_tensors_ = 0;
  last_reduction_ = prev_reduction_ = older_reduction_ = -1;
  accumulating_ = accumulating;
  setup_buckets(accumulating);
}

void GradientReducer::setup_buckets(bool accumulating) {
  if (g_.ipg_buffer && !ipg_allocated_) {
    ipg_bytes_ = 2 * s_.zero.reduce_bucket_size * (s_.zero.overlap_comm ? 2 : 1);
    e_.alloc(MemCategory::Buffers, ipg_bytes_, "ipg_buffer");
    ipg_allocated_ = true;
  }
  if (g_.accumulate_in_temporary && accumulating && !partition_temp_) {
    e_.alloc(MemCategory::Buffers, 2 * info_.dp_partition, "grads_in_partition (accumulate)");
    partition_temp_ = true;
  }
}

std::int64_t GradientReducer::bucket_limit() const {
  return chunk_bucket_limit(g_, chunk_,
                            bucket_count_ == 0 ? g_.first_bucket_limit : g_.bucket_limit);
}

void GradientReducer::gradient_ready(std::int64_t params, std::int32_t produced_by,
                                     std::int64_t tensors) {
  const std::int64_t limit = bucket_limit();
  if (g_.rule == BucketRule::CloseAtCap) {
    // The bucket is reduced when all its gradients are ready, i.e. after the last unit that
    // filled it.
    bucket_elements_ += params;
    bucket_tensors_ += tensors;
    if (bucket_elements_ >= limit) flush(produced_by);
    return;
  }
  if (params > limit) {
    flush(produced_by);  // the pending bucket first, as DeepSpeed does
    flush_elements(params, tensors, produced_by);  // then the parameter too large for it alone
    return;
  }
  if (bucket_elements_ + params > limit && bucket_elements_ > 0) flush(produced_by);
  bucket_elements_ += params;
  bucket_tensors_ += tensors;
}

void GradientReducer::expert_gradients_ready(std::int64_t params, std::int32_t produced_by) {
  const std::int64_t limit = chunk_bucket_limit(g_, chunk_, g_.bucket_limit);
  if (g_.rule == BucketRule::CloseAtCap) {
    expert_bucket_elements_ += params;
    if (expert_bucket_elements_ >= limit) flush_experts(produced_by);
    return;
  }
  if (expert_bucket_elements_ + params > limit && expert_bucket_elements_ > 0) {
    flush_experts(produced_by);
  }
  expert_bucket_elements_ += params;
}

void GradientReducer::flush_experts(std::int32_t produced_by) {
  if (expert_bucket_elements_ == 0) return;
  std::vector<std::int32_t> deps;
  if (produced_by >= 0) deps.push_back(produced_by);
  last_reduction_ = e_.collective(Peer::Edp, g_.collective,
                                  g_.reduce_bytes_per_element * expert_bucket_elements_, g_.stream,
                                  "expert " + g_.collective_name + " #" +
                                      std::to_string(expert_bucket_count_),
                                  deps);
  ++expert_bucket_count_;
  expert_bucket_elements_ = 0;
}

void GradientReducer::unit_gradients_ready(const Unit& u, std::int32_t produced_by) {
  if (const std::int64_t experts = expert_group_params(s_, u); experts > 0) {
    // (Expert parallelism runs with stages 0-2, which hook a unit's gradients as one.)
    expert_gradients_ready(experts, produced_by);
    gradient_ready(u.params - experts, produced_by);
    return;
  }
  if (!g_.per_tensor_hooks) {
    gradient_ready(u.params, produced_by);
    return;
  }
  if (u.weights.empty()) {  // norms (and biases) only: one bucket holds them all
    gradient_ready(u.params, produced_by, std::max(u.small_tensors, 1));
    return;
  }
  const std::int64_t small = small_tensor_elements(u);
  const auto modules = static_cast<std::int64_t>(u.weights.size());
  for (std::size_t i = u.weights.size(); i-- > 0;) {
    gradient_ready(u.weights[i], produced_by);
    const std::int64_t share = small / modules + (i == 0 ? small % modules : 0);
    // Tensors split as the elements are; a share of elements smaller than a tensor counts one.
    const std::int64_t tensors = u.small_tensors / modules + (i == 0 ? u.small_tensors % modules : 0);
    if (share > 0) gradient_ready(share, produced_by, std::max<std::int64_t>(tensors, 1));
  }
}

void GradientReducer::flush(std::int32_t produced_by) {
  if (bucket_elements_ == 0) return;
  flush_elements(bucket_elements_, bucket_tensors_, produced_by);
  bucket_elements_ = 0;
  bucket_tensors_ = 0;
}

void GradientReducer::flush_elements(std::int64_t elements, std::int64_t tensors,
                                     std::int32_t produced_by) {
  std::vector<std::int32_t> deps;
  if (produced_by >= 0) deps.push_back(produced_by);
  if (g_.reduce_host_ops_per_rank > 0 && s_.zero.mics_shard_size <= 0 &&
      !s_.zero.quantized_gradients) {
    // The training thread slices each tensor of the bucket once per rank before it can launch
    // the collective.
    const std::int64_t ops = g_.reduce_host_ops_per_rank * tensors * s_.parallel.dp_cp();
    deps = {e_.work_op(OpKind::Compute, {WorkKind::HostOverhead, ops, 0},
                       Stream::Compute, Phase::Communication,
                       "tensor slices " + g_.collective_name + " #" + std::to_string(bucket_count_),
                       deps)};
  }
  const std::int32_t red =
      reduce_bucket(elements, g_.collective_name + " #" + std::to_string(bucket_count_), deps);
  ++bucket_count_;
  if (offloads_optimizer(s_)) offload_.gradients(elements, red, accumulating_);
  if (g_.throttle_depth > 0) {
    const std::int32_t wait = g_.throttle_depth == 2 ? older_reduction_ : prev_reduction_;
    if (wait >= 0) e_.host_wait(wait);
  }
  older_reduction_ = prev_reduction_;
  prev_reduction_ = red;
  last_reduction_ = red;
}

// One gradient bucket's reduction, by sharding variant. Returns the op after which this rank's
// partition of the bucket is reduced.
std::int32_t GradientReducer::reduce_bucket(std::int64_t elements, const std::string& name,
                                            const std::vector<std::int32_t>& deps) {
  const ZeroConfig& z = s_.zero;
  const Bytes g = g_.reduce_bytes_per_element;
  const CollectiveKind kind = g_.collective;
  const Stream stream = g_.stream;
  const std::int64_t k = dp_subgroup_, dp = s_.parallel.dp_cp();
  if (z.mics_shard_size > 0) {
    // Reduce-scatter inside the shard group, then across the replicas as the framework does.
    std::int32_t rs = e_.collective(Peer::DpShard, kind, g * elements, stream, name, deps);
    if (g_.replicas != ReplicaReduce::EachBucket) return rs;
    return e_.collective(Peer::DpReplica, CollectiveKind::AllReduce, g * ceil_div(elements, k),
                         stream, name + " (replicas)", {rs});
  }
  if (z.quantized_gradients && z.stage == 3 && k < dp) {
    // qgZ (DeepSpeed all_to_all_quant_reduce): int4 codes with fp32 scales (a group per row,
    // ~hidden elements); an all-to-all inside the node, a dequantize-reduce-requantize leaving
    // 1/k of the bucket, an all-to-all across nodes, and a final dequantize and sum. Used only
    // across nodes; the result is this rank's reduce-scatter partition.
    const std::int64_t h = std::max<std::int64_t>(1, s_.model.hidden_size);
    const Bytes codes = ceil_div(elements, 2), scales = 4 * ceil_div(elements, h);
    std::int32_t q = quantize_op(e_, g * elements + codes, stream, "quantize " + name, deps);
    std::int32_t intra = e_.collective(Peer::DpShard, CollectiveKind::AllToAll, codes + scales,
                                       stream, name + " int4 all_to_all (node)", {q});
    std::int32_t r = quantize_op(e_, codes + scales + ceil_div(codes, k), stream,
                                 "reduce-requantize " + name, {intra});
    std::int32_t inter = e_.collective(Peer::DpReplica, CollectiveKind::AllToAll,
                                       ceil_div(codes + scales, k), stream,
                                       name + " int4 all_to_all (nodes)", {r});
    return quantize_op(e_, ceil_div(codes, k) + g * ceil_div(elements, dp), stream,
                       "dequantize " + name, {inter});
  }
  return e_.collective(Peer::Dp, kind, g * elements, stream, name, deps);
}

// DeepSpeed 0.3.13-0.5 (partition_parameters.py _reduce_scatter_gradient): a tensor list built
// on the host before each reduce-scatter, as for its gathers.
void GradientReducer::per_parameter_reduce(const Unit& u, std::int32_t produced_by) {
  const int big = u.big_tensors;
  const std::int64_t small_each =
      big > 0 ? std::max<std::int64_t>(1, s_.model.hidden_size / s_.parallel.tp)
              : ceil_div(u.params, std::max(1, u.small_tensors));
  const std::int64_t each = big > 0 ? ceil_div(u.params - u.small_tensors * small_each, big) : 0;
  std::int32_t host = produced_by;
  for (int t = 0; t < big + u.small_tensors; ++t) {
    const std::int64_t elements = t < big ? std::max<std::int64_t>(1, each) : small_each;
    const std::string name =
        unit_op_name(u, "grad reduce_scatter") + " tensor " + std::to_string(t);
    host = tensor_list_op(e_, s_, "tensor list " + name, {host});
    last_reduction_ = e_.collective(Peer::Dp, CollectiveKind::ReduceScatter,
                                    g_.reduce_bytes_per_element * elements, g_.stream, name, {host});
  }
}

void GradientReducer::end_backward(std::int32_t last_backward, bool last_of_step) {
  flush_experts(last_backward);
  flush(last_backward);
  const Stream stream = g_.stream;
  if (last_of_step && g_.replicas == ReplicaReduce::OncePerStep && last_reduction_ >= 0) {
    last_reduction_ = e_.collective(Peer::DpReplica, CollectiveKind::AllReduce,
                                    g_.reduce_bytes_per_element * info_.dp_partition, stream,
                                    "grad all_reduce (replicas)", {last_reduction_});
  }
  if (last_of_step && s_.two_model_copies() && last_reduction_ >= 0) {
    // DualPipe: the other copy of these layers (stage pp - 1 - s, same DP index) has reduced its
    // gradients alike; the two sum them before the step, each its ZeRO partition (ASSUMPTION:
    // both copies laid out and partitioned alike; DeepSeek does not publish how they sync).
    const std::int64_t elements = s_.zero.stage >= 1 ? info_.dp_partition : info_.local_params;
    last_reduction_ = e_.collective(Peer::Mirror, CollectiveKind::AllReduce,
                                    g_.reduce_bytes_per_element * elements, stream,
                                    "grad all_reduce (dualpipe copies)", {last_reduction_});
  }
  if (last_reduction_ >= 0 && g_.sync_at_end) e_.host_wait(last_reduction_);
  if (ipg_allocated_ && (s_.zero.stage == 2 || last_of_step)) {
    e_.free_op(MemCategory::Buffers, ipg_bytes_, "ipg_buffer", stream);
    ipg_allocated_ = false;
  }
  if (partition_temp_) {
    e_.free_op(MemCategory::Buffers, 2 * info_.dp_partition, "grads_in_partition (accumulate)",
               stream);
    partition_temp_ = false;
  }
  if (last_of_step && last_reduction_ >= 0) final_reduction_ = last_reduction_;
}

void GradientReducer::reduce_after_flush(const std::vector<std::vector<Unit>>& chunks,
                                         std::int32_t after) {
  setup_buckets(true);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    chunk_ = static_cast<int>(c);
    for (const Unit& unit : chunks[c]) {
      const std::int64_t experts = expert_group_params(s_, unit);
      if (experts > 0) expert_gradients_ready(experts, after);
      gradient_ready(unit.params - experts, after);
    }
    if (c + 1 < chunks.size()) {
      flush_experts(after);
      flush(after);
    }
  }
  end_backward(after, true);
}

}  // namespace zerosim::plan_detail
