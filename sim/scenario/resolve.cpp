// resolve_scenario: every key read through the binding table (keys.cpp), then the cross-key
// rules, one small function per section, then the resolved echo through the table again.
#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "sim/core/error.h"
#include "sim/input/json_input.h"
#include "sim/scenario/expert_layout.h"
#include "sim/scenario/keys.h"
#include "sim/scenario/pipeline_split.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// Reports the first key of `doc` that the table does not declare.
void check_unknown_keys(const json& node, const std::string& prefix) {
  if (!node.is_object()) {
    throw InputError(prefix, std::string("expected an object, got ") + node.type_name());
  }
  const std::vector<KeySpec>& keys = scenario_keys();
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string path = key_join(prefix, it.key());
    if (find_key(path)) continue;
    bool is_section = false;
    for (const auto& k : keys) {
      if (k.path.rfind(path + ".", 0) == 0) is_section = true;
    }
    if (is_section) {
      check_unknown_keys(it.value(), path);
      continue;
    }
    std::vector<std::string> names;
    std::set<std::string> seen;
    for (const auto& k : keys) {
      if (!prefix.empty() && k.path.rfind(prefix + ".", 0) != 0) continue;
      std::string name = prefix.empty() ? k.path.substr(0, k.path.find('.'))
                                        : k.path.substr(prefix.size() + 1);
      if (seen.insert(name).second) names.push_back(name);
    }
    throw InputError(path, "unknown key" + did_you_mean(it.key(), names) + "; allowed here: " +
                               join_list(names));
  }
}

// Whether the document gives a key (present and not null); derived keys are computed by the
// rules below when it does not.
using Given = std::function<bool(const std::string&)>;

// ---- cross-key rules, by section ---------------------------------------------------------------

// tp x pp x cp divides the GPUs, dp is what is left; the layers, heads and FFN split evenly.
// Context parallelism as Megatron-core runs it (and torchtitan's ring attention under FSDP), and
// DeepSpeed's Ulysses sequence parallelism (cp_comm_type a2a).
void context_parallel_rules(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  if (p.cp == 1) return;
  const bool deepspeed = p.framework == Framework::DeepSpeed;
  if (p.framework != Framework::Megatron && p.framework != Framework::Fsdp && !deepspeed)
    throw InputError("parallel.cp", "context parallelism is simulated for megatron, fsdp "
                                    "(torchtitan) and deepspeed (Ulysses) runs; " +
                                    to_string(p.framework) + " has none; allowed: 1");
  if (deepspeed && p.cp_comm_type != CpCommType::A2a)
    throw InputError("parallel.cp_comm_type", "DeepSpeed's sequence parallelism is Ulysses: "
                                              "allowed under deepspeed: a2a");
  const char* sizes_key = "parallel.hierarchical_context_parallel_sizes";
  if (p.cp_comm_type == CpCommType::A2aP2p) {
    // Megatron asserts the sizes (arguments.py) and their product (parallel_state.py); Transformer
    // Engine's a2a+p2p takes an a2a group and a p2p group.
    if (p.framework != Framework::Megatron)
      throw InputError("parallel.cp_comm_type", "a2a+p2p is Megatron-core's (Transformer "
                                                "Engine's); allowed under " +
                                                    to_string(p.framework) + ": p2p, all_gather");
    if (p.hierarchical_cp_sizes.empty())
      throw InputError("parallel.cp_comm_type", std::string("a2a+p2p needs ") + sizes_key +
                                                    " (Megatron asserts it)");
    if (p.hierarchical_cp_sizes[0] * p.hierarchical_cp_sizes[1] != p.cp)
      throw InputError(sizes_key, "must multiply to parallel.cp (" + std::to_string(p.cp) +
                                      "), got [" + std::to_string(p.hierarchical_cp_sizes[0]) +
                                      ", " + std::to_string(p.hierarchical_cp_sizes[1]) + "]");
  }
  if (p.cp_a2a_degree() > 1) {
    const int a2a = p.cp_a2a_degree();
    const char* a2a_key = p.cp_comm_type == CpCommType::A2a ? "parallel.cp_comm_type" : sizes_key;
    if (p.framework == Framework::Fsdp)
      throw InputError("parallel.cp_comm_type", "a2a is Megatron-core's (Transformer Engine's "
                                                "Ulysses attention) and DeepSpeed's; fsdp "
                                                "(torchtitan) has none; allowed: p2p, all_gather");
    // Transformer Engine's a2a attention asserts that the a2a degree divides its rank's query and
    // key heads; DeepSpeed's all-to-all splits them evenly too unless its uneven-heads path runs.
    const std::int64_t kv_heads = s.model.is_mla() ? s.model.num_attention_heads
                                                   : s.model.num_kv_heads;
    const std::string degree = p.cp_comm_type == CpCommType::A2a
                                   ? "the cp ranks: cp " + std::to_string(a2a)
                                   : "the a2a level's ranks: " + std::to_string(a2a);
    for (const std::int64_t heads : {s.model.num_attention_heads, kv_heads}) {
      const std::int64_t per_rank = std::max<std::int64_t>(1, heads / p.tp);
      if (per_rank % a2a != 0)
        throw InputError(a2a_key,
                         "a2a splits each rank's attention heads over " + degree +
                             " must divide the " + std::to_string(per_rank) +
                             " heads per TP rank (" + std::to_string(heads) + " over tp " +
                             std::to_string(p.tp) + "; uneven splits are not simulated)" +
                             (deepspeed ? "" : "; allowed here: p2p, all_gather"));
    }
  }
  if (deepspeed) {
    // Ulysses splits the sequence into cp contiguous pieces (each rank attends over all of it
    // for its heads, so the causal mask needs no balancing).
    if (s.model.seq_length % p.cp != 0)
      throw InputError("parallel.cp", "cp must divide the sequence length (" +
                                          std::to_string(s.model.seq_length) + "), got cp " +
                                          std::to_string(p.cp));
  } else if (s.model.seq_length % (2 * p.cp) != 0) {
    // Each rank holds two of 2 x cp chunks, one early and one late (load balance under the
    // causal mask).
    throw InputError("parallel.cp", "2 x cp must divide the sequence length (" +
                                        std::to_string(s.model.seq_length) + ") into equal "
                                        "chunks, got cp " + std::to_string(p.cp));
  }
  // Megatron-core folds the expert layers' ranks apart from the attention's (MoE parallel
  // folding, Liu et al. 2025, arXiv:2504.14960; parallel_state.py's expert rank generator, order
  // tp-cp-ep-dp-pp with cp 1, over the same tp x cp x dp ranks): an expert-parallel group is ep
  // consecutive ranks of the cp-inner dp x cp grid, so it spans the CP ranks as it spans DP ones,
  // and each rank dispatches the tokens of its own sequence chunk.
  // torchtitan lays its sparse mesh (efsdp, ep) over the same dp_shard x cp x tp ranks, ep
  // innermost (distributed/parallel_dims.py build_mesh): the same groups. So does DeepSpeed
  // without TP: its expert-parallel groups are ep consecutive ranks of a stage
  // (utils/groups.py _create_expert_and_data_parallel), its Ulysses groups consecutive ranks
  // (Megatron-DeepSpeed's parallel_state.py, which allows them only with TP 1 and PP 1).
  const bool deepspeed_folds = deepspeed && p.tp == 1 && p.pp == 1;
  if (p.ep > 1 && p.framework != Framework::Megatron && p.framework != Framework::Fsdp &&
      !deepspeed_folds)
    throw InputError("parallel.cp", "context parallelism with expert parallelism is simulated "
                                    "for megatron (Megatron-core's MoE parallel folding), fsdp "
                                    "(torchtitan) and deepspeed with tp 1 and pp 1 (Ulysses, as "
                                    "Megatron-DeepSpeed allows it); " + to_string(p.framework) +
                                        " forms its groups otherwise; use cp 1 or ep 1");
}

