// Conservation invariants on random small scenarios (fixed seeds), checked on what the engine
// played rather than on formulas:
//   - no op starts before its explicit dependencies and its stream predecessor have ended;
//   - the members of a collective start together and end together;
//   - simulated time never goes backwards (completion order has non-decreasing end times);
//   - every rank's memory per category never goes negative, every temporary is freed, and what
//     is left at the end is the model states + the cuBLAS workspace + the persistent buffers;
//   - bytes are conserved in every collective and send/recv (derived per ring position below);
//   - the engine is deterministic (two runs, same start/end of every op, same fingerprint);
//   - on a real cluster topology, no link of the flow network carries more than its capacity.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "sim/cluster/topology.h"
#include "sim/core/error.h"
#include "sim/cluster/gpu_generation.h"
#include "sim/net/flow_network.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// A random small scenario: 1-16 GPUs of DGX A100 nodes, 2-8 layers, every ZeRO stage, TP, SP,
// PP with each schedule, every recompute mode and framework, folded or all ranks. Some
// combinations are rejected by resolve_scenario (InputError); the caller draws again.
json random_scenario(std::mt19937& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto pick = [&](std::initializer_list<json> v) {
    return *(v.begin() + uni(0, static_cast<int>(v.size()) - 1));
  };
  const int heads = pick({4, 8}).get<int>();
  const int hidden = heads * pick({8, 16}).get<int>();
  const bool gated = uni(0, 1) == 1;
  json model = {{"num_layers", pick({2, 4, 8})},
                {"hidden_size", hidden},
                {"num_attention_heads", heads},
                {"num_kv_heads", pick({heads, heads / 2, 2})},
                {"ffn_hidden_size", gated ? 8 * hidden / 3 / 8 * 8 : 4 * hidden},
                {"mlp", gated ? "swiglu" : "gelu"},
                {"vocab_size", uni(100, 3000)},
                {"seq_length", pick({32, 64, 128})},
                {"tied_embeddings", uni(0, 1) == 1}};
  const int gpus = pick({1, 2, 4, 8, 16}).get<int>();
  const int tp = pick({1, 1, 2, 4}).get<int>();
  const int pp = pick({1, 1, 2, 4}).get<int>();
  json parallel = {{"tp", tp},
                   {"pp", pp},
                   {"sequence_parallel", tp > 1 && uni(0, 1) == 1},
                   {"recompute", pick({"none", "selective", "selective-op", "full"})},
                   {"framework", pick({"deepspeed", "megatron", "fsdp", "nanotron"})}};
  int gas = uni(1, 4);
  if (pp > 1) {
    const int schedule = uni(0, 3);
    if (schedule == 2) {
      parallel["virtual_stages"] = 2;
      gas = pp * uni(1, 2);
    } else {
      parallel["pipeline_schedule"] = schedule == 0 ? "1f1b" : schedule == 1 ? "gpipe" : "zero-bubble";
    }
  }
  const int stage = parallel["framework"] == "fsdp" ? uni(2, 3) : uni(0, 3);
  json zero = {{"stage", stage},
               {"overlap_comm", uni(0, 1) == 1},
               {"contiguous_gradients", uni(0, 1) == 1},
               {"reduce_bucket_size", pick({2000, 50000, 500000000})},
               {"use_multi_rank_bucket_allreduce", uni(0, 1) == 1},
               {"stage3_prefetch_bucket_size", pick({0, 20000, 50000000})},
               {"stage3_max_reuse_distance", pick({0, 50000, 1000000000})},
               {"stage3_param_persistence_threshold", pick({0, 2000, 100000})}};
  return {{"model", model},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", gpus}}},
          {"training",
           {{"micro_batch_size", uni(1, 2)},
            {"gradient_accumulation_steps", gas},
            {"precision", pick({"bf16", "fp16"})},
            {"flash_attention", uni(0, 1) == 1}}},
          {"parallel", parallel},
          {"zero", zero},
          {"sim", {{"allow_oom", true}, {"ranks", pick({"folded", "all"})}}}};
}

// Draws scenarios until `count` resolve; returns them with their documents.
std::vector<std::pair<json, Scenario>> resolvable(std::uint32_t seed, int count) {
  std::mt19937 rng(seed);
  std::vector<std::pair<json, Scenario>> out;
  for (int tries = 0; static_cast<int>(out.size()) < count && tries < 50 * count; ++tries) {
    json doc = random_scenario(rng);
    try {
      out.emplace_back(doc, resolve_scenario(doc));
    } catch (const InputError&) {
    }
  }
  return out;
}

