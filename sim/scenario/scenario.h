#pragma once
// A scenario: what to simulate. One JSON document with the sections model, cluster, training,
// parallel, zero, sim and whatif. Every key is declared once, in the binding table of keys.cpp
// (keys.h): its type, unit, default, help, where it lands in Scenario, its enum names, its
// command-line shortcut, its DeepSpeed config key and its published-case key. That table drives
// the JSON reader, the resolved echo, --set, the CLI flags, the ds_config mapping, the case format
// and `zerosim list keys`.
//
// Resolution order: built-in defaults <- scenario file <- --deepspeed config <- command-line
// flags (document.cpp). The resolved document (defaults included) is echoed in the report so a
// run reproduces.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster/cluster.h"
#include "sim/core/enum_names.h"
#include "sim/core/error.h"
#include "sim/model/model.h"

namespace zerosim {

enum class Framework { DeepSpeed, Megatron, Fsdp, Nanotron };
// alpha-beta: ring formula per link class; analytical: NCCL's closed form (algorithm and protocol
// chosen as NCCL does, no contention); flow: NCCL-laid flows sharing links max-min fairly.
enum class NetworkModel { AlphaBeta, Analytical, Flow };
enum class OffloadDevice { None, Cpu, Nvme };
// ZeroBubble: ZB-H1 (Qi et al., ICLR 2024), and ZB-V with two chunks per stage (the authors'
// fork). DeepSeek's DualPipe library: DualPipe (DeepSeek-V3's
// bidirectional schedule, dualpipe.py): the model split into pp stages, stage s holding stage s
// of one copy and stage pp - 1 - s of another, micro-batches fed from both ends; DualPipeV
// (dualpipev.py), its V-shaped cut in half: two chunks per stage, stage s holding virtual stages
// s and 2 pp - 1 - s of one copy.
enum class PipelineSchedule { GPipe, OneFOneB, Interleaved, ZeroBubble, DualPipe, DualPipeV };
// How context parallelism exchanges keys and values (Megatron-core's --cp-comm-type): p2p, ring
// attention (each chunk passed around the CP ring while the previous one is attended to);
// all_gather (all keys and values gathered before attention, as Llama 3 did); a2a (Ulysses: heads
// traded for the whole sequence by all-to-alls around attention); a2a+p2p (hierarchical, Transformer
// Engine's AttnFuncWithCPAndKVP2P with two groups): a2a over the first level of
// parallel.hierarchical_context_parallel_sizes, then the ring over the second.
enum class CpCommType { P2p, AllGather, A2a, A2aP2p };
// How an MoE layer's tokens reach their experts' ranks (Megatron-core's
// moe_token_dispatcher_type): alltoall, every (token, expert) pair over an NCCL all-to-all of the
// EP group; flex, DeepEP's kernels: each token once per node its experts are on over the network,
// then once per rank over NVLink (Megatron-core's flex dispatcher); allgather (Megatron-core's
// default) is simulated as alltoall.
enum class MoeDispatcher { AllToAll, AllGather, Flex };
// The wire dtype of the flex dispatcher's dispatch (and of the combine's backward): bf16, or
// MXFP8 (one byte per element and one scale byte per 32; Megatron-core's moe_dispatch_fwd_dtype
// and moe_combine_bwd_dtype; DeepSeek-V3's FP8 dispatch, 1 x 128 tiles with an fp32 scale each,
// moves the same bytes).
enum class WireDtype { Bf16, Mxfp8 };
// The dtype gradients are reduced in: the framework's own, or DeepSpeed's communication_data_type.
enum class CommDtype { Default, Fp16, Bf16, Fp32 };

inline constexpr EnumName<Framework> kFrameworkNames[] = {
    {Framework::DeepSpeed, "deepspeed"}, {Framework::Megatron, "megatron"},
    {Framework::Fsdp, "fsdp"}, {Framework::Nanotron, "nanotron"}};
inline constexpr EnumName<NetworkModel> kNetworkModelNames[] = {
    {NetworkModel::Analytical, "analytical"}, {NetworkModel::Flow, "flow"},
    {NetworkModel::AlphaBeta, "alpha-beta"}};
inline constexpr EnumName<OffloadDevice> kOffloadDeviceNames[] = {
    {OffloadDevice::None, "none"}, {OffloadDevice::Cpu, "cpu"}, {OffloadDevice::Nvme, "nvme"}};
inline constexpr EnumName<CpCommType> kCpCommTypeNames[] = {
    {CpCommType::P2p, "p2p"}, {CpCommType::AllGather, "all_gather"}, {CpCommType::A2a, "a2a"},
    {CpCommType::A2aP2p, "a2a+p2p"}};
inline constexpr EnumName<PipelineSchedule> kPipelineScheduleNames[] = {
    {PipelineSchedule::OneFOneB, "1f1b"}, {PipelineSchedule::GPipe, "gpipe"},
    {PipelineSchedule::Interleaved, "interleaved"}, {PipelineSchedule::ZeroBubble, "zero-bubble"},
    {PipelineSchedule::DualPipe, "dualpipe"}, {PipelineSchedule::DualPipeV, "dualpipev"}};
inline constexpr EnumName<MoeDispatcher> kMoeDispatcherNames[] = {
    {MoeDispatcher::AllToAll, "alltoall"}, {MoeDispatcher::AllGather, "allgather"},
    {MoeDispatcher::Flex, "flex"}};
inline constexpr EnumName<WireDtype> kWireDtypeNames[] = {{WireDtype::Bf16, "bf16"},
                                                         {WireDtype::Mxfp8, "mxfp8"}};
// Bytes per element on the wire: MXFP8's one-byte elements carry a one-byte scale per 32.
inline double wire_bytes_per_element(WireDtype d) {
  return d == WireDtype::Mxfp8 ? 33.0 / 32.0 : 2.0;
}
inline constexpr EnumName<CommDtype> kCommDtypeNames[] = {
    {CommDtype::Default, "default"}, {CommDtype::Fp16, "fp16"}, {CommDtype::Bf16, "bf16"},
    {CommDtype::Fp32, "fp32"}};
// DeepSpeed's seq_parallel_communication_data_type takes a dtype, not "default".
inline constexpr EnumName<CommDtype> kSeqCommDtypeNames[] = {
    {CommDtype::Fp16, "fp16"}, {CommDtype::Bf16, "bf16"}, {CommDtype::Fp32, "fp32"}};
// The precisions a step can train in: 16-bit, or fp8 as Transformer Engine runs it (the
// transformer layers' linear GEMMs in FP8; weights, activations, gradients and the attention
// core, embedding and output layer in bf16).
inline constexpr EnumName<Precision> kTrainingPrecisionNames[] = {
    {Precision::Bf16, "bf16"}, {Precision::Fp16, "fp16"}, {Precision::Fp8, "fp8"}};
// How fp8 training scales its FP8 tensors (Megatron-core's --fp8-recipe, Transformer Engine's
// recipes): delayed, one scale per tensor from the amax history of earlier steps; tensorwise
// (current scaling), one scale per tensor from its own amax; mxfp8 (Blackwell), an 8-bit
// exponent per 32 elements; blockwise, fp32 scales per 1 x 128 activation and 128 x 128 weight
// tile (DeepSeek-V3's). torchao's Float8Linear (torchtitan, framework fsdp) scales tensorwise.
enum class Fp8Recipe { Delayed, Tensorwise, Mxfp8, Blockwise };
inline constexpr EnumName<Fp8Recipe> kFp8RecipeNames[] = {{Fp8Recipe::Delayed, "delayed"},
                                                          {Fp8Recipe::Tensorwise, "tensorwise"},
                                                          {Fp8Recipe::Mxfp8, "mxfp8"},
                                                          {Fp8Recipe::Blockwise, "blockwise"}};
// Bytes per element of a tensor quantized by recipe `r`: one byte of data, plus MXFP8's E8M0
// scale per 32 elements or blockwise's fp32 scale per 128 (tensorwise and delayed scaling keep
// one scale per tensor).
inline double fp8_bytes_per_element(Fp8Recipe r) {
  if (r == Fp8Recipe::Mxfp8) return 1.0 + 1.0 / 32;
  if (r == Fp8Recipe::Blockwise) return 1.0 + 4.0 / 128;
  return 1.0;
}
// The dtype Megatron-core's precision-aware optimizer (Transformer Engine's FusedAdam) keeps an
// optimizer tensor in: --main-params-dtype takes fp32 or fp16, --exp-avg-dtype and
// --exp-avg-sq-dtype fp32, fp16, bf16 or fp8.
enum class StateDtype { Fp32, Fp16, Bf16, Fp8 };
inline constexpr EnumName<StateDtype> kMainParamsDtypeNames[] = {{StateDtype::Fp32, "fp32"},
                                                                 {StateDtype::Fp16, "fp16"}};
inline constexpr EnumName<StateDtype> kMomentDtypeNames[] = {{StateDtype::Fp32, "fp32"},
                                                             {StateDtype::Fp16, "fp16"},
                                                             {StateDtype::Bf16, "bf16"},
                                                             {StateDtype::Fp8, "fp8"}};
// Mixed-precision Adam's state per parameter: fp32 master weights and two fp32 moments (ZeRO,
// section 5: K = 12).
inline constexpr std::int64_t kAdamStateBytes = 12;
inline int bytes_of(StateDtype d) {
  return d == StateDtype::Fp32 ? 4 : d == StateDtype::Fp8 ? 1 : 2;
}
// The 16-bit dtype of a step's weights, activations and gradients (bf16 under fp8 training).
inline Precision sixteen_bit(Precision p) { return p == Precision::Fp8 ? Precision::Bf16 : p; }
inline constexpr EnumName<Recompute> kRecomputeNames[] = {
    {Recompute::None, "none"},
    {Recompute::Selective, "selective"},
    {Recompute::SelectiveOp, "selective-op"},
    {Recompute::Full, "full"}};

std::string to_string(Framework f);

struct TrainingConfig {
  std::int64_t micro_batch_size = 1;
  std::int64_t global_batch_size = 0;
  std::int64_t gradient_accumulation_steps = 1;  // micro-batches per step per DP rank
  Precision precision = Precision::Bf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::Delayed;  // fp8 only; tensorwise under fsdp (torchao)
  bool flash_attention = true;
  // The experts' GEMMs of an MoE layer run as one grouped GEMM (Megatron-core's
  // --moe-grouped-gemm) rather than one launch per expert (DeepSpeed-MoE's and transformers'
  // loop over the experts).
  bool moe_grouped_gemm = false;
  // The busiest expert's routed tokens over the mean (1: balanced routing). An expert-parallel
  // step waits for the rank that holds it: its expert GEMMs and its share of the all-to-alls
  // scale by this. With Megatron's moe_expert_capacity_factor c and padding to capacity, c.
  double moe_load_imbalance = 1.0;
  // fp8 training with ZeRO-3 / FSDP: the layers' weights all-gathered in FP8, 1 byte per element
  // (torchao's enable_fsdp_float8_all_gather under FSDP2, as torchtitan sets it).
  bool fp8_param_gather = false;
  // Megatron-core's precision-aware optimizer (--use-precision-aware-optimizer): the distributed
  // optimizer's master weights and Adam moments in the dtypes below, and with bf16 weights and
  // fp32 master weights that Transformer Engine manages, only their low 16 bits stored
  // (store_param_remainders). Scenario::optimizer_state_bytes_per_param says what that comes to.
  bool precision_aware_optimizer = false;
  StateDtype main_params_dtype = StateDtype::Fp32;
  StateDtype exp_avg_dtype = StateDtype::Fp32;
  StateDtype exp_avg_sq_dtype = StateDtype::Fp32;
  bool store_param_remainders = true;
  // torch.compile on the model (torchtitan's training.compile): its elementwise ops run fused.
  // Without it torchtitan's model code runs op by op in eager PyTorch (framework fsdp only;
  // Megatron's and DeepSpeed's layers run fused kernels either way, nanotron's its own mix:
  // LayerCodePolicy in sim/parallel/framework_policy.h).
  bool torch_compile = false;
};

struct ParallelConfig {
  int tp = 1, pp = 1, dp = 1, cp = 1;
  // Expert parallelism (MoE models): the experts are spread over groups of ep consecutive DP
  // ranks (Megatron-core's expert_model_parallel_size; DeepSpeed-MoE's ep_size), their
  // gradients reduced over the dp / ep ranks that hold the same experts.
  int ep = 1;
  // The expert layers' TP degree (Megatron-core's expert_tensor_parallel_size; 0: tp). Simulated
  // as tp: a different value is read and warned about.
  int etp = 0;
  CpCommType cp_comm_type = CpCommType::P2p;
  // Megatron-core's hierarchical_context_parallel_sizes: [a2a, p2p] degrees whose product is cp,
  // the a2a level consecutive CP ranks (parallel_state.py create_hierarchical_groups); empty when
  // not given.
  std::vector<int> hierarchical_cp_sizes;
  // The ranks each CP all-to-all spans: cp with a2a, the first level with a2a+p2p, else none.
  int cp_a2a_degree() const {
    if (cp_comm_type == CpCommType::A2a) return cp;
    return cp_comm_type == CpCommType::A2aP2p && hierarchical_cp_sizes.size() == 2
               ? hierarchical_cp_sizes[0]
               : 1;
  }
  // The ranks that hold the same model shard: Megatron's data-parallel group with context
  // parallelism. Gradients are reduced, and ZeRO partitions, over these dp x cp ranks; cp
  // consecutive ones share each sample (cp is inner to dp in Megatron's rank order).
  int dp_cp() const { return dp * cp; }
  int virtual_stages = 1;
  // Megatron-core's uneven pipeline split (sim/scenario/pipeline_split.h): the layers of the
  // first and the last pipeline stage (0: an even share), or the embedding and the loss counted
  // as a layer each on the first and the last virtual stage.
  std::int64_t first_stage_layers = 0, last_stage_layers = 0;
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // Or Megatron-core's explicit layout (pipeline_model_parallel_layout), in its string form:
  // virtual stages separated by '|', E the embedding, t a decoder layer, L the loss; "" = none.
  std::string pipeline_layout;
  PipelineSchedule pipeline_schedule = PipelineSchedule::OneFOneB;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::None;
  // With recompute full under DeepSpeed's activation checkpointing (cpu_checkpointing,
  // Megatron-DeepSpeed --checkpoint-in-cpu): each layer's checkpointed input is copied to the host
  // in the forward and back before the layer is recomputed.
  bool cpu_checkpointing = false;
  // With recompute full under DeepSpeed's activation checkpointing (partition_activations,
  // Megatron-DeepSpeed --partition-activations): each TP rank keeps 1/tp of a layer's checkpoint
  // and the backward all-gathers it over the TP group before recomputing the layer.
  bool partition_activations = false;
  // With recompute selective: Megatron-core's --recompute-modules (core_attn alone by default).
  RecomputeModules recompute_modules;
  // Megatron-core --activation-func-fp8-input-store: the SwiGLU's saved input in FP8.
  bool activation_func_fp8_input_store = false;
  Framework framework = Framework::DeepSpeed;
  bool overlap_grad_reduce = false;   // Megatron --overlap-grad-reduce
  bool overlap_param_gather = false;  // Megatron --overlap-param-gather
  // Megatron --tp-comm-overlap (Transformer Engine's userbuffers): the attention and MLP blocks'
  // TP all-gathers and reduce-scatters pipelined with their GEMMs, run beside the block.
  bool tp_comm_overlap = false;
  // The column-parallel linear at the input of an attention or MLP block reduces its input
  // gradient (all-reduce, or reduce-scatter under sequence parallelism) asynchronously, beside
  // its weight-gradient GEMM (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication,
  // Transformer Engine's Linear and LayerNormLinear, nanotron's _ColumnLinearAsyncCommunication).
  bool tp_linear_async_communication = false;
  // Each TP rank sends 1 / tp of the activation (or gradient) between pipeline stages and the
  // receiver all-gathers it over TP: Megatron-LM's scatter_gather_tensors_in_pipeline (on by
  // default from 2021-02 until the pipeline moved into Megatron-core, 2023-03; not used under
  // sequence parallelism, whose tensors are already split) and DeepSpeed's PipelineEngine
  // (pipe_partitioned, grad_partitioned).
  bool scatter_gather_tensors_in_pipeline = false;
  // Megatron-core's overlap_p2p_comm (interleaved schedule): each pass's pipeline receive is
  // posted with the send after the previous pass of its direction, so the transfer runs under the
  // other direction's compute (schedules.py forward_backward_pipelining_with_interleaving).
  bool overlap_p2p_comm = false;
  // Megatron-core --overlap-moe-expert-parallel-comm: the combined 1F1B schedule, each
  // steady-state forward run beside the next backward so that their MoE all-to-alls hide behind
  // each other's compute (sim/parallel/schedules.h, passes.cpp combined_pass).
  bool overlap_moe_expert_parallel_comm = false;
  // Megatron-core --delay-wgrad-compute (with the above): each layer block's weight gradient runs
  // after its input gradient, so the next all-to-all waits for the input gradient alone.
  bool delay_wgrad_compute = false;
  // Megatron-core's moe_token_dispatcher_type, and the flex dispatcher's wire dtypes.
  MoeDispatcher moe_token_dispatcher_type = MoeDispatcher::AllToAll;
  // Megatron-core --moe-permute-fusion: Transformer Engine's fused permute and unpermute kernels
  // (the host's op count of the MoE block; their HBM traffic is the unfused permutation's).
  bool moe_permute_fusion = false;
  WireDtype moe_dispatch_fwd_dtype = WireDtype::Bf16;
  WireDtype moe_combine_bwd_dtype = WireDtype::Bf16;
  // Megatron's main_grad buffer and its reduction in fp32 (DDP config grad_reduce_in_fp32;
  // Megatron-LM turns it on for bf16 unless --grad-reduce-in-bf16), else in the 16-bit dtype.
  bool grad_reduce_in_fp32 = false;
  // Megatron-core's DDP bucket_size (--ddp-bucket-size), parameters per gradient bucket; 0:
  // Megatron-core's default, max(40M, 1M x the data-parallel size).
  std::int64_t ddp_bucket_size = 0;
};

// Which DeepSpeed stage 3 (zero.stage3_implementation): the module-hook coordinator as 0.6.6 and
// later run it (0.6.4 and 0.6.5 with it), the same in 0.6.0-0.6.3 (whose prefetch counts the
// parameters it finds already gathered toward the bucket), or the 2021 per-tensor gathers.
enum class Stage3Implementation : std::uint8_t { Coalesced, CoalescedV060, PerParameter };

// DeepSpeed's zero_optimization section, with DeepSpeed's names and units (bucket sizes and
// thresholds are element counts, as in DeepSpeed).
struct ZeroConfig {
  int stage = 0;
  std::int64_t reduce_bucket_size = 500'000'000;
  std::int64_t allgather_bucket_size = 500'000'000;
  bool overlap_comm = false;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  bool use_multi_rank_bucket_allreduce = true;  // stages 1/2: all-reduce whole buckets
  std::int64_t stage3_prefetch_bucket_size = 50'000'000;
  std::int64_t stage3_max_live_parameters = 1'000'000'000;
  std::int64_t stage3_max_reuse_distance = 1'000'000'000;
  std::int64_t stage3_param_persistence_threshold = 100'000;
  OffloadDevice offload_optimizer = OffloadDevice::None;
  OffloadDevice offload_param = OffloadDevice::None;
  bool delayed_param_update = false;  // ZeRO-Offload DPU
  Stage3Implementation stage3_implementation = Stage3Implementation::Coalesced;
  bool per_parameter_stage3() const {  // DeepSpeed 0.3.13-0.5 stage 3 (2021)
    return stage3_implementation == Stage3Implementation::PerParameter;
  }
  // ZeRO++ (Wang et al. 2023): quantized weights, hierarchical partitioning, quantized gradients.
  bool quantized_weights = false;
  int hpz_partition_size = 1;
  bool quantized_gradients = false;
  int mics_shard_size = -1;  // MiCS / FSDP HYBRID_SHARD shard group size; -1: whole DP group
  CommDtype communication_dtype = CommDtype::Default;
  // What DeepSpeed's engine reduces gradients in instead when sequence parallelism is on.
  CommDtype seq_parallel_communication_dtype = CommDtype::Fp32;
};

// Constants fitted on measurements (sim/fitted/fitted_constants.h), exposed so that a run or the
// refit can change them.
struct FittedConfig {
  double gemm_sustained = 0;       // share of the GPU's MAMF rate a training step sustains
  double nccl_launch_overhead = 0;  // seconds per un-graphed NCCL call
  double layer_host_op_time = 0;    // host seconds per counted op of a layer-block pass
};

struct SimConfig {
  NetworkModel network = NetworkModel::Flow;
  bool layer_granularity = true;
  bool allow_oom = false;  // simulate a step that does not fit (the report says so)
  bool folded = true;      // one data-parallel replica stands for all (exact without contention)
  double adam_params_per_s = 0;  // measured optimizer rate (calibration); 0 = from HBM bandwidth
};

// What-if modifiers: a slower GPU at given ranks, degraded NICs on given nodes. Either turns
// folding off (the replicas are no longer alike).
struct WhatIf {
  std::vector<int> slow_ranks;     // cluster ranks
  double slowdown = 1.0;           // their compute takes this much longer
  std::vector<int> degraded_nodes;
  double nic_bandwidth_factor = 1.0;
  // A second job sharing the fabric (flow network only).
  enum class Placement { Interleaved, After };
  enum class Pattern { Ring, AllToAll };
  int background_nodes = 0;
  Placement background_placement = Placement::Interleaved;
  Pattern background_pattern = Pattern::Ring;
  double background_load = 1.0;
};

inline constexpr EnumName<WhatIf::Placement> kPlacementNames[] = {
    {WhatIf::Placement::Interleaved, "interleaved"}, {WhatIf::Placement::After, "after"}};
inline constexpr EnumName<WhatIf::Pattern> kPatternNames[] = {
    {WhatIf::Pattern::Ring, "ring"}, {WhatIf::Pattern::AllToAll, "all-to-all"}};

struct Scenario {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingConfig training;
  ParallelConfig parallel;
  ZeroConfig zero;
  SimConfig sim;
  WhatIf whatif;
  FittedConfig fitted;
  nlohmann::json resolved;  // the full document, defaults included
  std::vector<InputWarning> warnings;  // in the order they were found

