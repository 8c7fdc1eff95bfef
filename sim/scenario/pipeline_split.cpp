#include "sim/scenario/pipeline_split.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "sim/core/error.h"

namespace zerosim {

namespace {

constexpr const char* kFirstKey = "parallel.num_layers_in_first_pipeline_stage";
constexpr const char* kLastKey = "parallel.num_layers_in_last_pipeline_stage";
constexpr const char* kEmbeddingKey = "parallel.account_for_embedding_in_pipeline_split";
constexpr const char* kLossKey = "parallel.account_for_loss_in_pipeline_split";

constexpr const char* kLayoutKey = "parallel.pipeline_model_parallel_layout";

std::string str(std::int64_t v) { return std::to_string(v); }

// Unrolls "*n" repeats the way Megatron-core's parse_str_to_list does: first every "(x)*n" whose
// x holds no ')' (left to right, replaced text not rescanned), then every "c*n" of one character.
std::string unroll(const std::string& in, bool parenthesised) {
  std::string out;
  std::size_t i = 0;
  while (i < in.size()) {
    std::size_t body_begin = i, body_end = i + 1;  // the repeated text [body_begin, body_end)
    std::size_t star = i + 1;
    if (parenthesised) {
      const std::size_t close = in[i] == '(' ? in.find(')', i + 1) : std::string::npos;
      if (close == std::string::npos || close == i + 1) {
        out += in[i++];
        continue;
      }
      body_begin = i + 1;
      body_end = close;
      star = close + 1;
    }
    std::size_t digits = star + 1;
    while (digits < in.size() && std::isdigit(static_cast<unsigned char>(in[digits]))) ++digits;
    if (star >= in.size() || in[star] != '*' || digits == star + 1) {
      out += in[i++];
      continue;
    }
    const std::string count = in.substr(star + 1, digits - star - 1);
    if (count.size() > 6) throw InputError(kLayoutKey, "repeat count " + count + " is too large");
    const std::string body = in.substr(body_begin, body_end - body_begin);
    const std::size_t n = static_cast<std::size_t>(std::stoi(count));
    if (out.size() + body.size() * n > (std::size_t{1} << 24))
      throw InputError(kLayoutKey, "unrolls to too long a layout (more than 2^24 characters)");
    for (std::size_t k = 0; k < n; ++k) out += body;
    i = digits;
  }
  return out;
}

// The layout's virtual stages, each a string of layer characters (E, t, m, L).
std::vector<std::string> layout_stages(const std::string& layout) {
  std::string text;
  for (char c : layout)
    if (c != ',') text += c;  // Megatron-core drops commas (cosmetic)
  text = unroll(unroll(text, true), false);
  std::vector<std::string> stages(1);
  for (char c : text) {
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L') {
      stages.back() += c;
    } else {
      throw InputError(kLayoutKey, std::string("unknown layer character '") + c +
                                       "'; allowed: E (embedding), t (decoder layer), m (MTP), "
                                       "L (loss), | between virtual stages, (..)*n and x*n");
    }
  }
  return stages;
}

// The layout's virtual stages, as many as pp divides.
std::vector<std::string> layout_stages(const ParallelConfig& p) {
  std::vector<std::string> stages = layout_stages(p.pipeline_layout);
  if (stages.size() % static_cast<std::size_t>(p.pp) != 0) {
    throw InputError(kLayoutKey, "has " + str(static_cast<std::int64_t>(stages.size())) +
                                     " virtual stages, which parallel.pp (" + str(p.pp) +
                                     ") does not divide");
  }
  return stages;
}

// Megatron-core's validate_layer_layout, less what zerosim cannot run: MTP layers on a stage
// before the loss's, and an embedding or a loss off the first or the last virtual stage
// (zerosim keeps them there).
std::vector<std::int64_t> layout_split(const Scenario& s) {
  const std::vector<std::string> stages = layout_stages(s.parallel);
  std::string flat;
  for (const std::string& st : stages) flat += st;
  auto count = [&](char c) { return std::count(flat.begin(), flat.end(), c); };
  if (flat.empty() || flat.front() != 'E' || count('E') != 1)
    throw InputError(kLayoutKey, "must start with the embedding (E), and hold it once");
  if (flat.back() != 'L' || count('L') != 1)
    throw InputError(kLayoutKey, "must end with the loss (L), and hold it once");
  if (stages.front().empty() || stages.back().empty()) {
    throw InputError(kLayoutKey, "puts the embedding or the loss off the first or the last "
                                 "virtual stage (after an empty one), which is not simulated yet");
  }
  const std::int64_t mtp = s.model.mtp_num_layers;
  if (count('m') != mtp) {
    throw InputError(kLayoutKey, "holds " + str(count('m')) +
                                     " multi-token-prediction layers (m); model.mtp_num_layers is " +
                                     str(mtp) + " (Megatron-core's rule)");
  }
  if (mtp > 0) {
    if (flat.find('t', flat.find('m')) != std::string::npos)
      throw InputError(kLayoutKey, "puts a decoder layer (t) after an MTP layer (m); Megatron-core "
                                   "places the decoder layers first");
    const std::size_t pp = static_cast<std::size_t>(s.parallel.pp);
    for (std::size_t g = 0; g < stages.size(); ++g) {
      const auto here = std::count(stages[g].begin(), stages[g].end(), 'm');
      if (here == 0) continue;
      if (g / pp + 1 != stages.size() / pp || here != mtp)
        throw InputError(kLayoutKey, "must hold all MTP layers (m) in one virtual stage, the last "
                                     "chunk of its pipeline stage (Megatron-core's rule)");
      // Megatron-core's "standalone" MTP: a stage of its own before the loss's, whose hidden
      // states and MTP outputs both travel to the last stage.
      if (g + 1 != stages.size())
        throw InputError(kLayoutKey, "puts the MTP layers (m) on a pipeline stage before the "
                                     "loss's (Megatron-core's standalone MTP), which is not "
                                     "simulated yet; allowed: m in the last virtual stage");
    }
  }
  if (count('t') != s.model.num_layers) {
    throw InputError(kLayoutKey, "holds " + str(count('t')) + " decoder layers (t); model.num_layers is " +
                                     str(s.model.num_layers));
  }
  std::vector<std::int64_t> out;
  for (const std::string& st : stages) out.push_back(std::count(st.begin(), st.end(), 't'));
  return out;
}

// The key the user set first among the uneven-split keys (for an error that names one).
const char* uneven_key(const ParallelConfig& p) {
  if (!p.pipeline_layout.empty()) return kLayoutKey;
  if (p.first_stage_layers > 0) return kFirstKey;
  if (p.last_stage_layers > 0) return kLastKey;
  if (p.account_for_embedding_in_pipeline_split) return kEmbeddingKey;
  return kLossKey;
}

bool uneven_split(const ParallelConfig& p) {
  return p.first_stage_layers > 0 || p.last_stage_layers > 0 ||
         p.account_for_embedding_in_pipeline_split || p.account_for_loss_in_pipeline_split ||
         !p.pipeline_layout.empty();
}

// --decoder-first/last-pipeline-num-layers: the given stages hold their count, the middle
// stages share the rest evenly; every stage's count splits evenly over its virtual stages.
std::vector<std::int64_t> first_last_split(const ParallelConfig& p, std::int64_t layers) {
  const int vp = p.virtual_stages;
  std::int64_t middle = layers;
  int middle_stages = p.pp;
  for (auto [key, count] : {std::pair{kFirstKey, p.first_stage_layers},
                            std::pair{kLastKey, p.last_stage_layers}}) {
    if (count == 0) continue;
    if (count % vp != 0) {
      throw InputError(key, "must be divisible by parallel.virtual_stages (" + str(vp) + "), got " +
                                str(count) + " (Megatron-core's rule)");
    }
    middle -= count;
    --middle_stages;
  }
  if (middle < 0) {
    throw InputError(uneven_key(p), "the first and last stages' layers exceed model.num_layers (" +
                                        str(layers) + ")");
  }
  if ((middle > 0) != (middle_stages > 0)) {
    throw InputError(uneven_key(p),
                     "leaves " + str(middle) + " layers for " + str(middle_stages) +
                         " middle pipeline stages; Megatron-core needs both or neither");
  }
  if (middle_stages > 0 && middle % middle_stages != 0) {
    throw InputError(uneven_key(p), "leaves " + str(middle) + " layers, which the " +
                                        str(middle_stages) +
                                        " middle pipeline stages do not divide (Megatron-core's rule)");
  }
  const std::int64_t per_middle = middle_stages > 0 ? middle / middle_stages : 0;
  if (per_middle % vp != 0) {
    throw InputError(uneven_key(p), "leaves " + str(per_middle) +
                                        " layers per middle pipeline stage, which "
                                        "parallel.virtual_stages (" +
                                        str(vp) + ") does not divide (Megatron-core's rule)");
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(p.pp) * vp);
  for (int stage = 0; stage < p.pp; ++stage) {
    std::int64_t n = per_middle;
    if (stage == 0 && p.first_stage_layers > 0) n = p.first_stage_layers;
    if (stage == p.pp - 1 && p.last_stage_layers > 0) n = p.last_stage_layers;
    for (int chunk = 0; chunk < vp; ++chunk) out[static_cast<std::size_t>(chunk) * p.pp + stage] = n / vp;
  }
  return out;
}

// --account-for-embedding/loss-in-pipeline-split: the embedding and the loss each take a layer's
// place on the first and the last virtual stage.
std::vector<std::int64_t> accounted_split(const ParallelConfig& p, std::int64_t layers) {
  const int vp = p.virtual_stages;
  const std::int64_t counted = layers + (p.account_for_embedding_in_pipeline_split ? 1 : 0) +
                               (p.account_for_loss_in_pipeline_split ? 1 : 0);
  if (counted % p.pp != 0) {
    throw InputError("parallel.pp", "must divide model.num_layers (" + str(layers) +
                                        ") with the embedding and loss counted as layers (" +
                                        str(counted) + "), got " + str(p.pp) +
                                        " (Megatron-core's rule)");
  }
  if ((counted / p.pp) % vp != 0) {
    throw InputError("parallel.virtual_stages",
                     "must divide the " + str(counted / p.pp) +
                         " layers per pipeline stage (the embedding and loss counted as layers), "
                         "got " + str(vp) + " (Megatron-core's rule)");
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(p.pp) * vp, counted / p.pp / vp);
  if (p.account_for_embedding_in_pipeline_split) --out.front();
  if (p.account_for_loss_in_pipeline_split) --out.back();
  return out;
}

}  // namespace