// Megatron-core's token dispatchers. Its flex dispatcher needs Megatron-core; the wire dtypes are
// the flex dispatcher's (Megatron-core asserts it, for its ncclep backend).
void dispatcher_rules(Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const char* key = "parallel.moe_token_dispatcher_type";
  const std::pair<const char*, WireDtype> dtypes[] = {
      {"parallel.moe_dispatch_fwd_dtype", p.moe_dispatch_fwd_dtype},
      {"parallel.moe_combine_bwd_dtype", p.moe_combine_bwd_dtype}};
  for (const auto& [dtype, d] : dtypes) {
    if (d != WireDtype::Bf16 && p.moe_token_dispatcher_type != MoeDispatcher::Flex)
      throw InputError(dtype, "sets the flex dispatcher's wire dtype: needs " + std::string(key) +
                                  " flex; allowed otherwise: bf16");
  }
  if (p.moe_token_dispatcher_type == MoeDispatcher::AllGather) {
    s.warnings.push_back({key, "allgather is simulated as alltoall (each rank's tokens sent to "
                               "its experts' ranks; the all-gather dispatcher gathers every "
                               "rank's tokens)"});
  }
  if (p.moe_token_dispatcher_type != MoeDispatcher::Flex) return;
  if (p.framework != Framework::Megatron)
    throw InputError(key, "flex is Megatron-core's DeepEP dispatcher: needs parallel.framework "
                          "megatron; allowed otherwise: alltoall");
  if (s.expert_tp() != 1) {
    s.warnings.push_back({key, "flex with the experts split by TP (expert TP " +
                                   std::to_string(s.expert_tp()) + ") is simulated as alltoall; "
                                   "it is simulated with parallel.etp 1 (or tp 1)"});
  } else if (!ep_node_split(s)) {
    s.warnings.push_back({key, "flex with expert-parallel groups that hold different numbers of "
                               "ranks on their nodes is simulated as alltoall"});
  }
}

// Expert parallelism: what it needs, and the combinations not simulated yet (refused, never
// approximated).
void expert_parallel_rules(Scenario& s) {
  ParallelConfig& p = s.parallel;
  const ModelSpec& m = s.model;
  // torchtitan has no expert TP of its own: its expert-parallel groups are ep consecutive ranks
  // of the dp_shard x cp x tp grid, tp innermost (distributed/parallel_dims.py), which is expert
  // TP 1 when ep is a multiple of tp. Megatron-core's default expert TP is tp.
  const bool torchtitan = p.framework == Framework::Fsdp && m.is_moe() && p.ep > 1 && p.tp > 1;
  if (p.etp == 0) {
    p.etp = torchtitan && p.ep % p.tp == 0 ? 1 : p.tp;
    if (torchtitan && p.etp != 1)
      s.warnings.push_back({"parallel.ep",
                            std::to_string(p.ep) + ", not a multiple of tp " +
                                std::to_string(p.tp) + ": torchtitan's expert-parallel groups "
                                "would cut across TP groups; simulated with the experts split "
                                "by TP as the dense layers are (ep a multiple of tp is "
                                "simulated as torchtitan runs it)"});
  }
  if (p.etp != p.tp && m.is_moe() && !s.experts_span_tp())
    s.warnings.push_back({"parallel.etp",
                          std::to_string(p.etp) + ": the expert layers are simulated with the "
                          "dense layers' tensor parallelism, tp = " + std::to_string(p.tp) +
                          " (expert TP 1 is simulated with ep a multiple of tp; other expert TP "
                          "degrees are not simulated yet)"});
  if (m.is_moe() && m.moe.num_experts % p.ep != 0)
    throw InputError("parallel.ep", "must divide model.moe.num_experts (" +
                                        std::to_string(m.moe.num_experts) + "), got " +
                                        std::to_string(p.ep));
  if (p.ep == 1) return;
  if (!m.is_moe())
    throw InputError("parallel.ep", "expert parallelism needs an MoE model (model.moe); model '" +
                                        m.name + "' is dense; allowed: 1");
  // Megatron-core runs MoE with tensor parallelism only with sequence parallelism.
  if (p.tp > 1 && !p.sequence_parallel)
    throw InputError("parallel.sequence_parallel",
                     "expert parallelism with tp > 1 needs sequence parallelism (Megatron-core "
                     "requires it for MoE with TP); set it true, or tp 1");
  // With context parallelism the groups are carved from the dp x cp ranks (MoE parallel
  // folding, context_parallel_rules).
  const int dp_cp = p.dp_cp();
  const std::string data_ranks = p.cp > 1 ? "dp x cp" : "dp";
  if (s.experts_span_tp() && dp_cp % (p.ep / p.tp) != 0)
    throw InputError("parallel.ep", "must divide tp x " + data_ranks + " (" +
                                        std::to_string(p.tp * dp_cp) +
                                        "): with parallel.etp 1 the expert-parallel groups are ep "
                                        "consecutive ranks of the tp x " + data_ranks +
                                        " grid (Megatron-core's MoE parallel folding); got " +
                                        std::to_string(p.ep));
  if (!s.experts_span_tp() && dp_cp % p.ep != 0)
    throw InputError("parallel.ep", "must divide the data-parallel degree (" + data_ranks + " = " +
                                        std::to_string(dp_cp) + "): the expert-parallel groups are "
                                        "consecutive DP ranks (with parallel.etp 1 and ep a "
                                        "multiple of tp they span the TP groups); got " +
                                        std::to_string(p.ep));
  const ZeroConfig& z = s.zero;
  // torchtitan shards a block's routed experts over the ranks holding them and its other
  // parameters over the dp x cp group (Zero3Params gathers each part over its group); so does
  // Megatron-core's FSDP, whose expert parameters take the expert-data-parallel group
  // (distributed/fsdp/mcore_fsdp_adapter.py, expt_dp_group). DeepSpeed refuses it ("MoE not
  // supported with Stage 3", runtime/engine.py _configure_zero_optimizer).
  if (z.stage == 3 && p.framework == Framework::DeepSpeed)
    throw InputError("parallel.ep", "expert parallelism with ZeRO stage 3 is simulated for fsdp "
                                    "(torchtitan's FSDP2 with EP) and megatron (Megatron-core's "
                                    "FSDP); DeepSpeed asserts 'MoE not supported with Stage 3': "
                                    "allowed under deepspeed with stages 0-2");
  if (z.mics_shard_size > 0 || z.hpz_partition_size > 1 || z.quantized_gradients)
    throw InputError("parallel.ep", "expert parallelism with MiCS / hybrid sharding or ZeRO++ "
                                    "is not simulated yet; use ep 1");
  if (z.offload_optimizer != OffloadDevice::None)
    throw InputError("parallel.ep", "expert parallelism with optimizer offload is not simulated "
                                    "yet; use ep 1");
  dispatcher_rules(s);
}

