#include "sim/explore/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <numeric>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {
using json = nlohmann::json;

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

// The degree constraints (0 = not given).
struct DegreeFlag {
  const char* flag;
  int SearchOptions::*field;
};
constexpr DegreeFlag kDegreeFlags[] = {{"--tp", &SearchOptions::tp},
                                       {"--pp", &SearchOptions::pp},
                                       {"--max-tp", &SearchOptions::max_tp},
                                       {"--max-pp", &SearchOptions::max_pp}};

std::string setting_key(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

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

// The candidate's document with `gas` micro-batches per step (the screen uses fewer than the
// candidate's own) on `network` (empty: the scenario's).
json candidate_document(json doc, const Candidate& c, std::int64_t gas, const char* network) {
  for (const char* section : {"parallel", "zero", "training", "sim"}) {
    if (!doc[section].is_object()) doc[section] = json::object();
  }
  json& p = doc["parallel"];
  p["tp"] = c.tp;
  p["pp"] = c.pp;
  p["virtual_stages"] = c.virtual_stages;
  p["recompute"] = c.recompute;
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

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string gib(std::int64_t bytes) {
  return fmt("%.2f GiB", static_cast<double>(bytes) / (1 << 30));
}

std::string describe(const Candidate& c) {
  return "tp " + std::to_string(c.tp) + ", pp " + std::to_string(c.pp) +
         (c.virtual_stages > 1 ? " x" + std::to_string(c.virtual_stages) : "") + ", dp " +
         std::to_string(c.dp) + ", ZeRO-" + std::to_string(c.zero) + ", mbs " +
         std::to_string(c.mbs) + ", recompute " + c.recompute;
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

std::vector<Candidate> enumerate_within(const SearchOptions& o, int heads, std::int64_t layers,
                                        int gpus_per_node, int gpus) {
  std::vector<Candidate> out;
  for (int tp : tp_values(o, heads, gpus_per_node)) {
    for (int pp : pp_values(o, layers)) {
      if (gpus % (tp * pp) != 0) continue;
      const int dp = gpus / (tp * pp);
      if (o.global_batch_size % dp != 0) continue;
      const std::int64_t per_dp = o.global_batch_size / dp;
      for (int vs : {1, 2}) {
        if (vs > 1 && (pp == 1 || layers % (static_cast<std::int64_t>(pp) * vs) != 0)) continue;
        for (int zero : o.zero_stages) {
          for (int mbs : {1, 2, 4, 8}) {
            if (per_dp % mbs != 0) continue;
            for (const char* rc : {"none", "selective", "full"}) {
              Candidate c;
              c.tp = tp;
              c.pp = pp;
              c.dp = dp;
              c.virtual_stages = vs;
              c.zero = zero;
              c.mbs = mbs;
              c.gas = per_dp / mbs;
              c.recompute = rc;
              out.push_back(c);
            }
          }
        }
      }
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

struct Screened {
  Verdict verdict = Verdict::Invalid;
  bool fits_gpu = false;  // peak within the GPU's memory (headroom aside) and host tiers fit
  double estimate_s = 0;
  std::string error_key, error;  // Invalid: the scenario checks' InputError
};

bool fits(const StepReport& r, std::int64_t limit) {
  return r.memory.peak <= limit && r.fits_in_host_memory && r.fits_on_nvme;
}

// The best layout simulated so far, for the progress line only (written by the workers in any
// order; results never read it).
class BestSoFar {
 public:
  void offer(double tokens_per_s, const Candidate& c) {
    std::lock_guard<std::mutex> lock(m_);
    if (tokens_per_s <= best_) return;
    best_ = tokens_per_s;
    text_ = fmt("best %.0f tokens/s (", tokens_per_s) + describe(c) + ")";
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(m_);
    return text_;
  }

 private:
  std::mutex m_;
  double best_ = 0;
  std::string text_;
};

}  // namespace

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
                                            int gpus_per_node, int gpus) {
  check_degrees(o, heads, layers, gpus);
  std::vector<Candidate> out = enumerate_within(o, heads, layers, gpus_per_node, gpus);
  if (!out.empty()) return out;
  const std::string why = "with " + std::to_string(gpus) + " GPUs and a global batch of " +
                          std::to_string(o.global_batch_size) +
                          ", tp x pp must divide the GPUs and dp = GPUs / (tp x pp) the batch";
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
        enumerate_within(relaxed, heads, layers, gpus_per_node, gpus);
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

namespace {

// One search: the candidates' verdicts and full results, filled by the phases below.
class Search {
 public:
  Search(const SearchOptions& o, const json& base, SearchOutcome& out, std::int64_t hbm)
      : o_(o), base_(base), out_(out), cands_(out.all), hbm_(hbm),
        screen_(out.all.size()), results_(out.all.size()) {}

  // Every candidate simulated in full (the reference).
  void exhaustive() {
    Progress bar(cands_.size(), "search: simulating every layout", o_.progress);
    parallel_for(
        cands_.size(), o_.jobs,
        [&](std::size_t i) {
          try {
            screen_[i].verdict = simulate_full(i) ? Verdict::Simulated : Verdict::DoesNotFit;
          } catch (const InputError& e) {
            invalid(i, e);
          }
        },
        bar.callback([&] { return best_.text(); }));
    bar.finish();
  }

  // 1. The screen of every candidate: validity, memory with few micro-batches, the estimate.
  void screen() {
    Progress bar(cands_.size(), "search: screening", o_.progress);
    parallel_for(cands_.size(), o_.jobs, [&](std::size_t i) { screen_one(i); }, bar.callback());
    bar.finish();
  }

  // 2. Full simulations in order of the estimate until nothing skipped can reach the top.
  void simulate_best() {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < cands_.size(); ++i) {
      if (screen_[i].verdict == Verdict::Pruned) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return screen_[a].estimate_s < screen_[b].estimate_s;
    });
    const std::size_t need = static_cast<std::size_t>(std::max(o_.top, 2));
    std::vector<double> fitting_steps;
    double overestimate = 0;
    std::size_t pos = 0;
    Progress bar(0, "search: simulating the best estimates", o_.progress);
    while (pos < order.size()) {
      const std::size_t n = std::min(kFinalBatch, order.size() - pos);
      std::vector<char> ok(n, 0);
      parallel_for(
          n, o_.jobs,
          [&](std::size_t k) {
            const std::size_t i = order[pos + k];
            // Already simulated in full by the screen's fallback: the same numbers.
            ok[k] = results_[i].report.step_time_s > 0 ? fits(results_[i].report, out_.memory_limit)
                                                       : simulate_full(i);
          },
          bar.callback([&] { return best_.text(); }, pos));
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = order[pos + k];
        const double simulated_s = results_[i].report.step_time_s;
        overestimate = std::max(overestimate, screen_[i].estimate_s / simulated_s - 1);
        screen_[i].verdict = ok[k] ? Verdict::Simulated : Verdict::DoesNotFit;
        if (ok[k]) fitting_steps.push_back(simulated_s);
      }
      pos += n;
      out_.margin = std::max(kMargin, 2 * overestimate);
      if (fitting_steps.size() >= need && pos < order.size()) {
        std::nth_element(fitting_steps.begin(), fitting_steps.begin() + (need - 1),
                         fitting_steps.end());
        if (screen_[order[pos]].estimate_s > fitting_steps[need - 1] * (1 + out_.margin)) break;
      }
    }
    bar.finish();
  }

  // Counts, verdicts and the ranking into the outcome.
  void finish() {
    std::vector<std::size_t> ok;
    for (std::size_t i = 0; i < cands_.size(); ++i) {
      switch (screen_[i].verdict) {
        case Verdict::Invalid: ++out_.invalid; break;
        case Verdict::DoesNotFit:
          ++out_.does_not_fit;
          if (screen_[i].fits_gpu) ++out_.fit_without_headroom;
          break;
        case Verdict::Pruned: ++out_.pruned; break;
        case Verdict::Simulated: ok.push_back(i); break;
      }
      out_.verdicts.push_back(screen_[i].verdict);
    }
    if (out_.invalid == out_.candidates) {
      // Every layout rejected: the first one's reason names the key at fault.
      throw InputError(screen_[0].error_key,
                       screen_[0].error + " (every candidate layout was rejected this way)");
    }
    if (ok.empty() && out_.fit_without_headroom > 0) {
      throw InputError("--memory-headroom",
                       fmt("%g %%", 100 * o_.memory_headroom) + " leaves no layout that fits: " +
                           std::to_string(out_.fit_without_headroom) + " fit the GPU's " +
                           gib(hbm_) + ", none within " + gib(out_.memory_limit));
    }
    out_.simulated = ok.size();
    std::stable_sort(ok.begin(), ok.end(), [&](std::size_t a, std::size_t b) {
      return results_[a].report.tokens_per_s > results_[b].report.tokens_per_s;
    });
    for (std::size_t i : ok) out_.ranked.push_back(std::move(results_[i]));
  }

 private:
  const SearchOptions& o_;
  const json& base_;
  SearchOutcome& out_;
  const std::vector<Candidate>& cands_;
  const std::int64_t hbm_;
  std::vector<Screened> screen_;
  std::vector<SearchResult> results_;
  BestSoFar best_;

  Scenario scenario(const Candidate& c, std::int64_t gas, const char* network) const {
    return resolve_scenario(candidate_document(base_, c, gas, network));
  }

  // Whether candidate i fits (within the headroom), simulated in full on its own network.
  bool simulate_full(std::size_t i) {
    const Scenario s = scenario(cands_[i], cands_[i].gas, "");
    SearchResult& r = results_[i];
    r.config = cands_[i];
    r.report = simulate_step(s).report;
    r.bottleneck = find_bottleneck(s, r.report);
    screen_[i].fits_gpu =
        r.report.memory.peak <= hbm_ && r.report.fits_in_host_memory && r.report.fits_on_nvme;
    const bool ok = fits(r.report, out_.memory_limit);
    if (ok) best_.offer(r.report.tokens_per_s, cands_[i]);
    return ok;
  }

  void invalid(std::size_t i, const InputError& e) {
    screen_[i] = Screened{};
    screen_[i].error_key = e.key_path();
    const std::string what = e.what();  // "key: message"
    screen_[i].error = e.key_path().empty() ? what : what.substr(e.key_path().size() + 2);
  }

  void screen_one(std::size_t i) {
    const Candidate& c = cands_[i];
    Screened& sc = screen_[i];
    try {
      (void)scenario(c, c.gas, "");
    } catch (const InputError& e) {
      invalid(i, e);
      return;
    }
    // pp micro-batches fill the pipeline (and are a multiple of it, as interleaving needs); at
    // least 2 so that gradients are accumulated as in the real step.
    const std::int64_t g1 = std::max<std::int64_t>(2, c.pp), g2 = 2 * g1;
    const bool reduce = c.gas > g2;
    try {
      const StepReport m = memory_report(scenario(c, reduce ? g2 : c.gas, ""));
      sc.fits_gpu = m.memory.peak <= hbm_ && m.fits_in_host_memory && m.fits_on_nvme;
      if (!fits(m, out_.memory_limit)) {
        sc.verdict = Verdict::DoesNotFit;
        return;
      }
      auto step_s = [&](std::int64_t gas) {
        return simulate_step(scenario(c, gas, "analytical")).report.step_time_s;
      };
      if (reduce) {
        // A step is the pipeline's fill and drain plus a time per micro-batch: extrapolate.
        const double t1 = step_s(g1), t2 = step_s(g2);
        sc.estimate_s =
            t2 + (t2 - t1) / static_cast<double>(g2 - g1) * static_cast<double>(c.gas - g2);
      } else {
        sc.estimate_s = step_s(c.gas);
      }
    } catch (const InputError&) {
      // The analytical network or the smaller batch is refused where the candidate's own
      // scenario is not (a what-if that needs the flow network): its own full step is both the
      // screen and the estimate.
      try {
        const bool ok = simulate_full(i);
        sc.estimate_s = results_[i].report.step_time_s;
        if (!ok) {
          sc.verdict = Verdict::DoesNotFit;
          return;
        }
      } catch (const InputError& e) {
        invalid(i, e);
        return;
      }
    }
    sc.verdict = Verdict::Pruned;  // until simulated in full
  }
};

}  // namespace

SearchOutcome run_search(const SearchOptions& o) {
  const json base = base_document(o);
  const ModelSpec model = model_from_json(base.at("model"), "model");
  const ClusterSpec cluster = cluster_from_json(base.at("cluster"), "cluster");
  SearchOutcome out;
  out.gpus = cluster.num_gpus();
  out.memory_limit = static_cast<std::int64_t>(
      std::floor(static_cast<double>(cluster.gpu.hbm_bytes) * (1.0 - o.memory_headroom)));
  out.all = enumerate_candidates(o, static_cast<int>(model.num_attention_heads), model.num_layers,
                                 cluster.gpus_per_node, out.gpus);
  out.candidates = out.all.size();
  Search search(o, base, out, cluster.gpu.hbm_bytes);
  if (o.exhaustive) {
    search.exhaustive();
  } else {
    search.screen();
    search.simulate_best();
  }
  search.finish();
  return out;
}

std::vector<GapComponent> explain_gap(const StepReport& best, const StepReport& other) {
  const StepBreakdown& a = best.breakdown;
  const StepBreakdown& b = other.breakdown;
  std::vector<GapComponent> g = {
      {"forward", a.forward_s, b.forward_s},
      {"backward", a.backward_s, b.backward_s},
      {"exposed dp", a.exposed_by_group[0], b.exposed_by_group[0]},
      {"exposed tp", a.exposed_by_group[1], b.exposed_by_group[1]},
      {"exposed pp", a.exposed_by_group[2], b.exposed_by_group[2]},
      {"bubble", a.bubble_s, b.bubble_s},
      {"optimizer", a.optimizer_s, b.optimizer_s},
  };
  std::stable_sort(g.begin(), g.end(), [](const GapComponent& x, const GapComponent& y) {
    return std::abs(x.diff_s()) > std::abs(y.diff_s());
  });
  return g;
}

std::string search_text(const SearchOptions& o, const SearchOutcome& out) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "search: %s on %d x %s (%d GPUs), global batch %lld\n",
                o.model.c_str(), o.nodes, o.cluster.c_str(), out.gpus,
                static_cast<long long>(o.global_batch_size));
  s += line;
  std::string pruned;
  if (!o.exhaustive) {
    pruned = std::to_string(out.pruned) + " pruned by their estimate, ";
  }
  std::snprintf(line, sizeof line,
                "  %zu candidates: %zu invalid, %zu do not fit (peak > %s), %s%zu simulated%s\n\n",
                out.candidates, out.invalid, out.does_not_fit, gib(out.memory_limit).c_str(),
                pruned.c_str(), out.simulated, o.exhaustive ? " (exhaustive)" : " in full");
  s += line;
  if (out.ranked.empty()) {
    std::string within;
    for (const DegreeFlag& d : kDegreeFlags) {
      if (o.*d.field == 0) continue;
      within += std::string(within.empty() ? " within " : ", ") + d.flag + " " +
                std::to_string(o.*d.field);
    }
    return s + "  no configuration fits" + within + "\n";
  }
  std::snprintf(line, sizeof line, "%4s %3s %3s %2s %5s %4s %4s %4s %-9s %9s %11s %8s %6s %9s\n",
                "rank", "tp", "pp", "vs", "dp", "zero", "mbs", "gas", "recompute", "step_s",
                "tokens/s", "TFLOP/s", "MFU%", "peak_GiB");
  s += line;
  const std::size_t n = std::min<std::size_t>(out.ranked.size(), static_cast<std::size_t>(o.top));
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = out.ranked[i].config;
    const StepReport& r = out.ranked[i].report;
    std::snprintf(line, sizeof line,
                  "%4zu %3d %3d %2d %5d %4d %4d %4lld %-9s %9.4f %11.0f %8.1f %6.1f %9.2f\n", i + 1,
                  c.tp, c.pp, c.virtual_stages, c.dp, c.zero, c.mbs, static_cast<long long>(c.gas),
                  c.recompute.c_str(), r.step_time_s, r.tokens_per_s, r.tflops_per_gpu,
                  100 * r.mfu, static_cast<double>(r.memory.peak) / (1024.0 * 1024 * 1024));
    s += line;
  }
  s += "\nbottlenecks:\n";
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(line, sizeof line, "%4zu  ", i + 1);
    s += line + out.ranked[i].bottleneck.text() + "\n";
  }
  if (out.ranked.size() < 2) return s;
  const StepReport& best = out.ranked[0].report;
  const StepReport& second = out.ranked[1].report;
  const double gap = second.step_time_s - best.step_time_s;
  s += "\nwhy #1 beat #2 (" + describe(out.ranked[1].config) + "): " + fmt("%.4f", gap) +
       " s per step (" + fmt("%.2f", best.step_time_s > 0 ? 100 * gap / best.step_time_s : 0) +
       " %) faster\n";
  const auto comps = explain_gap(best, second);
  int shown = 0;
  for (const auto& c : comps) {
    if (shown > 0 && std::abs(c.diff_s()) < 0.1 * std::abs(gap)) break;
    if (shown == 4 || std::abs(c.diff_s()) < 1e-12) break;
    std::snprintf(line, sizeof line, "  %-11s %9.4f s vs %9.4f s  (%+.4f s)\n", c.name.c_str(),
                  c.best_s, c.other_s, c.diff_s());
    s += line;
    ++shown;
  }
  if (shown == 0) s += "  (the breakdowns are the same; a tie)\n";
  return s;
}

