#include "sim/parallel/layout.h"

#include <algorithm>

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

std::vector<std::vector<Unit>> virtual_stage_units(const Scenario& s) {
  const ParallelConfig& par = s.parallel;
  const ModelSpec& m = s.model;
  const ParamCounts pc = count_params(m);
  const std::int64_t tp = par.tp;
  auto shard = [&](std::int64_t total, std::int64_t replicated) {
    return ceil_div(total - replicated, tp) + replicated;
  };
  // Megatron replicates over TP what it does not split: norms, the biases of row-parallel
  // linears (attention output, MLP down) and the learned position table.
  const std::int64_t attention_row_bias = m.attention_output_bias ? m.hidden_size : 0;
  const std::int64_t mlp_row_bias = m.mlp_bias ? m.hidden_size : 0;
  const std::int64_t position_table =
      m.position == PositionKind::Learned ? m.max_position_embeddings * m.hidden_size : 0;
  const std::int64_t embedding_norm = pc.embedding - m.vocab_size * m.hidden_size - position_table;
  const int virtual_stages = par.pp * par.virtual_stages;
  std::vector<std::vector<Unit>> per_virtual(virtual_stages);
  // Tensor counts: fused QKV and the attention output (Megatron's and GPT-2's layout); two MLP
  // weights, three when gated; a bias per linear where the model has them; LayerNorm has a
  // weight and a bias, RMSNorm a weight; the block's norms split as count_params splits them.
  const int norm_tensors = m.norm == NormKind::LayerNorm ? 2 : 1;
  const int mlp_weights = m.mlp == MlpKind::Swiglu || m.mlp == MlpKind::Geglu ? 3 : 2;
  const int attention_small = (m.qkv_bias ? 1 : 0) + (m.attention_output_bias ? 1 : 0) +
                              static_cast<int>((m.layer_norms + 1) / 2) * norm_tensors;
  const int mlp_small =
      (m.mlp_bias ? mlp_weights : 0) + static_cast<int>(m.layer_norms / 2) * norm_tensors;
  // Each module's weight on this TP rank, as count_params counts them.
  const std::int64_t h = m.hidden_size, f = m.ffn_hidden_size, q = m.q_width();
  const std::int64_t kvw = m.num_kv_heads * m.head_dim();
  const std::vector<std::int64_t> attention_weights = {ceil_div(h * (q + 2 * kvw), tp),
                                                       ceil_div(q * h, tp)};
  const std::vector<std::int64_t> mlp_weights_each(mlp_weights, ceil_div(h * f, tp));
  std::vector<std::int64_t> embedding_weights = {ceil_div(m.vocab_size * h, tp)};
  if (position_table > 0) embedding_weights.push_back(position_table);
  per_virtual[0].push_back({WorkKind::EmbedForward, WorkKind::EmbedBackward, -1,
                            shard(pc.embedding, position_table + embedding_norm), "embedding",
                            position_table > 0 ? 2 : 1, embedding_norm > 0 ? norm_tensors : 0,
                            embedding_weights});
  int layer = 0;
  for (int g = 0; g < virtual_stages; ++g) {
    int count = static_cast<int>(m.num_layers / virtual_stages) +
                (g < m.num_layers % virtual_stages ? 1 : 0);
    for (int i = 0; i < count; ++i, ++layer) {
      per_virtual[g].push_back({WorkKind::AttentionForward, WorkKind::AttentionBackward, layer,
                                shard(pc.attention_block, pc.attention_norm + attention_row_bias),
                                "attention", 2, attention_small, attention_weights});
      per_virtual[g].push_back({WorkKind::MlpForward, WorkKind::MlpBackward, layer,
                                shard(pc.mlp_block, pc.mlp_norm + mlp_row_bias), "mlp",
                                mlp_weights, mlp_small, mlp_weights_each});
    }
  }
  // With pipeline parallelism a tied embedding is held twice: the last stage keeps its own
  // copy for the output layer (Megatron's word-embedding copy on the last stage).
  std::int64_t head = shard(pc.output, 0) + pc.final_norm;
  const bool head_weight = !m.tied_embeddings || par.pp > 1;
  if (m.tied_embeddings && par.pp > 1) head += shard(m.vocab_size * m.hidden_size, 0);
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
  std::vector<std::vector<Unit>> chunks;
  for (int c = 0; c < s.parallel.virtual_stages; ++c) {
    chunks.push_back(per_virtual[c * s.parallel.pp + stage]);
  }
  return chunks;
}

}  // namespace zerosim::plan_detail