void parallel_rules(Scenario& s, const Given& given) {
  ParallelConfig& p = s.parallel;
  const int gpus = s.cluster.num_gpus();
  const std::int64_t model_parallel = std::int64_t{p.tp} * p.pp * p.cp;
  if (gpus % model_parallel != 0) {
    throw InputError("parallel", "tp x pp x cp = " + std::to_string(model_parallel) +
                                     " does not divide the cluster's " + std::to_string(gpus) +
                                     " GPUs");
  }
  const int derived_dp = static_cast<int>(gpus / model_parallel);
  if (given("parallel.dp") && std::int64_t{p.dp} * model_parallel != gpus) {
    throw InputError("parallel.dp", "dp x tp x pp x cp must equal the cluster's " +
                                        std::to_string(gpus) + " GPUs; with tp x pp x cp = " +
                                        std::to_string(model_parallel) + " the only dp is " +
                                        std::to_string(derived_dp) + ", got " +
                                        std::to_string(p.dp));
  }
  p.dp = derived_dp;
  const ModelSpec& m = s.model;
  context_parallel_rules(s);
  if (!p.hierarchical_cp_sizes.empty() && (p.cp == 1 || p.cp_comm_type != CpCommType::A2aP2p)) {
    // Megatron builds the hierarchical groups whenever they are given; only a2a+p2p uses them.
    s.warnings.push_back({"parallel.hierarchical_context_parallel_sizes",
                          "not used: only parallel.cp_comm_type a2a+p2p (with cp > 1) exchanges "
                          "over the hierarchical groups"});
  }
  if (p.pp > m.num_layers) {
    throw InputError("parallel.pp", "must not exceed model.num_layers (" +
                                        std::to_string(m.num_layers) + "), got " +
                                        std::to_string(p.pp));
  }
  if (m.num_attention_heads % p.tp != 0) {
    throw InputError("parallel.tp", "must divide model.num_attention_heads (" +
                                        std::to_string(m.num_attention_heads) + "), got " +
                                        std::to_string(p.tp));
  }
  if (m.num_kv_heads % p.tp != 0 && p.tp % m.num_kv_heads != 0) {
    throw InputError("parallel.tp", "must divide model.num_kv_heads (" +
                                        std::to_string(m.num_kv_heads) +
                                        ") or be a multiple of it, got " + std::to_string(p.tp));
  }
  if (m.ffn_hidden_size % p.tp != 0) {
    throw InputError("parallel.tp", "must divide model.ffn_hidden_size (" +
                                        std::to_string(m.ffn_hidden_size) + "), got " +
                                        std::to_string(p.tp));
  }
  expert_parallel_rules(s);
  // Megatron-core's MoE runs its experts as a grouped GEMM; the others loop over them.
  if (!given("training.moe_grouped_gemm"))
    s.training.moe_grouped_gemm = s.parallel.framework == Framework::Megatron;
}

// Interleaving needs pp > 1 and a split of the layers Megatron accepts (pipeline_split.cpp);
// the schedule defaults to interleaved exactly when there are virtual stages.
void pipeline_rules(Scenario& s, const Given& given) {
  ParallelConfig& p = s.parallel;
  const ModelSpec& m = s.model;
  if (!p.pipeline_layout.empty() && p.pp > 1) {
    // Megatron-core derives the virtual stages from the layout, and refuses a different count.
    const int detected = pipeline_layout_virtual_stages(s);
    if (given("parallel.virtual_stages") && p.virtual_stages != detected) {
      throw InputError("parallel.virtual_stages",
                       "conflicts with parallel.pipeline_model_parallel_layout, which has " +
                           std::to_string(detected) + " virtual stages per pipeline stage; got " +
                           std::to_string(p.virtual_stages));
    }
    p.virtual_stages = detected;
  }
  const bool dualpipe = p.pipeline_schedule == PipelineSchedule::DualPipe;
  if (dualpipe || p.pipeline_schedule == PipelineSchedule::DualPipeV) {
    // DeepSeek's DualPipe library: dualpipe.py asserts an even number of ranks; dualpipe.py
    // holds one stage of each of two copies per rank, dualpipev.py two chunks of one, V-shaped.
    const std::string name = dualpipe ? "'dualpipe'" : "'dualpipev'";
    if (!p.pipeline_layout.empty()) {
      throw InputError("parallel.pipeline_model_parallel_layout",
                       "is Megatron-core's layout of its own schedules' virtual stages; not "
                       "simulated with " + name);
    }
    if (p.pp < 2 || (dualpipe && p.pp % 2 != 0)) {
      throw InputError("parallel.pipeline_schedule",
                       name + " needs parallel.pp > 1" + (dualpipe ? " and even" : "") +
                           "; got " + std::to_string(p.pp));
    }
    const int chunks = dualpipe ? 1 : 2;
    if (p.virtual_stages != chunks) {
      throw InputError("parallel.virtual_stages",
                       dualpipe ? "'dualpipe' splits the model into parallel.pp stages and holds "
                                  "two copies (stage s of one, pp - 1 - s of the other): allowed: "
                                  "1; got " + std::to_string(p.virtual_stages)
                                : "'dualpipev' places two model chunks on each pipeline stage, "
                                  "V-shaped: allowed: 2; got " + std::to_string(p.virtual_stages));
    }
  }
  if (p.virtual_stages > 1 && p.pp == 1) {
    throw InputError("parallel.virtual_stages", "interleaving needs parallel.pp > 1; allowed: 1");
  }
  virtual_stage_layers(s);  // throws on a split Megatron refuses
  const std::int64_t split_stages = std::int64_t{p.pp} * p.virtual_stages;
  if (s.dualpipe_library() && m.num_layers % split_stages != 0) {
    s.warnings.push_back(
        {p.virtual_stages > 1 ? "parallel.virtual_stages" : "parallel.pp",
         "model.num_layers (" + std::to_string(m.num_layers) + ") does not divide into the " +
             std::to_string(split_stages) + " stages of " +
             name_of(kPipelineScheduleNames, p.pipeline_schedule) +
             "; simulated with the first " + std::to_string(m.num_layers % split_stages) +
             " one layer longer (DualPipe leaves the split to its user)"});
  }
  if (megatron_would_refuse_split(s)) {
    const std::int64_t longer = m.num_layers % p.pp;
    s.warnings.push_back(
        {"parallel.pp", "does not divide model.num_layers (" + std::to_string(m.num_layers) +
                            "): Megatron refuses this split unless "
                            "parallel.num_layers_in_first_pipeline_stage / _last_, "
                            "parallel.account_for_embedding_in_pipeline_split / _loss_ or "
                            "parallel.pipeline_model_parallel_layout say how; "
                            "simulated with the first " + std::to_string(longer) +
                            " stages one layer longer"});
  }
  // Every layer is costed at the layers' average attention (mean_keys_per_query): exact for the
  // step, but a stage holds its own layers.
  const bool windowed = m.sliding_window > 0 && m.sliding_window < m.seq_length &&
                        m.sliding_window_layers > 0 && m.sliding_window_layers < m.num_layers;
  const bool chunked = m.attention_chunk_size > 0 && m.attention_chunk_size < m.seq_length &&
                       m.chunked_attention_layers > 0 && m.chunked_attention_layers < m.num_layers;
  // Megatron-core has no chunked attention; NeMo's Llama 4 layer (Llama4SelfAttention,
  // nemo/collections/llm/gpt/model/llama4_utils.py at v2.4.0) cuts every layer's queries and keys
  // into chunks once the sequence is longer than one, the layers without rotary too.
  if (p.framework == Framework::Megatron && m.attention_chunk_size > 0 &&
      m.attention_chunk_size < m.seq_length && m.chunked_attention_layers > 0 &&
      m.chunked_attention_layers < m.num_layers) {
    s.warnings.push_back(
        {"model.chunked_attention_layers",
         std::to_string(m.chunked_attention_layers) + " of " + std::to_string(m.num_layers) +
             " layers attend within chunks of " + std::to_string(m.attention_chunk_size) +
             " tokens, as the model says; with framework megatron, NeMo's Llama 4 layer chunks "
             "every layer and Megatron-LM none (it has no chunked attention)"});
  }
  if (p.pp > 1 && (windowed || chunked)) {
    s.warnings.push_back(
        {"parallel.pp",
         "model: " + std::to_string(windowed ? m.sliding_window_layers : m.chunked_attention_layers) +
             " of " + std::to_string(m.num_layers) +
             (windowed ? " layers attend within a sliding window of " +
                             std::to_string(m.sliding_window) + " tokens"
                       : " layers attend within chunks of " +
                             std::to_string(m.attention_chunk_size) + " tokens") +
             "; each pipeline stage is costed at the model's share of them, not at the layers it "
             "holds"});
  }
  // nanotron has two pipeline engines (config/utils_config.py cast_str_to_pipeline_engine, at
  // huggingface/nanotron 2411b022): afab, every forward then every backward in micro-batch order
  // (gpipe), and 1f1b, pp - rank - 1 warm-up forwards (parallel/pipeline_parallel/engine.py).
  // ParallelismArgs.__post_init__ (config/parallelism_config.py) takes afab when pp_engine is not
  // set, and its example configs set 1f1b.
  const bool nanotron_pipeline = p.framework == Framework::Nanotron && p.pp > 1;
  if (nanotron_pipeline) {
    if (!given("parallel.pipeline_schedule")) {
      p.pipeline_schedule = PipelineSchedule::GPipe;
      s.warnings.push_back({"parallel.pipeline_schedule",
                            "not given: nanotron's ParallelismArgs runs its afab engine when "
                            "parallelism.pp_engine is not set (every forward, then every "
                            "backward): simulated as gpipe; set 1f1b for its other engine"});
    } else if (p.pipeline_schedule != PipelineSchedule::GPipe &&
               p.pipeline_schedule != PipelineSchedule::OneFOneB) {
      throw InputError("parallel.pipeline_schedule",
                       std::string("nanotron's pipeline engines are afab and 1f1b "
                                   "(parallelism.pp_engine): allowed with parallel.framework "
                                   "nanotron: gpipe (afab) or 1f1b; got '") +
                           name_of(kPipelineScheduleNames, p.pipeline_schedule) + "'");
    }
    if (p.virtual_stages > 1) {
      throw InputError("parallel.virtual_stages",
                       "nanotron's pipeline engines hold one model chunk per stage: allowed with "
                       "parallel.framework nanotron: 1; got " + std::to_string(p.virtual_stages));
    }
  }
  if (given("parallel.pipeline_schedule")) {
    const bool zero_bubble = p.pipeline_schedule == PipelineSchedule::ZeroBubble;
    if (zero_bubble && p.virtual_stages > 2) {
      throw InputError("parallel.virtual_stages",
                       "'zero-bubble' is ZB-H1 with one model chunk per stage and ZB-V with two, "
                       "V-shaped (the zero-bubble fork's --zero-bubble-v-schedule): allowed: 1 "
                       "or 2; got " + std::to_string(p.virtual_stages));
    }
    if (zero_bubble && p.virtual_stages == 2 && !p.pipeline_layout.empty()) {
      throw InputError("parallel.pipeline_model_parallel_layout",
                       "is Megatron-core's layout of its own schedules' virtual stages; not "
                       "simulated with ZB-V");
    }
    if (zero_bubble && p.virtual_stages == 2 && p.pp > 1) {
      s.warnings.push_back({"parallel.pipeline_schedule",
                            "ZB-V's order is approximated: the zero-bubble fork searches it with "
                            "the pass times it profiles in its first iterations; zerosim with the "
                            "paper's FLOP counts of a layer's F, B and W"});
    }
    if (p.pipeline_schedule != PipelineSchedule::DualPipeV && !zero_bubble &&
        (p.pipeline_schedule == PipelineSchedule::Interleaved) != (p.virtual_stages > 1)) {
      throw InputError("parallel.pipeline_schedule",
                       "'interleaved' goes with parallel.virtual_stages > 1 and only with it");
    }
  } else if (!nanotron_pipeline) {
    p.pipeline_schedule =
        p.virtual_stages > 1 ? PipelineSchedule::Interleaved : PipelineSchedule::OneFOneB;
  }
  // DeepSpeed's PipelineEngine partitions what it sends over the TP group by default
  // (runtime/config.py pipeline: pipe_partitioned, grad_partitioned); Megatron-core's p2p sends
  // whole tensors (Megatron-LM split them until 3c92fa93b5, 2023-03).
  if (!given("parallel.scatter_gather_tensors_in_pipeline")) {
    p.scatter_gather_tensors_in_pipeline = p.framework == Framework::DeepSpeed;
  } else if (p.scatter_gather_tensors_in_pipeline && p.framework != Framework::DeepSpeed &&
             p.framework != Framework::Megatron) {
    throw InputError("parallel.scatter_gather_tensors_in_pipeline",
                     "Megatron-LM's and DeepSpeed's pipeline p2p: needs parallel.framework "
                     "megatron or deepspeed (nanotron's and torchtitan's pipelines send the "
                     "tensor as it is); allowed here: false");
  } else if (p.scatter_gather_tensors_in_pipeline && !s.pipeline_tensors_whole_over_tp()) {
    s.warnings.push_back({"parallel.scatter_gather_tensors_in_pipeline",
                          "not used: it splits the pipeline's p2p tensors over TP only with "
                          "tp > 1, pp > 1 and without sequence_parallel (whose tensors are "
                          "split already)"});
  }
}