constexpr std::uint32_t kSeed = 20250101;
constexpr int kScenarios = 150;

void check_order_and_dependencies(const Plan& plan, const EngineResult& r,
                                  const std::string& where) {
  ASSERT_EQ(r.order.size(), plan.ops.size()) << where;
  std::vector<char> seen(plan.ops.size(), 0);
  SimTime last = 0;
  for (OpId id : r.order) {
    ASSERT_LT(id, plan.ops.size()) << where;
    ASSERT_FALSE(seen[id]) << where << ": op " << id << " completed twice";
    seen[id] = 1;
    ASSERT_GE(r.end[id], last) << where << ": time went backwards at op " << id;
    last = r.end[id];
  }
  EXPECT_EQ(last, r.makespan) << where;
  std::vector<OpId> prev_on_stream(static_cast<std::size_t>(plan.num_ranks) * kNumStreams, kNoOp);
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    ASSERT_GE(r.start[id], 0) << where;
    ASSERT_LE(r.start[id], r.end[id]) << where << ": op " << id << " ends before it starts";
    for (std::uint32_t i = 0; i < op.dep_count; ++i) {
      const OpId d = plan.deps[op.dep_begin + i];
      ASSERT_GE(r.start[id], r.end[d])
          << where << ": '" << plan.names[op.name] << "' starts before its dependency '"
          << plan.names[plan.ops[d].name] << "' ends";
    }
    OpId& prev = prev_on_stream[static_cast<std::size_t>(op.rank) * kNumStreams +
                                static_cast<int>(op.stream)];
    if (prev != kNoOp) {
      ASSERT_GE(r.start[id], r.end[prev])
          << where << ": '" << plan.names[op.name] << "' overlaps its stream predecessor";
    }
    prev = id;
  }
}

// Bytes each ring position sends and receives in one collective of buffer size S over n ranks
// (NCCL's ring; position 0 is the root of broadcast/reduce, the sender of send/recv):
//   all-reduce: reduce-scatter then all-gather, n-1 steps each of S/n: 2(n-1)/n S both ways;
//   reduce-scatter (S = input), all-gather (S = output), all-to-all: (n-1)/n S both ways;
//   broadcast (pipelined from the root along the ring 0 -> 1 -> ... -> n-1): every position but
//     the last forwards S, every position but the root receives S;
//   reduce (along the ring 1 -> 2 -> ... -> n-1 -> 0 into the root): every position but the root
//     sends S, every position but 1 receives S;
//   send/recv: position 0 sends S, position 1 receives S.
struct RingBytes {
  std::vector<double> sent, received;
};
RingBytes ring_bytes(CollectiveKind kind, int n, Bytes bytes) {
  const double S = static_cast<double>(bytes);
  RingBytes b{std::vector<double>(n, 0), std::vector<double>(n, 0)};
  if (n <= 1) return b;
  for (int i = 0; i < n; ++i) {
    switch (kind) {
      case CollectiveKind::AllReduce:
        b.sent[i] = b.received[i] = 2.0 * (n - 1) * S / n;
        break;
      case CollectiveKind::ReduceScatter:
      case CollectiveKind::AllGather:
      case CollectiveKind::AllToAll:
        b.sent[i] = b.received[i] = (n - 1) * S / n;
        break;
      case CollectiveKind::Broadcast:
        b.sent[i] = i == n - 1 ? 0 : S;
        b.received[i] = i == 0 ? 0 : S;
        break;
      case CollectiveKind::Reduce:
        b.sent[i] = i == 0 ? 0 : S;
        b.received[i] = i == 1 ? 0 : S;
        break;
      case CollectiveKind::SendRecv:
        b.sent[i] = i == 0 ? S : 0;
        b.received[i] = i == 1 ? S : 0;
        break;
    }
  }
  return b;
}

