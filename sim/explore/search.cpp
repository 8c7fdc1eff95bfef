// `zerosim search` itself: every candidate screened and estimated, the best simulated in full
// until nothing skipped can reach the top, then ranked and printed. Which candidates there are
// is search_space.cpp.
#include "sim/explore/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <numeric>

#include "sim/core/error.h"
#include "sim/explore/search_space.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {
using json = nlohmann::json;
using search_detail::base_document;
using search_detail::candidate_document;
using search_detail::DegreeFlag;
using search_detail::kDegreeFlags;

namespace {

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
         std::to_string(c.dp) + (c.ep > 1 ? ", ep " + std::to_string(c.ep) : "") + ", ZeRO-" +
         std::to_string(c.zero) + ", mbs " +
         std::to_string(c.mbs) + ", recompute " + c.recompute;
}

struct Screened {
  Verdict verdict = Verdict::Invalid;
  bool fits_gpu = false;  // nvidia-smi peak within the GPU's memory (headroom aside), host tiers fit
  double estimate_s = 0;
  std::string error_key, error;  // Invalid: the scenario checks' InputError
};

bool fits(const StepReport& r, std::int64_t limit) {
  return r.device_peak <= limit && r.fits_in_host_memory && r.fits_on_nvme;
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
    r.warnings = s.warnings;
    screen_[i].fits_gpu =
        r.report.device_peak <= hbm_ && r.report.fits_in_host_memory && r.report.fits_on_nvme;
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
      sc.fits_gpu = m.device_peak <= hbm_ && m.fits_in_host_memory && m.fits_on_nvme;
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
  // A context-parallel degree given with --set holds for every layout (a value the scenario
  // checks refuse is left to them: every layout is then rejected on its key).
  const json cp = base.contains("parallel") ? base.at("parallel").value("cp", json(1)) : json(1);
  if (cp.is_number_integer() && cp.get<std::int64_t>() > 1 &&
      out.gpus % cp.get<std::int64_t>() == 0) {
    out.cp = cp.get<int>();
  }
  // An MoE model's expert-parallel degree is searched unless --set holds it.
  const bool ep_given = base.contains("parallel") && base.at("parallel").contains("ep");
  out.varies_ep = model.is_moe() && !ep_given;
  out.all = enumerate_candidates(o, static_cast<int>(model.num_attention_heads), model.num_layers,
                                 cluster.gpus_per_node, out.gpus, out.cp,
                                 out.varies_ep ? model.moe.num_experts : 0);
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
  const auto a = breakdown_parts(best.breakdown), b = breakdown_parts(other.breakdown);
  std::vector<GapComponent> g;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string name = a[i].name;
    std::replace(name.begin(), name.end(), '_', ' ');  // as the text prints it: "exposed dp"
    g.push_back({name, a[i].seconds, b[i].seconds});
  }
  std::stable_sort(g.begin(), g.end(), [](const GapComponent& x, const GapComponent& y) {
    return std::abs(x.diff_s()) > std::abs(y.diff_s());
  });
  return g;
}