// DeepSpeed's rule (runtime/config.py, _set_batch_related_parameters): of train_batch_size,
// micro-batch and gradient accumulation, any two determine the third; all three must agree.
void batch_rules(Scenario& s, const Given& given) {
  TrainingConfig& t = s.training;
  const int dp = s.parallel.dp;
  const bool has_gbs = given("training.global_batch_size");
  const bool has_mbs = given("training.micro_batch_size");
  const bool has_gas = given("training.gradient_accumulation_steps");
  const std::int64_t gbs = t.global_batch_size;
  std::int64_t mbs = t.micro_batch_size, gas = t.gradient_accumulation_steps;
  auto not_divisible = [&](const std::string& by) {
    throw InputError("training.global_batch_size",
                     "global_batch_size " + std::to_string(gbs) + " is not divisible by " + by);
  };
  if (has_gbs && has_mbs && has_gas) {
    if (gbs != mbs * gas * dp) {
      throw InputError("training.global_batch_size",
                       "must equal micro_batch_size x gradient_accumulation_steps x dp = " +
                           std::to_string(mbs) + " x " + std::to_string(gas) + " x " +
                           std::to_string(dp) + " = " + std::to_string(mbs * gas * dp) +
                           ", got " + std::to_string(gbs));
    }
  } else if (has_gbs && has_mbs) {
    if (gbs % (mbs * dp) != 0) not_divisible("micro_batch_size x dp = " + std::to_string(mbs * dp));
    gas = gbs / (mbs * dp);
  } else if (has_gbs && has_gas) {
    if (gbs % (gas * dp) != 0) {
      not_divisible("gradient_accumulation_steps x dp = " + std::to_string(gas * dp));
    }
    mbs = gbs / (gas * dp);
  } else if (has_gbs) {
    if (gbs % dp != 0) not_divisible("dp = " + std::to_string(dp));
    gas = 1;
    mbs = gbs / dp;
  } else {
    if (!has_mbs) mbs = 1;
    if (!has_gas) gas = 1;
    t.global_batch_size = mbs * gas * dp;
  }
  t.micro_batch_size = mbs;
  t.gradient_accumulation_steps = gas;
  // Each micro-batch is hundreds of ops per rank: beyond 10^5 per step the plan would not fit
  // in memory, and no real run accumulates that many.
  constexpr std::int64_t kMaxMicroBatches = 100'000;
  if (gas > kMaxMicroBatches) {
    throw InputError(has_gas ? "training.gradient_accumulation_steps" : "training.global_batch_size",
                     std::to_string(gas) + " micro-batches per step exceeds the " +
                         std::to_string(kMaxMicroBatches) +
                         " zerosim simulates; raise training.micro_batch_size");
  }
  const bool odd_for_dualpipe = s.two_model_copies() && gas % 2 != 0;
  if (s.dualpipe_library() && (gas < 2 * s.parallel.pp || odd_for_dualpipe)) {
    // dualpipe.py and dualpipev.py assert num_chunks >= num_ranks * 2; dualpipe.py feeds half
    // of them from each end.
    throw InputError("training.gradient_accumulation_steps",
                     std::string("the ") + (s.two_model_copies() ? "dualpipe" : "dualpipev") +
                         " schedule needs at least 2 x parallel.pp (" +
                         std::to_string(2 * s.parallel.pp) + ")" +
                         (s.two_model_copies() ? ", an even number of," : "") +
                         " micro-batches per step; got " + std::to_string(gas));
  }
  if (s.parallel.pipeline_schedule == PipelineSchedule::Interleaved && gas % s.parallel.pp != 0) {
    throw InputError("training.gradient_accumulation_steps",
                     "the interleaved schedule needs the micro-batches per step (" +
                         std::to_string(gas) + ") to be a multiple of parallel.pp (" +
                         std::to_string(s.parallel.pp) + ")");
  }
}

