// The candidates `zerosim search` considers: its options checked and turned into the base
// scenario document, the constraints on tp and pp, and the layouts they allow (with the flag
// to blame when they allow none). Screening and ranking them is search.cpp.
#include "sim/explore/search_space.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {
using json = nlohmann::json;
using search_detail::DegreeFlag;
using search_detail::kDegreeFlags;

namespace {

// Keys the search sets on every candidate, and what to use instead of --set for them.
struct OwnedKey {
  const char* key;
  const char* instead;
};
constexpr OwnedKey kOwnedKeys[] = {
    {"model", "--model"},
    {"model.preset", "--model"},
    {"cluster", "--cluster and --nodes"},
    {"cluster.preset", "--cluster"},
    {"cluster.nodes", "--nodes"},
    {"cluster.num_gpus", "--nodes"},
    {"parallel.tp", "--tp N or --max-tp N"},
    {"parallel.pp", "--pp N or --max-pp N"},
    {"parallel.dp", "--tp and --pp (dp = GPUs / (tp x pp))"},
    {"parallel.virtual_stages", "nothing: the search tries 1 and 2"},
    {"parallel.recompute", "nothing: the search tries none, selective and full"},
    {"zero.stage", "--zero-stages"},
    {"training.micro_batch_size", "nothing: the search tries 1, 2, 4 and 8"},
    {"training.global_batch_size", "--gbs"},
    {"training.gradient_accumulation_steps", "--gbs (steps = gbs / (dp x micro-batch))"},
    {"sim.allow_oom", "--memory-headroom (the search skips what does not fit)"},
};

std::string setting_key(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

std::vector<int> divisors(std::int64_t n, std::int64_t limit) {
  std::vector<int> d;
  for (std::int64_t i = 1; i <= std::min(n, limit); ++i) {
    if (n % i == 0) d.push_back(static_cast<int>(i));
  }
  return d;
}

std::string int_list(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int x : v) s.push_back(std::to_string(x));
  return join_list(s);
}

// The tp and pp values the constraints allow (each bound alone; their product is checked
// against the GPUs when enumerating).
std::vector<int> tp_values(const SearchOptions& o, int heads, int gpus_per_node) {
  if (o.tp) return {o.tp};
  std::vector<int> out;
  const int limit = o.max_tp ? std::min(o.max_tp, gpus_per_node) : gpus_per_node;
  for (int tp : divisors(heads, limit)) {
    if (gpus_per_node % tp == 0) out.push_back(tp);
  }
  return out;
}

std::vector<int> pp_values(const SearchOptions& o, std::int64_t layers) {
  if (o.pp) return {o.pp};
  return divisors(layers, o.max_pp ? o.max_pp : 16);
}

// The expert-parallel degrees of a split: every divisor of the experts that divides dp x cp (an
// EP group is ep consecutive ranks of the data- and context-parallel ones); 1 for a dense model.
std::vector<int> ep_values(std::int64_t experts, int dp_cp) {
  if (experts <= 0) return {1};
  std::vector<int> out;
  for (int ep : divisors(experts, dp_cp)) {
    if (dp_cp % ep == 0) out.push_back(ep);
  }
  return out;
}

// Every candidate of one split (tp, pp, dp): virtual stages, ZeRO stages, micro-batches,
// recomputation and expert-parallel degrees, in that order of nesting.
void add_split(const SearchOptions& o, std::int64_t layers, const Candidate& split,
               std::int64_t per_dp, const std::vector<int>& eps, std::vector<Candidate>& out) {
  for (int vs : {1, 2}) {
    if (vs > 1 && (split.pp == 1 || layers % (static_cast<std::int64_t>(split.pp) * vs) != 0))
      continue;
    for (int zero : o.zero_stages) {
      for (int mbs : {1, 2, 4, 8}) {
        if (per_dp % mbs != 0) continue;
        for (const char* rc : {"none", "selective", "full"}) {
          for (int ep : eps) {
            Candidate c = split;
            c.virtual_stages = vs;
            c.zero = zero;
            c.mbs = mbs;
            c.gas = per_dp / mbs;
            c.recompute = rc;
            c.ep = ep;
            out.push_back(c);
          }
        }
      }
    }
  }
}

std::vector<Candidate> enumerate_within(const SearchOptions& o, int heads, std::int64_t layers,
                                        int gpus_per_node, int gpus, int cp, std::int64_t experts) {
  std::vector<Candidate> out;
  for (int tp : tp_values(o, heads, gpus_per_node)) {
    for (int pp : pp_values(o, layers)) {
      if (gpus % (tp * pp * cp) != 0) continue;
      const int dp = gpus / (tp * pp * cp);
      if (o.global_batch_size % dp != 0) continue;
      Candidate split;
      split.tp = tp;
      split.pp = pp;
      split.dp = dp;
      add_split(o, layers, split, o.global_batch_size / dp, ep_values(experts, dp * cp), out);
    }
  }
  return out;
}

// A fixed or bounding degree that no layout could have, whatever the other constraints.
void check_degrees(const SearchOptions& o, int heads, std::int64_t layers, int gpus) {
  for (const DegreeFlag& d : kDegreeFlags) {
    if (o.*d.field < 0) {
      throw InputError(d.flag, "must be at least 1, got " + std::to_string(o.*d.field));
    }
  }
  // A fixed degree splits `parts` (heads or layers) evenly and divides the GPUs.
  auto check_fixed = [&](const char* flag, int v, int bound, const char* bound_flag,
                         std::int64_t parts, const char* what) {
    if (v == 0) return;
    if (parts % v != 0 || gpus % v != 0) {
      std::vector<int> allowed;
      for (int d : divisors(parts, parts)) {
        if (gpus % d == 0) allowed.push_back(d);
      }
      throw InputError(flag, "must divide the model's " + std::to_string(parts) + " " + what +
                                 " and the " + std::to_string(gpus) +
                                 " GPUs; allowed: " + int_list(allowed));
    }
    if (bound && v > bound) {
      throw InputError(flag, std::to_string(v) + " exceeds " + bound_flag + " " +
                                 std::to_string(bound));
    }
  };
  check_fixed("--tp", o.tp, o.max_tp, "--max-tp", heads, "attention heads");
  check_fixed("--pp", o.pp, o.max_pp, "--max-pp", layers, "layers");
}

}  // namespace

