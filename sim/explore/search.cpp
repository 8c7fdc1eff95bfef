#include "sim/explore/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "sim/core/error.h"
#include "sim/explore/pool.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {
using json = nlohmann::json;

namespace {

enum class Verdict { Invalid, DoesNotFit, Simulated };

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
  json doc = {{"model", o.model}, {"cluster", {{"preset", o.cluster}, {"nodes", o.nodes}}}};
  for (const auto& s : o.sets) {
    try {
      apply_setting(doc, s);
    } catch (const InputError& e) {
      throw InputError("--set", e.what());
    }
  }
  return doc;
}

json candidate_document(json doc, const SearchOptions& o, const Candidate& c) {
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
  t["global_batch_size"] = o.global_batch_size;
  doc["sim"]["allow_oom"] = true;
  return doc;
}

std::vector<int> divisors(std::int64_t n, std::int64_t limit) {
  std::vector<int> d;
  for (std::int64_t i = 1; i <= std::min(n, limit); ++i) {
    if (n % i == 0) d.push_back(static_cast<int>(i));
  }
  return d;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string describe(const Candidate& c) {
  return "tp " + std::to_string(c.tp) + ", pp " + std::to_string(c.pp) +
         (c.virtual_stages > 1 ? " x" + std::to_string(c.virtual_stages) : "") + ", dp " +
         std::to_string(c.dp) + ", ZeRO-" + std::to_string(c.zero) + ", mbs " +
         std::to_string(c.mbs) + ", recompute " + c.recompute;
}

}  // namespace

std::vector<Candidate> enumerate_candidates(const SearchOptions& o, int heads, std::int64_t layers,
                                            int gpus_per_node, int gpus) {
  std::vector<Candidate> out;
  for (int tp : divisors(heads, gpus_per_node)) {
    if (gpus_per_node % tp != 0) continue;
    for (int pp : divisors(layers, 16)) {
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

SearchOutcome run_search(const SearchOptions& o) {
  const json base = base_document(o);
  const ModelSpec model = model_from_json(base.at("model"), "model");
  const ClusterSpec cluster = cluster_from_json(base.at("cluster"), "cluster");
  SearchOutcome out;
  out.gpus = cluster.num_gpus();
  const std::vector<Candidate> cands =
      enumerate_candidates(o, static_cast<int>(model.num_attention_heads), model.num_layers,
                           cluster.gpus_per_node, out.gpus);
  out.candidates = cands.size();
  std::vector<Verdict> verdict(cands.size(), Verdict::Invalid);
  std::vector<StepReport> reports(cands.size());
  Progress bar(cands.size(), "search", o.progress);
  parallel_for(
      cands.size(), o.jobs,
      [&](std::size_t i) {
        try {
          const Scenario s = resolve_scenario(candidate_document(base, o, cands[i]));
          if (!memory_report(s).fits_in_memory) {
            verdict[i] = Verdict::DoesNotFit;
            return;
          }
          reports[i] = simulate_step(s).report;
          verdict[i] = reports[i].fits_in_memory ? Verdict::Simulated : Verdict::DoesNotFit;
        } catch (const InputError&) {
          verdict[i] = Verdict::Invalid;
        }
      },
      bar.callback());
  bar.finish();
  std::vector<std::size_t> ok;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (verdict[i] == Verdict::Invalid) ++out.invalid;
    if (verdict[i] == Verdict::DoesNotFit) ++out.does_not_fit;
    if (verdict[i] == Verdict::Simulated) ok.push_back(i);
  }
  out.simulated = ok.size();
  std::stable_sort(ok.begin(), ok.end(), [&](std::size_t a, std::size_t b) {
    return reports[a].tokens_per_s > reports[b].tokens_per_s;
  });
  for (std::size_t i : ok) out.ranked.push_back({cands[i], reports[i]});
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

std::string search_text(const SearchOptions& o, const SearchOutcome& out, int top) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line,
                "search: %s on %d x %s (%d GPUs), global batch %lld\n"
                "  %zu candidates: %zu invalid, %zu do not fit, %zu simulated\n\n",
                o.model.c_str(), o.nodes, o.cluster.c_str(), out.gpus,
                static_cast<long long>(o.global_batch_size), out.candidates, out.invalid,
                out.does_not_fit, out.simulated);
  s += line;
  if (out.ranked.empty()) return s + "  no configuration fits\n";
  std::snprintf(line, sizeof line, "%4s %3s %3s %2s %5s %4s %4s %4s %-9s %9s %11s %8s %6s %9s\n",
                "rank", "tp", "pp", "vs", "dp", "zero", "mbs", "gas", "recompute", "step_s",
                "tokens/s", "TFLOP/s", "MFU%", "peak_GiB");
  s += line;
  const std::size_t n = std::min<std::size_t>(out.ranked.size(), static_cast<std::size_t>(std::max(top, 0)));
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

json search_json(const SearchOptions& o, const SearchOutcome& out, int top) {
  json j = {{"format", "zerosim-search/1"},
            {"model", o.model},
            {"cluster", o.cluster},
            {"nodes", o.nodes},
            {"gpus", out.gpus},
            {"global_batch_size", o.global_batch_size},
            {"counts",
             {{"candidates", out.candidates},
              {"invalid", out.invalid},
              {"does_not_fit", out.does_not_fit},
              {"simulated", out.simulated}}},
            {"top", json::array()}};
  const std::size_t n = std::min<std::size_t>(out.ranked.size(), static_cast<std::size_t>(std::max(top, 0)));
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = out.ranked[i].config;
    const StepReport& r = out.ranked[i].report;
    const StepBreakdown& b = r.breakdown;
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
                          {"bubble", b.bubble_s}}}});
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