void check_collectives(const TrainingPlan& tp, const EngineResult& r, const std::string& where) {
  const Plan& plan = tp.plan;
  for (std::uint32_t c = 0; c < plan.collectives.size(); ++c) {
    const Collective& coll = plan.collectives[c];
    ASSERT_GT(coll.member_count, 0u) << where;
    const OpId first = plan.members[coll.member_begin];
    for (std::uint32_t i = 0; i < coll.member_count; ++i) {
      const OpId m = plan.members[coll.member_begin + i];
      const Op& op = plan.ops[m];
      ASSERT_EQ(op.kind, OpKind::Collective) << where;
      ASSERT_EQ(op.work, static_cast<std::int32_t>(c)) << where;
      EXPECT_EQ(op.bytes, coll.bytes)
          << where << ": member buffers differ in " << plan.names[op.name];
      EXPECT_EQ(r.start[m], r.start[first])
          << where << ": members start apart in " << plan.names[op.name];
      EXPECT_EQ(r.end[m], r.end[first])
          << where << ": members end apart in " << plan.names[op.name];
    }
    EXPECT_EQ(static_cast<int>(coll.member_count), plan.group_size(coll.group)) << where;
    const int n = plan.cost_size(coll.group);
    if (coll.kind == CollectiveKind::SendRecv) {
      EXPECT_EQ(n, 2) << where;
      EXPECT_EQ(coll.member_count, 2u) << where;
    }
    const RingBytes b = ring_bytes(coll.kind, n, coll.bytes);
    double sent = 0, received = 0, busiest = 0;
    for (int i = 0; i < n; ++i) {
      sent += b.sent[i];
      received += b.received[i];
      busiest = std::max(busiest, b.sent[i]);
    }
    EXPECT_DOUBLE_EQ(sent, received) << where << " collective " << c;
    // The per-GPU traffic the report counts is the busiest ring position's.
    EXPECT_DOUBLE_EQ(ring_bytes_sent(coll.kind, n, coll.bytes), busiest)
        << where << " " << collective_name(coll.kind) << " over " << n;
  }
}

// "alloc X" / "free X" -> "X".
std::string object_of(const std::string& op_name) { return op_name.substr(op_name.find(' ') + 1); }

void check_memory(const Scenario& s, const TrainingPlan& tp, const EngineResult& r,
                  const std::string& where) {
  const Plan& plan = tp.plan;
  // What a rank may still hold when the step ends (DeepSpeed / PyTorch / Megatron keep these
  // between steps): model states and the cuBLAS workspace always; DDP's bucket buffers (at ZeRO-0
  // when it reduces after the last backward, and under nanotron whenever DP > 1); with ZeRO-3,
  // the contiguous IPG buffer of reduce_bucket_size 16-bit elements and the persistent (always
  // gathered) parameters.
  std::set<std::string> persistent = {"params", "grads", "optimizer_states", "cublas_workspace",
                                      "ddp_buckets"};
  if (s.zero.stage == 3) {
    persistent.insert("persistent params");
    if (s.zero.contiguous_gradients) persistent.insert("ipg_buffer");
  }
  std::vector<int> ranks(plan.num_ranks);
  for (int i = 0; i < plan.num_ranks; ++i) ranks[i] = i;
  std::vector<MemoryUsage> usage;
  ASSERT_NO_THROW(usage = replay_memory(plan, r, ranks, false)) << where;
  std::vector<std::array<Bytes, kNumMemCategories>> now(plan.num_ranks);
  std::vector<std::map<std::pair<std::string, int>, Bytes>> net(plan.num_ranks);
  for (auto& a : now) a.fill(0);
  for (OpId id : r.order) {
    const Op& op = plan.ops[id];
    if (op.kind != OpKind::Alloc && op.kind != OpKind::Free) continue;
    ASSERT_GE(op.bytes, 0) << where;
    const Bytes delta = op.kind == OpKind::Alloc ? op.bytes : -op.bytes;
    Bytes& cur = now[op.rank][static_cast<int>(op.category)];
    cur += delta;
    ASSERT_GE(cur, 0) << where << ": " << mem_category_name(op.category) << " negative on rank "
                      << op.rank << " at '" << plan.names[op.name] << "'";
    net[op.rank][{object_of(plan.names[op.name]), static_cast<int>(op.category)}] += delta;
  }
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    const ModelStateBytes& ms = tp.stages.at(tp.stage_of_rank.at(rank)).model_states;
    Bytes end = 0, buffers = 0;
    for (const auto& [key, bytes] : net[rank]) {
      end += bytes;
      if (!persistent.count(key.first)) {
        EXPECT_EQ(bytes, 0) << where << ": '" << key.first << "' not freed on rank " << rank;
      } else if (key.first == "ddp_buckets" || key.first == "ipg_buffer" ||
                 key.first == "persistent params") {
        buffers += bytes;
      }
    }
    // DDP's buckets: a 16-bit copy of every gradient of the stage's shard (2 bytes x Φ); the
    // IPG buffer: 2 bytes x reduce_bucket_size.
    const auto ddp = net[rank].find({"ddp_buckets", static_cast<int>(MemCategory::Buffers)});
    if (ddp != net[rank].end()) {
      EXPECT_EQ(ddp->second, 2 * tp.stages.at(tp.stage_of_rank.at(rank)).local_params) << where;
    }
    const auto ipg = net[rank].find({"ipg_buffer", static_cast<int>(MemCategory::Buffers)});
    if (s.zero.stage == 3 && s.zero.contiguous_gradients) {
      ASSERT_NE(ipg, net[rank].end()) << where;
      EXPECT_EQ(ipg->second, 2 * s.zero.reduce_bucket_size) << where;
    }
    const auto get = [&](const char* name, MemCategory c) {
      auto it = net[rank].find({name, static_cast<int>(c)});
      return it == net[rank].end() ? Bytes{0} : it->second;
    };
    EXPECT_EQ(get("params", MemCategory::Params), ms.params) << where << " rank " << rank;
    EXPECT_EQ(get("grads", MemCategory::Grads), ms.grads) << where << " rank " << rank;
    EXPECT_EQ(get("optimizer_states", MemCategory::OptimizerStates), ms.optimizer_states)
        << where << " rank " << rank;
    const Bytes workspace = generation_constants(s.cluster.gpu.generation).cublas_workspace_bytes;
    EXPECT_EQ(get("cublas_workspace", MemCategory::Buffers), workspace) << where;
    EXPECT_EQ(end, ms.params + ms.grads + ms.optimizer_states + workspace + buffers)
        << where << " rank " << rank;
    EXPECT_EQ(usage[rank].end, end) << where << " rank " << rank;
    EXPECT_GE(usage[rank].peak, usage[rank].end) << where;
  }
}

