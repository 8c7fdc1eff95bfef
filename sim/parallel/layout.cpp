#include "sim/parallel/layout.h"

#include <algorithm>

#include "sim/scenario/pipeline_split.h"

namespace zerosim::plan_detail {

std::string unit_op_name(const Unit& u, const char* pass) {
  return u.layer >= 0 ? std::string(pass) + " " + u.label + " L" + std::to_string(u.layer)
                      : std::string(pass) + " " + u.label;
}

std::int64_t small_tensor_elements(const Unit& u) {
  std::int64_t small = u.params;
  for (std::int64_t w : u.weights) small -= w;
  return std::max<std::int64_t>(0, small);
}

namespace {

// A layer block as one rank of its TP group holds it. Megatron replicates over TP what it does
// not split: the block's norms (and other small replicated tensors), the biases of row-parallel
// linears and the linears it does not split at all (the router, MLA's down-projections). The
// routed experts are split by expert_tp: tp, or 1 when the EP groups span TP (whole experts).
Unit block_unit(const Block& b, std::int64_t tp, std::int64_t expert_tp, WorkKind forward,
                WorkKind backward, const char* label) {
  Unit u{forward, backward, -1, 0, label, 0, b.replicated_tensors, {}};
  std::int64_t split = 0, replicated = b.replicated_params, experts = 0;
  for (const Linear& l : b.linears) {
    const bool whole = l.split == TpSplit::Replicated || (l.routed && expert_tp == 1);
    const std::int64_t weight = l.copies * l.in * l.out;
    const std::int64_t bias = l.bias ? l.copies * l.out : 0;
    (whole ? replicated : split) += weight;
    (whole || l.split == TpSplit::Row ? replicated : split) += bias;
    if (l.routed) experts += (whole ? weight : ceil_div(weight, tp)) + bias;
    // Each stored tensor is a module weight DeepSpeed's stage 3 fetches. The routed experts'
    // linears are one tensor each, all experts together (transformers >= 5 stores gate_up_proj
    // [E, 2I, H] and down_proj [E, H, I], as Megatron-core's grouped GEMM holds them), so an MoE
    // block is a handful of fetches rather than one per expert and matrix.
    const std::int64_t stored = l.routed ? 1 : l.copies * l.tensors;
    const std::int64_t tensor = l.copies * l.in * l.out / stored;
    for (std::int64_t c = 0; c < stored; ++c) u.weights.push_back(whole ? tensor : ceil_div(tensor, tp));
    if (l.bias) u.small_tensors += static_cast<int>(stored);
  }
  u.big_tensors = static_cast<int>(u.weights.size());
  u.params = ceil_div(split, tp) + replicated;
  u.expert_params = experts;
  return u;
}

}  // namespace

std::vector<std::vector<Unit>> virtual_stage_units(const Scenario& s) {
  const ParallelConfig& par = s.parallel;
  const ModelSpec& m = s.model;
  const ParamCounts pc = count_params(m);
  const std::int64_t tp = par.tp;
  auto shard = [&](std::int64_t total, std::int64_t replicated) {
    return ceil_div(total - replicated, tp) + replicated;
  };
  // Megatron replicates over TP the learned position table and the embedding's norm.
  const std::int64_t position_table =
      m.position == PositionKind::Learned ? m.max_position_embeddings * m.hidden_size : 0;
  const std::int64_t embedding_norm = pc.embedding - m.vocab_size * m.hidden_size - position_table;
  const int virtual_stages = par.pp * par.virtual_stages;
  std::vector<std::vector<Unit>> per_virtual(virtual_stages);
  const int norm_tensors = m.norm == NormKind::LayerNorm ? 2 : 1;
  const std::int64_t h = m.hidden_size;
  std::vector<std::int64_t> embedding_weights = {ceil_div(m.vocab_size * h, tp)};
  if (position_table > 0) embedding_weights.push_back(position_table);
  per_virtual[0].push_back({WorkKind::EmbedForward, WorkKind::EmbedBackward, -1,
                            shard(pc.embedding, position_table + embedding_norm), "embedding",
                            position_table > 0 ? 2 : 1, embedding_norm > 0 ? norm_tensors : 0,
                            embedding_weights});
  const Unit attention = block_unit(attention_block(m), tp, tp, WorkKind::AttentionForward,
                                    WorkKind::AttentionBackward, "attention");
  const Unit mlp =
      block_unit(mlp_block(m, false), tp, tp, WorkKind::MlpForward, WorkKind::MlpBackward, "mlp");
  // With expert parallelism a rank holds num_experts / ep of the routed experts.
  Block moe_block = m.is_moe() ? mlp_block(m, true) : Block{};
  for (Linear& l : moe_block.linears)
    if (l.routed) l.copies /= par.ep;
  const Unit moe = m.is_moe() ? block_unit(moe_block, tp, s.expert_tp(), WorkKind::MoeForward,
                                           WorkKind::MoeBackward, "moe")
                              : Unit{};
  const std::vector<std::int64_t> layers = virtual_stage_layers(s);
  int layer = 0;
  for (int g = 0; g < virtual_stages; ++g) {
    for (std::int64_t i = 0; i < layers[static_cast<std::size_t>(g)]; ++i, ++layer) {
      per_virtual[g].push_back(attention);
      per_virtual[g].push_back(m.is_moe_layer(layer) ? moe : mlp);
      per_virtual[g][per_virtual[g].size() - 2].layer = layer;
      per_virtual[g].back().layer = layer;
    }
  }
  // Multi-token prediction (Megatron-core): the MTP modules run on the loss's virtual stage
  // before the head, each its own unit (eh_proj, enorm, hnorm, final norm) and a transformer
  // layer numbered after the decoder's. They read the embedding there: an untied model's last
  // stage holds a copy of it (GPTModel builds the embedding where mtp_process is set; a tied
  // one's copy is the head's, below).
  // Whether the loss runs on another stage than the embedding (not with DualPipe's placements).
  const bool loss_apart = par.pp > 1 && !s.second_chunk_returns();
  const std::int64_t mtp_embedding =
      loss_apart && !m.tied_embeddings ? ceil_div(m.vocab_size * h, tp) : 0;
  for (std::int64_t i = 0; i < m.mtp_num_layers; ++i) {
    const std::int64_t copy = i == 0 ? mtp_embedding : 0;  // one copy, shared by the modules
    Unit proj{WorkKind::MtpForward, WorkKind::MtpBackward, static_cast<int>(m.num_layers + i),
              ceil_div(2 * h * h, tp) + 3 * pc.final_norm + copy, "mtp", copy > 0 ? 2 : 1,
              3 * norm_tensors, {ceil_div(2 * h * h, tp)}};
    if (copy > 0) proj.weights.push_back(copy);
    std::vector<Unit>& last = per_virtual[virtual_stages - 1];
    last.push_back(proj);
    last.push_back(attention);
    last.push_back(m.is_moe_layer(m.num_layers + i) ? moe : mlp);
    last[last.size() - 2].layer = last.back().layer = proj.layer;
  }
  // With pipeline parallelism a tied embedding is held twice: the last stage keeps its own
  // copy for the output layer (Megatron's word-embedding copy on the last stage).
  std::int64_t head = shard(pc.output, 0) + pc.final_norm;
  const bool head_weight = !m.tied_embeddings || loss_apart;
  if (m.tied_embeddings && loss_apart) head += shard(m.vocab_size * m.hidden_size, 0);
  std::vector<std::int64_t> head_weights;
  if (head_weight) head_weights.push_back(ceil_div(m.vocab_size * h, tp));
  per_virtual[virtual_stages - 1].push_back(
      {WorkKind::HeadForward, WorkKind::HeadBackward, -1, head, "head", head_weight ? 1 : 0,
       norm_tensors + (m.output_bias ? 1 : 0), head_weights});
  return per_virtual;
}

std::vector<std::vector<Unit>> stage_chunks(const Scenario& s,
                                            const std::vector<std::vector<Unit>>& per_virtual,
                                            int stage) {
  if (s.second_chunk_returns()) {
    // DualPipe: stage s and pp - 1 - s of the pp stages (the second of another copy); DualPipeV:
    // virtual stages s and 2 pp - 1 - s.
    return {per_virtual[static_cast<std::size_t>(stage)],
            per_virtual[per_virtual.size() - 1 - static_cast<std::size_t>(stage)]};
  }
  std::vector<std::vector<Unit>> chunks;
  for (int c = 0; c < s.parallel.virtual_stages; ++c) {
    chunks.push_back(per_virtual[c * s.parallel.pp + stage]);  // interleaved: c pp + stage
  }
  return chunks;
}

}  // namespace zerosim::plan_detail