void precision_rules(Scenario& s, const Given& given) {
  try {
    (void)s.cluster.gpu.peak_tflops(s.training.precision);
  } catch (const std::invalid_argument&) {
    throw InputError("training.precision", s.cluster.gpu.name + " has no " +
                                               to_string(s.training.precision) +
                                               " tensor cores; use another precision");
  }
  const char* key = "training.fp8_recipe";
  if (s.training.precision != Precision::Fp8) {
    // Megatron reads --fp8-recipe and leaves it unused without --fp8-format.
    if (given(key)) {
      s.warnings.push_back({key, "not used: training.precision is " +
                                     to_string(s.training.precision) + ", not fp8"});
    }
    return;
  }
  const bool torchao = s.parallel.framework == Framework::Fsdp;
  if (!given(key)) s.training.fp8_recipe = torchao ? Fp8Recipe::Tensorwise : Fp8Recipe::Delayed;
  if (torchao && s.training.fp8_recipe != Fp8Recipe::Tensorwise) {
    throw InputError(key, "fsdp runs FP8 as torchao's Float8Linear (torchtitan), whose recipe "
                          "zerosim simulates is tensorwise; allowed under fsdp: tensorwise");
  }
  // Transformer Engine's check_mxfp8_support: compute capability 10.x (Blackwell).
  if (s.training.fp8_recipe == Fp8Recipe::Mxfp8 &&
      s.cluster.gpu.generation != GpuGeneration::Blackwell) {
    throw InputError(key, "mxfp8 needs a Blackwell GPU (Transformer Engine: compute capability "
                          "10.0); " + s.cluster.gpu.name + " is " +
                              to_string(s.cluster.gpu.generation) +
                              "; allowed: delayed, tensorwise, blockwise");
  }
}

// FP8 weight all-gathers: where they are simulated (after the ZeRO settings are final).
void fp8_gather_rules(const Scenario& s) {
  if (s.training.fp8_param_gather) {
    if (s.training.precision != Precision::Fp8) {
      throw InputError("training.fp8_param_gather", "needs training.precision fp8");
    }
    // Megatron-LM asserts --fp8-param-gather runs with the distributed optimizer or an FSDP
    // (arguments.py at d98e8a6).
    const bool distributed_optimizer = s.parallel.framework == Framework::Megatron &&
                                       (s.zero.stage == 1 || s.zero.stage == 2);
    if (s.zero.stage != 3 && !distributed_optimizer) {
      throw InputError("training.fp8_param_gather",
                       "simulated for ZeRO-3 / FSDP's parameter all-gathers (zero.stage 3) and "
                       "Megatron's distributed optimizer (framework megatron, zero.stage 1 or "
                       "2); got " + to_string(s.parallel.framework) + " with zero.stage " +
                           std::to_string(s.zero.stage));
    }
    if (s.zero.quantized_weights || s.zero.per_parameter_stage3()) {
      throw InputError("training.fp8_param_gather",
                       "not with ZeRO++ qwZ (zero.zero_quantized_weights) or the 2021 stage 3 "
                       "(zero.stage3_implementation per-parameter)");
    }
  }
}

// torch.compile changes what zerosim prices only where the model code would otherwise run op by
// op: torchtitan's (framework fsdp).
void compile_rules(const Scenario& s) {
  if (s.training.torch_compile && s.parallel.framework != Framework::Fsdp) {
    throw InputError("training.torch_compile",
                     "simulated for torchtitan (framework fsdp); Megatron's, DeepSpeed's and "
                     "nanotron's layers run fused kernels already; allowed here: false");
  }
}

// Recomputation's framework keys, each where its framework runs it: Megatron-core's
// recompute_modules, DeepSpeed's cpu_checkpointing and partition_activations. torchtitan's
// op-level checkpointing: where it is simulated. Its save policy counts the matmuls of
// torchtitan's dense Llama block (op_checkpoint_matmuls, sim/model/model.h); its TP plan makes
// the norms sequence-parallel.
void recompute_rules(const Scenario& s, const Given& given) {
  if (given("parallel.recompute_modules") &&
      (s.parallel.recompute != Recompute::Selective ||
       s.parallel.framework != Framework::Megatron)) {
    throw InputError("parallel.recompute_modules",
                     "is Megatron-core's --recompute-modules: needs parallel.framework megatron "
                     "and parallel.recompute selective");
  }
  // Megatron-core raises for any other activation (transformer_config.py __post_init__).
  if (s.parallel.activation_func_fp8_input_store &&
      (s.parallel.framework != Framework::Megatron || s.model.mlp != MlpKind::Swiglu)) {
    throw InputError("parallel.activation_func_fp8_input_store",
                     "is Megatron-core's --activation-func-fp8-input-store, supported for SwiGLU "
                     "only: needs parallel.framework megatron and model.mlp swiglu (model '" +
                         s.model.name + "' has " + to_string(s.model.mlp) + ")");
  }
  // DeepSpeed's CheckpointFunction (runtime/activation_checkpointing/checkpointing.py) handles
  // the checkpoints of full recomputation: its options need both.
  const auto deepspeed_checkpoints = [&](const char* key, const char* verb) {
    if (s.parallel.framework != Framework::DeepSpeed)
      throw InputError(key, "is DeepSpeed's activation checkpointing: needs parallel.framework "
                            "deepspeed");
    if (s.parallel.recompute != Recompute::Full)
      throw InputError(key, std::string(verb) + " the checkpoints of full recomputation: needs "
                                                "parallel.recompute full");
  };
  if (s.parallel.cpu_checkpointing) {
    // Simulated without pipeline stages, whose in-flight micro-batches would multiply what the
    // host holds.
    deepspeed_checkpoints("parallel.cpu_checkpointing", "moves");
    if (s.parallel.pp > 1)
      throw InputError("parallel.cpu_checkpointing",
                       "is simulated without pipeline parallelism: needs parallel.pp 1");
  }
  // Splitting each checkpoint over the tensor-parallel group is a no-op at tp 1, as in DeepSpeed,
  // where mp_size 1 neither splits nor gathers.
  if (s.parallel.partition_activations) {
    deepspeed_checkpoints("parallel.partition_activations", "partitions");
  }
  if (s.parallel.recompute != Recompute::SelectiveOp) return;
  const std::string what = "selective-op (torchtitan's op-level selective checkpointing)";
  if (s.parallel.framework != Framework::Fsdp) {
    throw InputError("parallel.recompute", what + " runs in torchtitan, whose data parallelism "
                                                  "is FSDP: set parallel.framework fsdp, or "
                                                  "use none, selective or full");
  }
  if (s.model.is_moe() || s.model.is_mla()) {
    throw InputError("parallel.recompute", what + " is simulated for dense models with "
                                                  "standard attention; MoE and MLA layers are "
                                                  "not simulated yet; use full");
  }
  if (s.parallel.tp > 1 && !s.parallel.sequence_parallel) {
    throw InputError("parallel.sequence_parallel",
                     "torchtitan's tensor parallelism is sequence-parallel; with recompute "
                     "selective-op and tp > 1 set it true");
  }
}