TEST(invariantsRandom, EngineTrajectoriesKeepTheInvariants) {
  const auto scenarios = resolvable(kSeed, kScenarios);
  ASSERT_EQ(static_cast<int>(scenarios.size()), kScenarios);
  std::set<std::string> seen;
  int simulated = 0;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    const auto& [doc, s] = scenarios[i];
    const std::string where = "scenario " + std::to_string(i) + " " + doc.dump();
    Simulation sim;
    try {
      sim = simulate_step(s);
    } catch (const InputError&) {
      continue;  // a plan builder may refuse a combination with a clear message
    } catch (const std::exception& e) {
      ADD_FAILURE() << where << ": " << e.what();
      continue;
    }
    ++simulated;
    seen.insert("zero" + std::to_string(s.zero.stage));
    seen.insert(to_string(s.parallel.framework));
    if (s.parallel.pp > 1) seen.insert("pp");
    if (s.parallel.tp > 1) seen.insert("tp");
    check_order_and_dependencies(sim.plan.plan, sim.result, where);
    check_collectives(sim.plan, sim.result, where);
    check_memory(s, sim.plan, sim.result, where);
    const Simulation again = simulate_step(s);
    EXPECT_EQ(again.result.fingerprint, sim.result.fingerprint) << where;
    EXPECT_EQ(again.result.start, sim.result.start) << where;
    EXPECT_EQ(again.result.end, sim.result.end) << where;
    if (HasFailure()) return;  // one scenario's report is enough
  }
  EXPECT_GE(simulated, kScenarios * 3 / 4);
  for (const char* want : {"zero0", "zero1", "zero2", "zero3", "deepspeed", "megatron", "fsdp",
                           "nanotron", "pp", "tp"}) {
    EXPECT_TRUE(seen.count(want)) << "the random scenarios never simulated " << want;
  }
}

// Simulates the scenario `doc` and checks every invariant above on it.
void simulate_and_check(const json& doc) {
  const std::string where = doc.dump();
  const Scenario s = resolve_scenario(doc);
  const Simulation sim = simulate_step(s);
  check_order_and_dependencies(sim.plan.plan, sim.result, where);
  check_collectives(sim.plan, sim.result, where);
  check_memory(s, sim.plan, sim.result, where);
}

