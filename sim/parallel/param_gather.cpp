#include "sim/parallel/param_gather.h"

namespace zerosim::plan_detail {

void ParamGather::after_step(std::int32_t after, Stream stream,
                             const std::vector<std::int64_t>& persistent) {
  const bool shards = s_.zero.mics_shard_size > 0;
  const std::int64_t dp = shards ? dp_subgroup_ : s_.parallel.dp_cp();
  const Peer peer = shards ? Peer::DpShard : Peer::Dp;
  if (policy_.params.gather_after_step) {
    // With expert parallelism the experts' partition is gathered over the expert-data-parallel
    // group, the rest of the partition over the DP group.
    const std::int64_t experts = info_.expert_partition;
    const std::int64_t partition = info_.dp_partition - experts;
    // FP8 layer weights (training.fp8_param_gather): one byte each, the experts among them.
    const std::int64_t fp8 = info_.fp8_partition;
    const int expert_bytes = s_.fp8_params_gathered_after_step() ? 1 : 2;
    // (nanotron returns before gathering over a single rank.)
    const Bytes flat =
        policy_.memory.flat_param_gather && dp > 1 ? 2 * partition * (dp + 1) : 0;
    // The rank's partition flattened, and one flat output per group rank
    // (distributed.py, all_gather_coalesced: a list of dp buffers, not one).
    if (flat > 0) {
      e_.alloc_tensors(MemCategory::Buffers, flat, "param gather flat copies",
                       std::vector<double>(static_cast<std::size_t>(dp + 1), 1.0), stream);
    }
    e_.collective(peer, CollectiveKind::AllGather, (2 * partition - fp8) * dp, stream,
                  "param all_gather", {after});
    if (flat > 0) e_.free_op(MemCategory::Buffers, flat, "param gather flat copies", stream);
    if (experts > 0) {
      const std::int64_t edp = s_.expert_dp();
      e_.collective(Peer::Edp, CollectiveKind::AllGather, expert_bytes * experts * edp, stream,
                    "expert param all_gather", {after});
    }
  }
  if (policy_.params.persistent_per_tensor) {
    // One all_gather_into_tensor per tensor, each padded on its own, then a device synchronize
    // (the step ends there).
    std::int32_t prev = after;
    for (std::size_t i = 0; i < persistent.size(); ++i) {
      prev = e_.collective(peer, CollectiveKind::AllGather, 2 * ceil_div(persistent[i], dp) * dp,
                           stream, "persistent param all_gather tensor " + std::to_string(i),
                           {prev});
    }
    return;
  }
  std::int64_t elements = 0;
  for (std::int64_t t : persistent) elements += t;
  if (elements > 0) {
    e_.collective(peer, CollectiveKind::AllGather, 2 * ceil_div(elements, dp) * dp, stream,
                  "persistent param all_gather", {after});
  }
}

std::int64_t ParamGather::elements_of(const Unit& u, Part part) const {
  const std::int64_t experts = expert_group_params(s_, u);
  return part == Part::Experts ? experts : u.params - experts;
}

std::vector<ParamGather::Bucket> ParamGather::buckets(const std::vector<Unit>& units,
                                                      Part part, int chunk) const {
  const std::int64_t limit = chunk_bucket_limit(policy_.grads, chunk, policy_.grads.bucket_limit);
  // A bucket closes once it reaches the limit.
  std::vector<Bucket> out;
  std::int64_t filled = 0, bytes = 0;
  std::size_t start = 0;
  bool open = false;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const std::int64_t elements = elements_of(units[i], part);
    if (elements == 0) continue;
    if (!open) start = i;
    open = true;
    filled += elements;
    bytes += gathered_param_bytes(s_, units[i]) * elements;
    if (filled >= limit) {
      out.push_back({start, bytes});
      filled = bytes = 0;
      open = false;
    }
  }
  if (open) out.push_back({start, bytes});
  return out;
}

std::int32_t ParamGather::in_forward(int chunk, Part part, const std::vector<Bucket>& buckets,
                                     std::size_t u, std::int32_t current, std::int32_t start) {
  if (buckets.empty() || u < buckets[0].first_unit) return current;
  std::size_t b = 0;
  while (b + 1 < buckets.size() && buckets[b + 1].first_unit <= u) ++b;
  if (buckets[b].first_unit != u) return current;  // inside a bucket already waited for
  const bool experts = part == Part::Experts;
  const std::int64_t n = experts ? s_.expert_dp() : s_.parallel.dp_cp();
  auto gather = [&](std::size_t i, const std::vector<std::int32_t>& deps) {
    return e_.collective(experts ? Peer::Edp : Peer::Dp, CollectiveKind::AllGather,
                         ceil_div(buckets[i].bytes, n) * n, Stream::DpComm,
                         std::string(experts ? "expert " : "") +
                             "param all_gather (overlapped) bucket " + std::to_string(i) + " c" +
                             std::to_string(chunk),
                         deps);
  };
  std::int32_t& next = next_gather_[static_cast<int>(part)];
  if (b == 0) next = gather(0, {start});
  const std::int32_t mine = next;
  if (b + 1 < buckets.size()) next = gather(b + 1, {mine});
  return mine;
}

}  // namespace zerosim::plan_detail