// Bucket sizes and DeepSpeed's defaults and rules for offload and the 2021 stage 3.
void zero_rules(Scenario& s, const Given& given) {
  ZeroConfig& z = s.zero;
  const ParallelConfig& p = s.parallel;
  if (z.reduce_bucket_size == 0) {
    // DeepSpeed accepts 0 (ge=0 in its ZeRO config): the bucket is flushed before every
    // gradient, so each unit's gradients are reduced on their own.
    s.warnings.push_back({"zero.reduce_bucket_size",
                          "0: every gradient is reduced on its own, as DeepSpeed does with an "
                          "empty bucket"});
  }
  if (!given("zero.overlap_comm")) z.overlap_comm = z.stage == 3;
  // DeepSpeed's engine reduces gradients in seq_parallel_communication_data_type whenever
  // sequence parallelism is on, whatever communication_data_type says (framework_policy.cpp).
  const bool ulysses = s.deepspeed_ulysses();
  if (ulysses && given("zero.communication_data_type")) {
    s.warnings.push_back({"zero.communication_data_type",
                          std::string("replaced by zero.seq_parallel_communication_data_type (") +
                              name_of(kSeqCommDtypeNames, z.seq_parallel_communication_dtype) +
                              "), as DeepSpeed's engine replaces it under sequence parallelism"});
  }
  if (!ulysses && given("zero.seq_parallel_communication_data_type")) {
    s.warnings.push_back({"zero.seq_parallel_communication_data_type",
                          "no effect: DeepSpeed reads it only under sequence parallelism "
                          "(framework deepspeed with cp > 1)"});
  }
  // DeepSpeed's own rules: optimizer offload needs a ZeRO optimizer (stage 1, 2 or 3);
  // parameter offload exists only in stage 3 (partitioned parameters). Below those stages
  // DeepSpeed builds no optimizer or parameter partitioner that reads them, and runs the
  // configuration without them (its hybrid-engine test config has stage 0 with offload_param):
  // so does zerosim, saying so. The stage-3 settings likewise.
  if (z.offload_optimizer != OffloadDevice::None && z.stage == 0) {
    z.offload_optimizer = OffloadDevice::None;
    s.warnings.push_back({"zero.offload_optimizer.device",
                          "no effect at zero.stage 0 (no ZeRO optimizer to offload): ignored, "
                          "as DeepSpeed ignores it"});
  }
  if (z.offload_param != OffloadDevice::None && z.stage != 3) {
    z.offload_param = OffloadDevice::None;
    s.warnings.push_back({"zero.offload_param.device",
                          "no effect at zero.stage " + std::to_string(z.stage) +
                              ": parameters are partitioned, and so offloaded, only at stage 3 "
                              "(ZeRO-Infinity); ignored, as DeepSpeed ignores it"});
  }
  if (z.stage != 3) {
    // Said where they differ from DeepSpeed's defaults, which a scenario's echo spells out.
    for (const char* key : {"zero.stage3_prefetch_bucket_size", "zero.stage3_max_live_parameters",
                            "zero.stage3_max_reuse_distance",
                            "zero.stage3_param_persistence_threshold"}) {
      const KeySpec& k = *find_key(key);
      if (given(key) && k.echo(s) != k.default_value)
        s.warnings.push_back({key, "no effect at zero.stage " + std::to_string(z.stage) +
                                       ": a stage-3 setting"});
    }
  }
  if ((z.offload_optimizer != OffloadDevice::None || z.offload_param != OffloadDevice::None) &&
      p.framework != Framework::DeepSpeed) {
    throw InputError(z.offload_optimizer != OffloadDevice::None ? "zero.offload_optimizer.device"
                                                                : "zero.offload_param.device",
                     "offload is simulated as DeepSpeed runs it; set parallel.framework=deepspeed");
  }
  // DeepSpeed's stage 1/2 optimizer offloads to CPU memory for any device but none
  // (runtime/zero/stage_1_and_2.py: cpu_offload); NVMe swapping is stage 3's (ZeRO-Infinity).
  if (z.offload_optimizer == OffloadDevice::Nvme && (z.stage == 1 || z.stage == 2)) {
    z.offload_optimizer = OffloadDevice::Cpu;
    s.warnings.push_back({"zero.offload_optimizer.device",
                          "nvme at ZeRO stage " + std::to_string(z.stage) +
                              ": DeepSpeed's stage 1/2 optimizer keeps the offloaded states in "
                              "CPU memory whatever the device (stage_1_and_2.py) and swaps "
                              "nothing to NVMe; simulated as cpu"});
  }
  for (auto [key, device] : {std::pair{"zero.offload_optimizer.device", z.offload_optimizer},
                             std::pair{"zero.offload_param.device", z.offload_param}}) {
    if (device == OffloadDevice::Nvme && s.cluster.host.nvme_bandwidth <= 0) {
      throw InputError(key, "the cluster's nodes have no NVMe (cluster.host.nvme_bandwidth is 0)");
    }
  }
  if (z.stage3_implementation != Stage3Implementation::Coalesced &&
      (z.stage != 3 || p.framework != Framework::DeepSpeed)) {
    throw InputError("zero.stage3_implementation",
                     "describes DeepSpeed's stage 3; needs zero.stage 3 and parallel.framework "
                     "deepspeed");
  }
  if (z.delayed_param_update && z.offload_optimizer == OffloadDevice::None) {
    throw InputError("zero.offload_optimizer.delayed_param_update",
                     "the delayed parameter update overlaps the CPU optimizer step; it needs "
                     "zero.offload_optimizer.device cpu or nvme");
  }
  if (z.mics_shard_size == 0) {
    throw InputError("zero.mics_shard_size", "must be -1 (off) or a positive group size, got 0");
  }
}