std::vector<std::int64_t> virtual_stage_layers(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const std::int64_t layers = s.model.num_layers;
  if (uneven_split(p)) {
    if (p.framework != Framework::Megatron) {
      throw InputError(uneven_key(p), "is Megatron-core's pipeline split; allowed with "
                                      "parallel.framework megatron (got another framework)");
    }
    if (p.pp == 1) {
      throw InputError(uneven_key(p), "splits layers over pipeline stages; needs parallel.pp > 1");
    }
    if (s.zero_bubble_v()) {
      throw InputError(uneven_key(p), "is Megatron-core's pipeline split for its own schedules; "
                                      "the zero-bubble fork's ZB-V splits the layers evenly over "
                                      "its 2 x pp chunks: not simulated with it");
    }
    const bool first_last = p.first_stage_layers > 0 || p.last_stage_layers > 0;
    const bool accounted =
        p.account_for_embedding_in_pipeline_split || p.account_for_loss_in_pipeline_split;
    if (!p.pipeline_layout.empty()) {
      if (first_last || accounted) {
        throw InputError(kLayoutKey, "cannot be combined with the other pipeline split keys "
                                     "(Megatron-core refuses it)");
      }
      return layout_split(s);
    }
    if (first_last && accounted) {
      throw InputError(uneven_key(p),
                       "cannot be combined with parallel.account_for_embedding_in_pipeline_split "
                       "or parallel.account_for_loss_in_pipeline_split (Megatron-core refuses "
                       "both together)");
    }
    return first_last ? first_last_split(p, layers) : accounted_split(p, layers);
  }
  const std::int64_t virtual_stages = std::int64_t{p.pp} * p.virtual_stages;
  // DualPipe leaves the split to its user: it takes any (resolve.cpp warns). ZB-V splits as
  // Megatron does (the fork's README: an even number of layers per pipeline stage).
  if (p.virtual_stages > 1 && layers % virtual_stages != 0 && !s.dualpipe_library()) {
    throw InputError("parallel.virtual_stages",
                     "model.num_layers (" + str(layers) +
                         ") must be divisible by pp x virtual_stages = " + str(virtual_stages) +
                         " (Megatron's rule; parallel.num_layers_in_first_pipeline_stage and "
                         "the other uneven-split keys say otherwise)");
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(virtual_stages));
  for (std::int64_t g = 0; g < virtual_stages; ++g)
    out[static_cast<std::size_t>(g)] = layers / virtual_stages + (g < layers % virtual_stages ? 1 : 0);
  return out;
}

int pipeline_layout_virtual_stages(const Scenario& s) {
  return static_cast<int>(layout_stages(s.parallel).size()) / s.parallel.pp;
}

bool megatron_would_refuse_split(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  return p.framework == Framework::Megatron && !uneven_split(p) && p.pp > 1 &&
         !s.second_chunk_returns() && s.model.num_layers % p.pp != 0;
}

}  // namespace zerosim