// Megatron-core's MoE features that interleave or add passes: the combined 1F1B (two passes'
// units interleaved, exchanges on their own stream), MTP on the loss's stage and the recompute
// modules, with and without a pipeline, folded and all ranks: every op runs once after its
// dependencies, every collective's members match, and every allocation is freed as it was made.
TEST(invariantsFeatures, CombinedOneFOneBAndMtpKeepTheInvariants) {
  for (int pp : {1, 2}) {
    for (const char* ranks : {"folded", "all"}) {
      json parallel = {{"tp", 2},
                       {"pp", pp},
                       {"ep", 2},
                       {"etp", 1},
                       {"sequence_parallel", true},
                       {"framework", "megatron"},
                       {"recompute", "selective"},
                       {"recompute_modules", {"layernorm", "moe_act", "mlp"}},
                       {"overlap_moe_expert_parallel_comm", true}};
      if (pp > 1) parallel["pipeline_model_parallel_layout"] = "Et|tt|t|tmL";
      const json doc = {
          {"model",
           {{"num_layers", 5},
            {"hidden_size", 64},
            {"num_attention_heads", 4},
            {"vocab_size", 1000},
            {"seq_length", 128},
            {"position", "rotary"},
            {"tied_embeddings", false},
            {"mtp_num_layers", 1},
            {"moe",
             {{"num_experts", 4}, {"top_k", 2}, {"expert_ffn_hidden_size", 64}, {"first_k_dense", 1}}}}},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 4 * pp}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 4}}},
          {"parallel", parallel},
          {"zero", {{"stage", 1}}},
          {"sim", {{"ranks", ranks}}}};
      simulate_and_check(doc);
    }
  }
}

// DualPipe and DualPipeV: two chunks per stage, the second's transfers running back up the
// pipeline on groups and streams of their own, overlapped forward and backward pairs, split
// backwards, the loss and MTP on the first stage (and DualPipe's second copy's on the last, with
// the copies' gradient sums); with MoE, TP and DP, a tied and an untied embedding, folded and
// all ranks.
TEST(invariantsFeatures, DualPipeKeepsTheInvariants) {
  for (int pp : {2, 4}) {
    for (const char* schedule : {"dualpipev", "dualpipe"}) {
      for (const char* ranks : {"folded", "all"}) {
        const bool tied = pp == 4;
        const bool copies = std::string(schedule) == "dualpipe";
        json doc = {
            {"model",
             {{"num_layers", 2 * pp},
              {"hidden_size", 64},
              {"num_attention_heads", 4},
              {"vocab_size", 1000},
              {"seq_length", 128},
              {"position", "rotary"},
              {"tied_embeddings", tied},
              {"moe",
               {{"num_experts", 4},
                {"top_k", 2},
                {"expert_ffn_hidden_size", 64},
                {"first_k_dense", 1}}}}},
            {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 8 * pp}}},
            {"training",
             {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2 * pp + (copies ? 2 : 1)}}},
            {"parallel",
             {{"tp", 2},
              {"pp", pp},
              {"ep", 2},
              {"sequence_parallel", true},
              {"framework", "megatron"},
              {"virtual_stages", copies ? 1 : 2},
              {"pipeline_schedule", schedule}}},
            {"zero", {{"stage", 1}}},
            {"sim", {{"ranks", ranks}}}};
        if (!tied) doc["model"]["mtp_num_layers"] = 1;
        simulate_and_check(doc);
      }
    }
  }
}

// Two layers of hidden 64 in 4 heads, rotary positions: small enough to play every rank.
json tiny_rotary_model() {
  return {{"num_layers", 2},  {"hidden_size", 64}, {"num_attention_heads", 4},
          {"vocab_size", 1000}, {"seq_length", 128}, {"position", "rotary"}};
}

// The flex dispatcher's two halves (network on the exchange's stream, NVLink on ep-forward, on
// groups of their own across two nodes): with and without the combined 1F1B's all-to-all
// stream, expert TP 1 with and without TP, MXFP8 on the wire, folded and all ranks.
TEST(invariantsFeatures, FlexDispatcherKeepsTheInvariants) {
  for (int tp : {1, 2}) {
    for (bool overlap : {false, true}) {
      for (const char* ranks : {"folded", "all"}) {
        json model = tiny_rotary_model();
        model["moe"] = {{"num_experts", 16},
                        {"top_k", 4},
                        {"expert_ffn_hidden_size", 64},
                        {"router_num_groups", 4},
                        {"router_group_topk", 2}};
        json doc = {
            {"model", model},
            {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 16}}},
            {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 3}}},
            {"parallel",
             {{"tp", tp},
              {"ep", 16},
              {"etp", 1},
              {"sequence_parallel", tp > 1},
              {"framework", "megatron"},
              {"moe_token_dispatcher_type", "flex"},
              {"moe_dispatch_fwd_dtype", "mxfp8"},
              {"overlap_moe_expert_parallel_comm", overlap}}},
            {"zero", {{"stage", 1}}},
            {"sim", {{"ranks", ranks}}}};
        simulate_and_check(doc);
      }
    }
  }
}