// Megatron's overlap flags: DDP (stage 0) or the distributed optimizer (stage 1); the
// parameter gather exists only with the distributed optimizer (Megatron asserts it). Its
// gradients are fp32 with bf16 unless the user says otherwise.
void megatron_rules(Scenario& s, const Given& given) {
  ParallelConfig& p = s.parallel;
  const int zs = s.zero.stage;
  if (given("parallel.ddp_bucket_size")) {
    if (p.framework != Framework::Megatron) {
      throw InputError("parallel.ddp_bucket_size",
                       "a Megatron-core DDP setting: needs parallel.framework megatron (DeepSpeed's "
                       "is zero.reduce_bucket_size)");
    }
    if (p.ddp_bucket_size < 1) {
      throw InputError("parallel.ddp_bucket_size",
                       "must be at least 1 parameter, got " + std::to_string(p.ddp_bucket_size));
    }
    if (!p.overlap_grad_reduce) {
      s.warnings.push_back({"parallel.ddp_bucket_size",
                            "not used without parallel.overlap_grad_reduce: Megatron-core then "
                            "reduces each model chunk's gradients as one bucket"});
    }
  }
  if (given("parallel.grad_reduce_in_fp32") && p.framework != Framework::Megatron) {
    throw InputError("parallel.grad_reduce_in_fp32",
                     "a Megatron-core DDP setting: needs parallel.framework megatron (DeepSpeed's "
                     "is zero.communication_data_type)");
  }
  // Megatron-LM (arguments.py) and Megatron-Bridge (comm_overlap.py) overlap the pipeline's p2p
  // with the interleaved schedule and turn it off without it; zerosim's combined 1F1B posts its
  // receives as the plain schedule does.
  const bool interleaved = p.pp > 1 && p.pipeline_schedule == PipelineSchedule::Interleaved &&
                           !p.overlap_moe_expert_parallel_comm;
  if (!given("parallel.overlap_p2p_comm")) {
    p.overlap_p2p_comm = p.framework == Framework::Megatron && interleaved;
  } else if (p.overlap_p2p_comm && p.framework != Framework::Megatron) {
    throw InputError("parallel.overlap_p2p_comm",
                     "a Megatron-core pipeline setting: needs parallel.framework megatron");
  } else if (p.overlap_p2p_comm && !interleaved) {
    s.warnings.push_back({"parallel.overlap_p2p_comm",
                          "not used: only the interleaved schedule (pp > 1, virtual_stages > 1, "
                          "without overlap_moe_expert_parallel_comm) overlaps its p2p, as "
                          "Megatron-LM turns it off otherwise"});
    p.overlap_p2p_comm = false;
  }
  // Megatron-LM has reduced the column-parallel input gradient beside the weight-gradient GEMM
  // since 3f65246911 (2021-09, --no-async-tensor-model-parallel-allreduce to turn it off) and,
  // under sequence parallelism, always (core/tensor_parallel/layers.py at d98e8a6), as Transformer
  // Engine's linears do; nanotron's ParallelismArgs leaves tp_linear_async_communication off.
  const bool tp_linears = p.framework == Framework::Megatron || p.framework == Framework::Nanotron;
  if (!given("parallel.tp_linear_async_communication")) {
    p.tp_linear_async_communication = p.framework == Framework::Megatron;
  } else if (p.tp_linear_async_communication && !tp_linears) {
    throw InputError("parallel.tp_linear_async_communication",
                     "Megatron's and nanotron's tensor-parallel linears: needs parallel.framework "
                     "megatron or nanotron (Megatron-DeepSpeed turns it off under --deepspeed, "
                     "megatron/arguments.py; FSDP's DTensor linears reduce after their "
                     "backward); allowed here: false");
  } else if (!p.tp_linear_async_communication && p.framework == Framework::Megatron &&
             p.sequence_parallel && p.tp > 1) {
    s.warnings.push_back({"parallel.tp_linear_async_communication",
                          "not used: under sequence_parallel Megatron-core and Transformer Engine "
                          "always reduce-scatter the input gradient beside the weight-gradient "
                          "GEMM; simulated as true"});
    p.tp_linear_async_communication = true;
  }
  if (p.tp_comm_overlap && !(p.framework == Framework::Megatron && p.tp > 1 && p.sequence_parallel)) {
    throw InputError("parallel.tp_comm_overlap",
                     "a Megatron-LM flag (Transformer Engine userbuffers): needs parallel.framework "
                     "megatron, tp > 1 and sequence_parallel (Megatron asserts it)");
  }
  if (s.model.mtp_num_layers > 0) {
    if (p.framework != Framework::Megatron)
      throw InputError("model.mtp_num_layers",
                       "multi-token prediction is Megatron-core's (--mtp-num-layers); needs "
                       "parallel.framework megatron (DeepSpeed, FSDP and nanotron do not train an "
                       "MTP module)");
    if (s.model.position == PositionKind::Learned)
      throw InputError("model.mtp_num_layers",
                       "Megatron-core's MTP does not support learned absolute position "
                       "embeddings; allowed with model.position rotary");
  }
  if (p.delay_wgrad_compute && !p.overlap_moe_expert_parallel_comm)
    throw InputError("parallel.delay_wgrad_compute",
                     "Megatron-core delays the weight gradients in its combined 1F1B only "
                     "(transformer_config.py asserts overlap_moe_expert_parallel_comm): set "
                     "parallel.overlap_moe_expert_parallel_comm true, or this false");
  if (p.overlap_moe_expert_parallel_comm) {
    // Megatron-core's asserts (transformer_config.py __post_init__), and what zerosim's combined
    // schedule is built on.
    const char* key = "parallel.overlap_moe_expert_parallel_comm";
    if (p.framework != Framework::Megatron || p.ep <= 1)
      throw InputError(key, "is Megatron-core's EP all-to-all overlap: needs parallel.framework "
                            "megatron and parallel.ep > 1");
    if (s.dualpipe_library())
      throw InputError(key, "is Megatron-core's combined 1F1B; DualPipe overlaps its "
                            "forwards and backwards itself: set false");
    if (p.pp > 1 && p.pipeline_schedule != PipelineSchedule::Interleaved)
      throw InputError(key, "needs the interleaved schedule with pp > 1 (Megatron-core asserts "
                            "virtual_pipeline_model_parallel_size): set parallel.virtual_stages > 1");
    if (p.recompute == Recompute::Full || p.recompute == Recompute::SelectiveOp)
      throw InputError(key, "cannot be combined with full recomputation (Megatron-core asserts "
                            "it); allowed: parallel.recompute none or selective");
    if (s.model.mtp_num_layers > 1)
      throw InputError(key, "supports at most one MTP layer (Megatron-core asserts it)");
  }
  // Megatron-core's precision-aware optimizer: its asserts (optimizer_config.py __post_init__
  // and optimizer/__init__.py at d98e8a6): the dtypes need the flag, the flag the distributed
  // optimizer (zerosim's megatron stage 1 or 2).
  const TrainingConfig& t = s.training;
  const char* pao = "training.use_precision_aware_optimizer";
  if (t.precision_aware_optimizer && p.framework != Framework::Megatron)
    throw InputError(pao, "is Megatron-core's (Transformer Engine's FusedAdam): needs "
                          "parallel.framework megatron");
  if (!t.precision_aware_optimizer) {
    const std::pair<const char*, StateDtype> dtypes[] = {
        {"training.main_params_dtype", t.main_params_dtype},
        {"training.exp_avg_dtype", t.exp_avg_dtype},
        {"training.exp_avg_sq_dtype", t.exp_avg_sq_dtype}};
    for (const auto& [key, dtype] : dtypes) {
      if (dtype != StateDtype::Fp32)
        throw InputError(key, "can only be fp32 without " + std::string(pao) +
                                  " (Megatron-core asserts it)");
    }
  } else {
    if (zs != 1 && zs != 2)
      throw InputError(pao, "only with the distributed optimizer (Megatron-core raises "
                            "otherwise): needs zero.stage 1 or 2, got " + std::to_string(zs));
    if (s.zero.offload_optimizer != OffloadDevice::None)
      throw InputError(pao, "with an offloaded optimizer is not simulated");
  }
  if (!given("parallel.grad_reduce_in_fp32"))
    p.grad_reduce_in_fp32 = p.framework == Framework::Megatron &&
                            sixteen_bit(s.training.precision) == Precision::Bf16;
  if (p.overlap_grad_reduce && !(p.framework == Framework::Megatron && zs <= 1)) {
    throw InputError("parallel.overlap_grad_reduce",
                     "a Megatron-LM flag: needs parallel.framework megatron and zero.stage 0 "
                     "(DDP) or 1 (distributed optimizer)");
  }
  // ZB-H1 and ZB-V are the zero-bubble authors' Megatron-LM fork (sail-sg/zero-bubble-
  // pipeline-parallelism), with DDP or the distributed optimizer.
  if (p.pipeline_schedule == PipelineSchedule::ZeroBubble && p.pp > 1 && !s.zero_bubble_runs()) {
    throw InputError("parallel.pipeline_schedule",
                     "'zero-bubble' (ZB-H1, ZB-V) is simulated as the zero-bubble Megatron-LM fork "
                     "runs it: needs parallel.framework megatron and zero.stage 0 or 1");
  }
  // DualPipe's training loop reduces the gradients after the step: its deferred weight
  // gradients are accumulated by hand (WeightGradStore), past the frameworks' gradient hooks.
  if (s.dualpipe_library()) {
    if (!(p.framework == Framework::Megatron && zs <= 1)) {
      throw InputError("parallel.pipeline_schedule",
                       "DualPipe is simulated as DeepSeek's DualPipe library runs a "
                       "Megatron-style model, with the gradients reduced after the step: needs "
                       "parallel.framework megatron and zero.stage 0 or 1");
    }
    if (p.overlap_grad_reduce) {
      throw InputError("parallel.overlap_grad_reduce",
                       "DualPipe accumulates its deferred weight gradients by hand "
                       "(WeightGradStore), past the hooks that would overlap their reduction: "
                       "set false");
    }
  }
  if (p.overlap_param_gather && !(p.framework == Framework::Megatron && zs == 1)) {
    throw InputError("parallel.overlap_param_gather",
                     "a Megatron-LM distributed-optimizer flag: needs parallel.framework "
                     "megatron and zero.stage 1");
  }
}