json search_json(const SearchOptions& o, const SearchOutcome& out) {
  auto given = [](int v) { return v ? json(v) : json(nullptr); };
  json j = {{"format", "zerosim-search/1"},
            {"model", o.model},
            {"cluster", o.cluster},
            {"nodes", o.nodes},
            {"gpus", out.gpus},
            {"global_batch_size", o.global_batch_size},
            {"constraints",
             {{"tp", given(o.tp)},
              {"pp", given(o.pp)},
              {"max_tp", given(o.max_tp)},
              {"max_pp", given(o.max_pp)},
              {"seq_length", o.seq_length ? json(o.seq_length) : json(nullptr)},
              {"zero_stages", o.zero_stages},
              {"memory_headroom", o.memory_headroom},
              {"memory_limit_bytes", out.memory_limit}}},
            {"pruning",
             {{"exhaustive", o.exhaustive},
              {"margin", out.margin}}},
            {"counts",
             {{"candidates", out.candidates},
              {"invalid", out.invalid},
              {"does_not_fit", out.does_not_fit},
              {"fit_without_headroom", out.fit_without_headroom},
              {"pruned", out.pruned},
              {"simulated", out.simulated}}},
            {"top", json::array()}};
  const std::size_t n = std::min<std::size_t>(out.ranked.size(), static_cast<std::size_t>(o.top));
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = out.ranked[i].config;
    const StepReport& r = out.ranked[i].report;
    const StepBreakdown& b = r.breakdown;
    const Bottleneck& w = out.ranked[i].bottleneck;
    j["top"].push_back({{"tp", c.tp},
                        {"pp", c.pp},
                        {"virtual_stages", c.virtual_stages},
                        {"dp", c.dp},
                        {"zero_stage", c.zero},
                        {"micro_batch_size", c.mbs},
                        {"gradient_accumulation_steps", c.gas},
                        {"recompute", c.recompute},
                        {"step_time_s", r.step_time_s},
                        {"tokens_per_s", r.tokens_per_s},
                        {"tflops_per_gpu", r.tflops_per_gpu},
                        {"mfu", r.mfu},
                        {"peak_memory_bytes", r.memory.peak},
                        {"fits_in_memory", r.fits_in_memory},
                        {"breakdown_s",
                         {{"forward", b.forward_s},
                          {"backward", b.backward_s},
                          {"optimizer", b.optimizer_s},
                          {"exposed_dp", b.exposed_by_group[0]},
                          {"exposed_tp", b.exposed_by_group[1]},
                          {"exposed_pp", b.exposed_by_group[2]},
                          {"bubble", b.bubble_s},
                          {"offload", b.offload_s}}},
                        {"bottleneck",
                         {{"component", w.component},
                          {"seconds", w.seconds},
                          {"share", w.share},
                          {"summary", w.summary},
                          {"advice", w.advice},
                          {"text", w.text()}}}});
  }
  if (out.ranked.size() >= 2) {
    json comps = json::array();
    for (const auto& c : explain_gap(out.ranked[0].report, out.ranked[1].report)) {
      comps.push_back({{"component", c.name}, {"best_s", c.best_s}, {"runner_up_s", c.other_s},
                       {"difference_s", c.diff_s()}});
    }
    j["why"] = {{"gap_s", out.ranked[1].report.step_time_s - out.ranked[0].report.step_time_s},
                {"components", comps}};
  }
  return j;
}

}  // namespace zerosim::explore