namespace search_detail {

json base_document(const SearchOptions& o) {
  if (o.model.empty()) throw InputError("--model", "required: a model preset or config.json path");
  if (o.cluster.empty()) throw InputError("--cluster", "required: a cluster preset");
  if (o.nodes < 1) throw InputError("--nodes", "must be at least 1, got " + std::to_string(o.nodes));
  if (o.global_batch_size < 1) {
    throw InputError("--gbs", "must be at least 1, got " + std::to_string(o.global_batch_size));
  }
  if (o.zero_stages.empty()) throw InputError("--zero-stages", "give at least one stage");
  for (int z : o.zero_stages) {
    if (z < 0 || z > 3) throw InputError("--zero-stages", "allowed: 0, 1, 2, 3; got " + std::to_string(z));
  }
  if (o.top < 1) throw InputError("--top", "must be at least 1, got " + std::to_string(o.top));
  if (!(o.memory_headroom >= 0 && o.memory_headroom < 1)) {
    throw InputError("--memory-headroom", "allowed: 0 % up to (not including) 100 %");
  }
  json doc = {{"model", o.model}, {"cluster", {{"preset", o.cluster}, {"nodes", o.nodes}}}};
  for (const auto& s : o.sets) {
    const std::string key = setting_key(s);
    for (const OwnedKey& k : kOwnedKeys) {
      if (key == k.key) {
        throw InputError("--set", "the search sets " + key + " itself; use " + k.instead);
      }
    }
    if (key == "model.seq_length" && o.seq_length != 0) {
      throw InputError("--set", "model.seq_length given twice; keep --seq-length");
    }
    try {
      apply_setting(doc, s);
    } catch (const InputError& e) {
      throw InputError("--set", e.what());
    }
  }
  if (o.seq_length != 0) {
    if (o.seq_length < 1) {
      throw InputError("--seq-length", "must be at least 1, got " + std::to_string(o.seq_length));
    }
    apply_setting(doc, "model.seq_length=" + std::to_string(o.seq_length));
    try {
      (void)model_from_json(doc.at("model"), "model");
    } catch (const InputError& e) {
      throw InputError("--seq-length", e.what());
    }
  }
  return doc;
}

json candidate_document(json doc, const Candidate& c, std::int64_t gas, const char* network) {
  for (const char* section : {"parallel", "zero", "training", "sim"}) {
    if (!doc[section].is_object()) doc[section] = json::object();
  }
  json& p = doc["parallel"];
  p["tp"] = c.tp;
  p["pp"] = c.pp;
  p["virtual_stages"] = c.virtual_stages;
  p["recompute"] = c.recompute;
  if (c.ep > 1) {
    p["ep"] = c.ep;
    // Megatron-core runs MoE with TP only under sequence parallelism: such a layout gets it
    // unless --set says otherwise (which the scenario checks then refuse).
    if (c.tp > 1 && !p.contains("sequence_parallel")) p["sequence_parallel"] = true;
  }
  p.erase("dp");
  doc["zero"]["stage"] = c.zero;
  json& t = doc["training"];
  t.erase("gradient_accumulation_steps");
  t["micro_batch_size"] = c.mbs;
  t["global_batch_size"] = static_cast<std::int64_t>(c.dp) * c.mbs * gas;
  doc["sim"]["allow_oom"] = true;
  if (*network) doc["sim"]["network"] = network;
  return doc;
}

}  // namespace search_detail