// Context parallelism's three exchanges (ring, all-gather, Ulysses all-to-all), with and without
// the recomputed forward, across two nodes.
TEST(invariantsFeatures, ContextParallelKeepsTheInvariants) {
  for (const char* comm : {"p2p", "all_gather", "a2a"}) {
    for (const char* recompute : {"none", "full"}) {
      json doc = {
          {"model", tiny_rotary_model()},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 16}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 3}}},
          {"parallel",
           {{"tp", 2},
            {"pp", 2},
            {"cp", 2},
            {"cp_comm_type", comm},
            {"sequence_parallel", true},
            {"recompute", recompute},
            {"framework", "megatron"}}},
          {"zero", {{"stage", 1}}}};
      simulate_and_check(doc);
    }
  }
}

// Random flows between random GPUs of a real topology (4 DGX H100 nodes, rail fat tree, and a
// 3:1 oversubscribed clos): after every event, each link's load (the sum of its flows' rates) is
// at most its capacity, time only moves forward, every flow completes exactly once, and each
// link is credited exactly the bytes of the flows that crossed it.
TEST(invariantsRandom, FlowNetworkOnATopologyNeverExceedsCapacity) {
  for (const char* topology : {"rail-fat-tree", "clos"}) {
    const ClusterSpec c = cluster_from_json(
        json{{"preset", "dgx-h100"}, {"nodes", 4}, {"topology", topology}, {"oversubscription", 3}},
        "cluster");
    const Topology topo = build_topology(c);
    net::FlowNetwork network;
    for (const TopoLink& l : topo.links()) network.add_link(l.bandwidth);
    std::mt19937_64 rng(kSeed);
    std::map<LinkId, Bytes> expected;
    std::set<std::uint64_t> completed;
    const int kFlows = 300;
    SimTime t = 0;
    int started = 0;
    std::vector<net::Completion> out;
    auto check_loads = [&] {
      for (LinkId l = 0; l < topo.num_links(); ++l) {
        ASSERT_LE(network.link_load(l), network.link_capacity(l) * (1 + 1e-9))
            << topology << " link " << l << " at " << network.now();
      }
    };
    while (started < kFlows || network.active_flows() > 0) {
      if (started < kFlows && (network.next_event_time() == net::kNever || rng() % 2)) {
        const int a = static_cast<int>(rng() % topo.num_gpus());
        const int b = static_cast<int>(rng() % topo.num_gpus());
        const std::vector<LinkId> route = topo.route(a, b, rng());
        if (route.empty()) continue;
        const Bytes bytes = 1 + static_cast<Bytes>(rng() % (64 << 20));
        for (LinkId l : route) expected[l] += bytes;
        t = std::max(t, network.now()) + static_cast<SimTime>(rng() % 2'000'000);
        network.advance_to(t);
        network.start_flow(t, route, bytes, static_cast<SimTime>(rng() % 5'000'000),
                           static_cast<std::uint64_t>(started));
        ++started;
      } else {
        const SimTime next = network.next_event_time();
        ASSERT_NE(next, net::kNever);
        ASSERT_GE(next, network.now());
        network.advance_to(next);
      }
      check_loads();
      out.clear();
      network.drain_completed(out);
      for (const auto& comp : out) {
        ASSERT_TRUE(completed.insert(comp.tag).second) << "flow " << comp.tag << " completed twice";
        ASSERT_LE(comp.time, network.now());
      }
    }
    EXPECT_EQ(static_cast<int>(completed.size()), kFlows) << topology;
    for (LinkId l = 0; l < topo.num_links(); ++l) {
      const net::LinkStats st = network.link_stats(l, network.now());
      Bytes credited = 0;
      for (Bytes b : st.completed_bytes) credited += b;
      EXPECT_EQ(credited, expected[l]) << topology << " link " << l;
    }
  }
}

}  // namespace
}  // namespace zerosim