std::string search_text(const SearchOptions& o, const SearchOutcome& out) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "search: %s on %d x %s (%d GPUs), global batch %lld%s\n",
                o.model.c_str(), o.nodes, o.cluster.c_str(), out.gpus,
                static_cast<long long>(o.global_batch_size),
                out.cp > 1 ? (", cp " + std::to_string(out.cp)).c_str() : "");
  s += line;
  std::string pruned;
  if (!o.exhaustive) {
    pruned = std::to_string(out.pruned) + " pruned by their estimate, ";
  }
  std::snprintf(line, sizeof line,
                "  %zu candidates: %zu invalid, %zu do not fit (nvidia-smi peak > %s), %s%zu simulated%s\n\n",
                out.candidates, out.invalid, out.does_not_fit, gib(out.memory_limit).c_str(),
                pruned.c_str(), out.simulated, o.exhaustive ? " (exhaustive)" : " in full");
  s += line;
  if (out.varies_ep)
    s += "  ep: the expert-parallel degree, searched (a layout with tp > 1 and ep > 1 runs "
         "sequence parallelism, as Megatron-core requires)\n\n";
  if (out.ranked.empty()) {
    std::string within;
    for (const DegreeFlag& d : kDegreeFlags) {
      if (o.*d.field == 0) continue;
      within += std::string(within.empty() ? " within " : ", ") + d.flag + " " +
                std::to_string(o.*d.field);
    }
    return s + "  no configuration fits" + within + "\n";
  }
  // An "ep" column where the search varied the expert-parallel degree.
  const std::string ep_head = out.varies_ep ? "   ep" : "";
  std::snprintf(line, sizeof line, "%4s %3s %3s %2s %5s%s %4s %4s %4s %-9s %9s %11s %8s %6s %9s\n",
                "rank", "tp", "pp", "vs", "dp", ep_head.c_str(), "zero", "mbs", "gas", "recompute",
                "step_s", "tokens/s", "TFLOP/s", "MFU%", "gpu_GiB");
  s += line;
  const std::size_t n = std::min<std::size_t>(out.ranked.size(), static_cast<std::size_t>(o.top));
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = out.ranked[i].config;
    const StepReport& r = out.ranked[i].report;
    char ep[16] = "";
    if (out.varies_ep) std::snprintf(ep, sizeof ep, " %4d", c.ep);
    std::snprintf(line, sizeof line,
                  "%4zu %3d %3d %2d %5d%s %4d %4d %4lld %-9s %9.4f %11.0f %8.1f %6.1f %9.2f\n",
                  i + 1, c.tp, c.pp, c.virtual_stages, c.dp, ep, c.zero, c.mbs,
                  static_cast<long long>(c.gas), c.recompute.c_str(), r.step_time_s, r.tokens_per_s, r.tflops_per_gpu,
                  100 * r.mfu, static_cast<double>(r.device_peak) / (1024.0 * 1024 * 1024));
    s += line;
  }
  s += "\nbottlenecks:\n";
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(line, sizeof line, "%4zu  ", i + 1);
    s += line + out.ranked[i].bottleneck.text() + "\n";
  }
  if (!out.ranked[0].warnings.empty()) {
    s += "\nwarnings (inputs #1 takes otherwise than written; also in --json):\n";
    for (const InputWarning& w : out.ranked[0].warnings)
      s += "  " + w.key_path + ": " + w.message + "\n";
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
              {"cp", out.cp},
              {"ep_searched", out.varies_ep},
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
    json parts = json::object();
    for (const BreakdownPart& part : breakdown_parts(r.breakdown)) parts[part.name] = part.seconds;
    const Bottleneck& w = out.ranked[i].bottleneck;
    json warnings = json::array();
    for (const InputWarning& x : out.ranked[i].warnings)
      warnings.push_back({{"key", x.key_path}, {"message", x.message}});
    j["top"].push_back({{"tp", c.tp},
                        {"pp", c.pp},
                        {"virtual_stages", c.virtual_stages},
                        {"dp", c.dp},
                        {"ep", c.ep},
                        {"zero_stage", c.zero},
                        {"micro_batch_size", c.mbs},
                        {"gradient_accumulation_steps", c.gas},
                        {"recompute", c.recompute},
                        {"step_time_s", r.step_time_s},
                        {"tokens_per_s", r.tokens_per_s},
                        {"tflops_per_gpu", r.tflops_per_gpu},
                        {"mfu", r.mfu},
                        {"peak_memory_bytes", r.memory.peak},
                        {"device_peak_bytes", r.device_peak},
                        {"fits_in_memory", r.fits_in_memory},
                        {"breakdown_s", parts},
                        {"bottleneck",
                         {{"component", w.component},
                          {"seconds", w.seconds},
                          {"share", w.share},
                          {"summary", w.summary},
                          {"advice", w.advice},
                          {"text", w.text()}}},
                        {"warnings", warnings}});
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