  int num_gpus() const { return cluster.num_gpus(); }
  // The ranks of the dp x cp group one node holds (ZeRO++ qgZ's first all-to-all stays inside
  // it): cp is inner to dp, tp inner to both.
  int dp_ranks_per_node() const {
    return std::min(parallel.dp_cp(), std::max(1, cluster.gpus_per_node / parallel.tp));
  }
  std::int64_t tokens_per_step() const { return training.global_batch_size * model.seq_length; }
  // The tokens of one micro-batch a rank holds: s / cp of each sequence with context parallelism.
  double micro_batch_tokens() const {
    return static_cast<double>(training.micro_batch_size) * model.seq_length /
           static_cast<double>(parallel.cp);
  }
  // ZB-V: the zero-bubble schedule with two chunks per stage, placed V-shaped.
  bool zero_bubble_v() const {
    return parallel.pp > 1 && parallel.pipeline_schedule == PipelineSchedule::ZeroBubble &&
           parallel.virtual_stages == 2;
  }
  // DeepSeek's DualPipe library (dualpipe.py, dualpipev.py), whose own rules apply: any layer
  // split, at least 2 pp micro-batches, gradients reduced after the step.
  bool dualpipe_library() const {
    return parallel.pp > 1 && (parallel.pipeline_schedule == PipelineSchedule::DualPipe ||
                               parallel.pipeline_schedule == PipelineSchedule::DualPipeV);
  }
  // V-shaped placements (DualPipe's, DualPipeV's, ZB-V's): each stage's second chunk runs from
  // the last stage back to the first, so the first stage holds both ends of the model (and,
  // with DualPipe's two copies, so does the last).
  bool second_chunk_returns() const { return dualpipe_library() || zero_bubble_v(); }
  // DualPipe proper: two copies of the model, whose gradients are summed before the step.
  bool two_model_copies() const {
    return parallel.pp > 1 && parallel.pipeline_schedule == PipelineSchedule::DualPipe;
  }
  // Whether the linears keep their inputs for backward in FP8: Transformer Engine's, which
  // Megatron-core uses for FP8 training (torchao's Float8Linear, torchtitan's, keeps them in
  // 16 bits: it saves the high-precision input and casts again in backward).
  bool fp8_linear_inputs_saved() const {
    return training.precision == Precision::Fp8 && parallel.framework == Framework::Megatron;
  }
  // Bytes per parameter of the optimizer's state: fp32 master weights and Adam's two moments,
  // 12 (ZeRO, section 5), or what Megatron-core's precision-aware optimizer keeps. Its master
  // weights are Transformer Engine's to keep (megatron/core/optimizer/__init__.py at d98e8a6:
  // master_weights with master_weight_dtype when main_params_dtype is not fp32 or the fp8 recipe
  // is delayed or there is none, else Megatron-core's own fp32 copy) and then, with bf16
  // weights, stored as the 16 bits the weight does not hold (distrib_optimizer.py: an int16
  // master_param shard under store_param_remainders and bf16).
  std::int64_t optimizer_state_bytes_per_param() const {
    if (!training.precision_aware_optimizer) return kAdamStateBytes;
    const bool te_masters = training.main_params_dtype != StateDtype::Fp32 ||
                            training.precision != Precision::Fp8 ||
                            training.fp8_recipe == Fp8Recipe::Delayed;
    const bool bf16_weights = sixteen_bit(training.precision) == Precision::Bf16;
    const int master = te_masters && training.store_param_remainders && bf16_weights
                           ? 2
                           : bytes_of(training.main_params_dtype);
    return master + bytes_of(training.exp_avg_dtype) + bytes_of(training.exp_avg_sq_dtype);
  }
  // Megatron's --fp8-param-gather with the distributed optimizer: the layers' weights are FP8
  // parameters (Transformer Engine keeps no 16-bit copy) and the updated ones are all-gathered
  // in FP8 (under ZeRO-3 / FSDP, Zero3Params gathers them in FP8 instead).
  bool fp8_params_gathered_after_step() const {
    return training.fp8_param_gather && zero.stage < 3;
  }
  // A dense attention or MLP block's backward split at the column-parallel linear that opens
  // the block: its input gradient's all-reduce (reduce-scatter under sequence parallelism) runs
  // beside its weight-gradient GEMM (parallel.tp_linear_async_communication), unless Transformer
  // Engine's userbuffers run all the block's collectives beside it (tp_comm_overlap).
  bool async_tp_input_gradient() const {
    return parallel.tp > 1 && parallel.tp_linear_async_communication && !parallel.tp_comm_overlap;
  }
  // Pipeline stages exchange tensors every TP rank holds whole (no sequence parallelism): what
  // scatter_gather_tensors_in_pipeline may split.
  bool pipeline_tensors_whole_over_tp() const {
    return parallel.tp > 1 && parallel.pp > 1 && !parallel.sequence_parallel;
  }
  // The pipeline's p2p tensors go split over TP and are all-gathered after the receive.
  bool splits_pipeline_tensors_over_tp() const {
    return pipeline_tensors_whole_over_tp() && parallel.scatter_gather_tensors_in_pipeline;
  }
  // That linear saved its sequence-parallel input shard and gathers it again over TP for its
  // weight gradient (Megatron-core's and Transformer Engine's linears, nanotron's with its default
  // tp_recompute_allgather); torchtitan's saves the gathered input.
  bool regathers_tp_input() const {
    return parallel.tp > 1 && parallel.sequence_parallel &&
           (parallel.framework == Framework::Megatron || parallel.framework == Framework::Nanotron);
  }
  // torchtitan's op-level checkpointing replays each checkpointed block's forward in its
  // backward and returns the saved ops' outputs; the sequence-parallel all-gather of a block's
  // input is not one of them (the policy saves matmuls, attention and reduce-scatters:
  // models/llama3/parallelize_llama.py _save_list at 820504e2, 2025-06), so the backward gathers
  // the input again, for the replayed matmuls and the weight gradients. The head is not
  // checkpointed.
  bool op_checkpoint_regathers_tp_input() const {
    return parallel.tp > 1 && parallel.sequence_parallel &&
           parallel.recompute == Recompute::SelectiveOp;
  }
  // Full recomputation replays each layer's forward, block after block, before the layer's
  // backward. The plan emits that replay as ops of its own where its order changes the schedule:
  // under DeepSpeed's stage 3 (>= 0.6), whose module hooks fetch the parameters again for the
  // replay (the replay's modules are uses in the coordinator's trace). Elsewhere each block's
  // backward op includes its own replay, the same time.
  bool replays_layers_before_backward() const {
    return parallel.recompute == Recompute::Full && zero.stage == 3 &&
           parallel.framework == Framework::DeepSpeed && !zero.per_parameter_stage3();
  }
  // Where ZB-H1 and ZB-V run: the zero-bubble Megatron-LM fork, with DDP or the distributed
  // optimizer.
  bool zero_bubble_runs() const {
    return parallel.framework == Framework::Megatron && zero.stage <= 1;
  }
  // DeepSpeed's sequence parallelism (Ulysses, DistributedAttention): context parallelism under
  // DeepSpeed, which exchanges by all-to-all and reduces gradients in
  // seq_parallel_communication_data_type.
  bool deepspeed_ulysses() const {
    return parallel.framework == Framework::DeepSpeed && parallel.cp > 1;
  }
  // Megatron-core's MoE parallel folding with expert TP 1 (parallel.etp 1 under tp > 1, ep a
  // multiple of tp): each expert-parallel group is ep consecutive ranks of the stage's tp x dp
  // grid, i.e. whole TP groups of ep / tp consecutive DP indices, and the experts are not split
  // by TP. Otherwise the groups are ep consecutive DP indices of one TP rank and the experts are
  // split as the dense layers are.
  bool experts_span_tp() const {
    return model.is_moe() && parallel.ep > 1 && parallel.tp > 1 && parallel.etp == 1 &&
           parallel.ep % parallel.tp == 0;
  }
  // The DP indices one expert-parallel group spans; the expert-data-parallel group's size (the
  // ranks holding the same experts, over which their gradients are reduced); the TP split of the
  // expert layers.
  int ep_dp_span() const { return experts_span_tp() ? parallel.ep / parallel.tp : parallel.ep; }
  int expert_dp() const { return parallel.dp_cp() / ep_dp_span(); }
  int expert_tp() const { return experts_span_tp() ? 1 : parallel.tp; }
};

// A scenario document on its way to resolve_scenario, with what was found while it was merged.
struct ScenarioDocument {
  nlohmann::json doc = nlohmann::json::object();
  std::vector<InputWarning> warnings;
  // Scenario keys the user wrote under another name (a ds_config key), so that what resolution
  // finds about them names the user's key: "zero.reduce_bucket_size" ->
  // "deepspeed(ds.json).zero_optimization.reduce_bucket_size".
  std::map<std::string, std::string> origin;
  // Keys a framework config left "auto", filled from the scenario: scenario key -> user's key.
  // Resolution says what each became.
  std::map<std::string, std::string> filled_from_scenario;
  // Values a framework config implies for keys the scenario may give itself (DeepSpeed's
  // activation_checkpointing implies full recomputation): used, and reported, only when the
  // final document leaves the key out.
  struct Implied {
    nlohmann::json value;
    std::string user_key, message;
  };
  std::map<std::string, Implied> implied;