double parse_headroom(const std::string& text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number = percent ? text.substr(0, text.size() - 1) : text;
  double v = -1;
  std::size_t used = 0;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != number.size() || !std::isfinite(v)) {
    throw InputError("--memory-headroom",
                     "expected a percentage (10%) or a fraction (0.1), got '" + text + "'");
  }
  if (!percent && v >= 1) {
    throw InputError("--memory-headroom",
                     "a fraction must be below 1 (10% is ten percent), got '" + text + "'");
  }
  const double f = percent ? v / 100 : v;
  if (!(f >= 0 && f < 1)) {
    throw InputError("--memory-headroom",
                     "allowed: 0% up to (not including) 100%, got '" + text + "'");
  }
  return f;
}

std::vector<Candidate> enumerate_candidates(const SearchOptions& o, int heads, std::int64_t layers,
                                            int gpus_per_node, int gpus, int cp,
                                            std::int64_t experts) {
  check_degrees(o, heads, layers, gpus);
  std::vector<Candidate> out = enumerate_within(o, heads, layers, gpus_per_node, gpus, cp, experts);
  if (!out.empty()) return out;
  const std::string split = cp > 1 ? "tp x pp x cp (cp " + std::to_string(cp) + ")" : "tp x pp";
  const std::string why = "with " + std::to_string(gpus) + " GPUs and a global batch of " +
                          std::to_string(o.global_batch_size) + ", " + split +
                          " must divide the GPUs and dp = GPUs / (" +
                          (cp > 1 ? "tp x pp x cp" : "tp x pp") + ") the batch";
  // Name the constraint that empties the space: the one whose removal alone refills it, or
  // all of them when none or several do.
  std::vector<std::string> given, culprits;
  std::string culprit_flag, refilled;
  for (const DegreeFlag& d : kDegreeFlags) {
    if (o.*d.field == 0) continue;
    given.push_back(std::string(d.flag) + " " + std::to_string(o.*d.field));
    SearchOptions relaxed = o;
    relaxed.*d.field = 0;
    const std::vector<Candidate> without =
        enumerate_within(relaxed, heads, layers, gpus_per_node, gpus, cp, experts);
    if (without.empty()) continue;
    culprits.push_back(given.back());
    culprit_flag = d.flag;
    std::vector<int> tps, pps;
    for (const Candidate& c : without) {
      if (std::find(tps.begin(), tps.end(), c.tp) == tps.end()) tps.push_back(c.tp);
      if (std::find(pps.begin(), pps.end(), c.pp) == pps.end()) pps.push_back(c.pp);
    }
    std::sort(pps.begin(), pps.end());
    refilled = " (without it: tp " + int_list(tps) + ", pp " + int_list(pps) + ")";
  }
  if (culprits.size() == 1) {
    throw InputError(culprit_flag, culprits[0] + " leaves no layout: " + why + refilled);
  }
  if (!given.empty()) {
    // "leave no layout together" when several relax it alone, or none does.
    const std::vector<std::string>& named = culprits.empty() ? given : culprits;
    throw InputError(named[0].substr(0, named[0].find(' ')),
                     join_list(named) + " together leave no layout: " + why);
  }
  throw InputError("--gbs", "no layout: " + why + " (tp <= " + std::to_string(gpus_per_node) +
                                ", pp <= 16; raise --max-pp or change --gbs)");
}

}  // namespace zerosim::explore