// ZeRO++ and MiCS as DeepSpeed (and PyTorch FSDP for hybrid sharding) implement them.
void sharding_variant_rules(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  const ParallelConfig& p = s.parallel;
  const bool deepspeed = p.framework == Framework::DeepSpeed;
  auto need_stage3 = [&](const char* key, const char* what) {
    if (z.stage != 3 || !deepspeed) {
      throw InputError(key, std::string(what) + " works on DeepSpeed's partitioned (stage-3) "
                                                "parameters; needs zero.stage 3 and "
                                                "parallel.framework deepspeed");
    }
  };
  // The sharding groups split the dp x cp ranks that hold the same weights.
  auto need_divisor = [&](const char* key, int k) {
    if (p.dp_cp() % k != 0) {
      throw InputError(key, "must divide the data-parallel degree (dp x cp = " +
                                std::to_string(p.dp_cp()) + "), got " + std::to_string(k));
    }
  };
  if (z.quantized_weights) need_stage3("zero.zero_quantized_weights", "qwZ");
  if (z.quantized_gradients) need_stage3("zero.zero_quantized_gradients", "qgZ");
  if (z.hpz_partition_size > 1) {
    need_stage3("zero.zero_hpz_partition_size", "hpZ");
    need_divisor("zero.zero_hpz_partition_size", z.hpz_partition_size);
  }
  if (z.mics_shard_size > 0) {
    const bool fsdp = p.framework == Framework::Fsdp;
    if (!(fsdp && z.stage >= 2) && !(deepspeed && z.stage == 3)) {
      throw InputError("zero.mics_shard_size",
                       "hybrid sharding is DeepSpeed MiCS (zero.stage 3) or PyTorch FSDP "
                       "HYBRID_SHARD (parallel.framework fsdp, zero.stage 2 or 3)");
    }
    need_divisor("zero.mics_shard_size", z.mics_shard_size);
    if (z.hpz_partition_size > 1 || z.quantized_gradients) {
      throw InputError("zero.mics_shard_size",
                       "MiCS does not combine with hpZ or qgZ in DeepSpeed; set "
                       "zero.zero_hpz_partition_size 1 and zero.zero_quantized_gradients false");
    }
  }
  if (z.quantized_gradients) {
    const int local = s.dp_ranks_per_node();
    if (p.dp_cp() % local != 0) {
      throw InputError("zero.zero_quantized_gradients",
                       "qgZ's all-to-all goes node by node: the data-parallel degree (" +
                           std::to_string(p.dp_cp()) + ") must be a multiple of the DP ranks per node (" +
                           std::to_string(local) + ")");
    }
    if (z.hpz_partition_size > 1 && z.hpz_partition_size != local) {
      throw InputError("zero.zero_hpz_partition_size",
                       "with qgZ, zerosim needs the hpZ group to be the node's DP ranks (" +
                           std::to_string(local) + "), got " +
                           std::to_string(z.hpz_partition_size));
    }
  }
  if (p.framework == Framework::Fsdp && z.stage != 3 && z.stage != 2) {
    throw InputError("zero.stage", "FSDP shards as ZeRO-3 (FULL_SHARD) or ZeRO-2 "
                                   "(SHARD_GRAD_OP); allowed: 2, 3");
  }
}

void whatif_rules(Scenario& s) {
  const WhatIf& w = s.whatif;
  if (w.background_nodes > 0 && s.sim.network != NetworkModel::Flow) {
    throw InputError("whatif.background_nodes",
                     "a second job sharing the fabric needs sim.network=flow (the other "
                     "network models have no shared links)");
  }
  // A straggler or a degraded node breaks the symmetry that folding relies on.
  if (!w.slow_ranks.empty() || !w.degraded_nodes.empty()) s.sim.folded = false;
}

}  // namespace

Scenario resolve_scenario(const json& doc) {
  ScenarioDocument d;
  d.doc = doc;
  return resolve_scenario(d);
}

Scenario resolve_scenario(const ScenarioDocument& input) {
  // Values a framework config implies count only where the scenario does not give the key.
  json with_implied;
  std::vector<InputWarning> implied_warnings;
  if (!input.implied.empty()) {
    with_implied = input.doc;
    for (const auto& [key, implied] : input.implied) {
      const json* given = json_path_find(with_implied, key);
      if (given && !given->is_null()) continue;
      json_path_create(with_implied, key) = implied.value;
      implied_warnings.push_back({implied.user_key, implied.message});
    }
  }
  const json& doc = input.implied.empty() ? input.doc : with_implied;
  check_unknown_keys(doc, "");
  const Given given = [&doc](const std::string& path) {
    const json* v = json_path_find(doc, path);
    return v && !v->is_null();
  };
  Scenario s;
  // The workload is the user's to name: its defaults are said.
  if (!given("model"))
    s.warnings.push_back({"model", "not given: the default " +
                                       find_key("model")->default_value.get<std::string>() +
                                       " is simulated (--model names the model)"});
  if (!given("cluster"))
    s.warnings.push_back({"cluster", "not given: the default " +
                                         find_key("cluster")->default_value.dump() +
                                         " is simulated (--cluster and --nodes name it)"});
  try {
    for (const KeySpec& k : scenario_keys()) {
      const json* v = json_path_find(doc, k.path);
      if (v && !v->is_null()) {
        k.read(*v, s);
      } else if (!k.default_value.is_null()) {
        k.read(k.default_value, s);
      }
    }
    parallel_rules(s, given);
    pipeline_rules(s, given);
    batch_rules(s, given);
    precision_rules(s, given);
    zero_rules(s, given);
    megatron_rules(s, given);
    sharding_variant_rules(s);
    fp8_gather_rules(s);
    recompute_rules(s, given);
    compile_rules(s);
    whatif_rules(s);
  } catch (const InputError& e) {
    // A value the user wrote under another name (a ds_config key) is refused on that name.
    const auto it = input.origin.find(e.key_path());
    if (it == input.origin.end()) throw;
    const std::string what = e.what();
    throw InputError(it->second, what.substr(e.key_path().size() + 2));
  }

  json echo;
  for (const KeySpec& k : scenario_keys()) {
    json value = k.echo(s);
    if (!value.is_null()) json_path_create(echo, k.path) = std::move(value);
  }
  s.resolved = std::move(echo);

  // What resolution found about keys the user wrote under another name names the user's key.
  for (InputWarning& w : s.warnings) {
    auto it = input.origin.find(w.key_path);
    if (it != input.origin.end()) w.key_path = it->second;
  }
  std::vector<InputWarning> all = input.warnings;
  all.insert(all.end(), implied_warnings.begin(), implied_warnings.end());
  for (const auto& [key, user_key] : input.filled_from_scenario) {
    const json* value = json_path_find(s.resolved, key);
    all.push_back({user_key, "\"auto\": the Hugging Face Trainer fills it from its arguments; "
                             "zerosim takes the scenario's " + key + " = " +
                             (value ? value->dump() : std::string("?"))});
  }
  all.insert(all.end(), s.warnings.begin(), s.warnings.end());
  s.warnings = std::move(all);
  return s;
}

}  // namespace zerosim