  void warn(std::string key_path, std::string message) {
    warnings.push_back({std::move(key_path), std::move(message)});
  }
};

// The built-in default scenario of `zerosim simulate` with no inputs.
nlohmann::json default_scenario_document();

// Reads a JSON file; InputError naming `key_path` (or the file) when missing or malformed.
nlohmann::json read_json_file(const std::string& path, const std::string& key_path);

// Applies "a.b=v" to the document, parsing v by the key's declared type.
void apply_setting(nlohmann::json& doc, const std::string& assignment);

// Merges a DeepSpeed config into the document as DeepSpeed reads it (batch keys with DeepSpeed's
// rule for the missing one, fp16/bf16, zero_optimization, "auto" values resolved as the Hugging
// Face integration does).
void apply_deepspeed_config(ScenarioDocument& doc, const nlohmann::json& ds_config,
                            const std::string& origin);

// Measured rates from `zerosim-validate bench` (format "zerosim-calibration/1") as scenario
// keys: the best GEMM of the training precision as cluster.gpu.gemm_efficiency, the HBM copy
// rate as cluster.gpu.hbm_efficiency, the Adam kernel as sim.adam_params_per_s.
void apply_calibration(ScenarioDocument& doc, const nlohmann::json& calibration,
                       const std::string& origin);

// Everything a command line says about the scenario, merged by scenario_document() in the
// resolution order above.
struct ScenarioInputs {
  std::string scenario_file, deepspeed_file, calibration_file;
  // Shortcut flags as given (flag name without dashes, value), e.g. {"zero", "3"}; the flags
  // are declared in the binding table (scenario_flags()).
  std::vector<std::pair<std::string, std::string>> flags;
  std::vector<std::string> sets;  // --set KEY=VALUE, applied last, in order
};
ScenarioDocument scenario_document(const ScenarioInputs& in);

// The scenario document of one case of a "zerosim-published-cases/1" file; InputError naming
// "<key_path>.<key>" for a malformed case. Published runs did fit, so the document asks to
// simulate even where the memory model disagrees (sim.allow_oom).
nlohmann::json case_scenario(const nlohmann::json& c, const std::string& key_path);

// Checks every key and every cross-key constraint; throws InputError naming the key path. The
// scenario carries the document's warnings and its own (an "auto" resolved, ...), each named by
// where the user wrote the key (ScenarioDocument::origin).
Scenario resolve_scenario(const ScenarioDocument& doc);
Scenario resolve_scenario(const nlohmann::json& doc);

}  // namespace zerosim
