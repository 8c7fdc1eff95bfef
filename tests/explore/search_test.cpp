// zerosim search: the pruned search against the exhaustive one (same top, no fitting layout
// dropped by the memory screen), constraints honoured or refused, the memory headroom, progress
// that changes nothing, and the bottleneck in its output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/explore/search.h"

namespace zerosim::explore {
namespace {
using json = nlohmann::json;

SearchOptions search_of(const char* model, const char* cluster, int nodes, std::int64_t gbs) {
  SearchOptions o;
  o.model = model;
  o.cluster = cluster;
  o.nodes = nodes;
  o.global_batch_size = gbs;
  o.jobs = 2;
  return o;
}

SearchOptions llama7b_one_node() {
  SearchOptions o = search_of("llama2-7b", "dgx-h100", 1, 32);
  o.zero_stages = {1, 3};
  o.top = 5;
  return o;
}

std::string key_of(const Candidate& c) {
  return std::to_string(c.tp) + "/" + std::to_string(c.pp) + "/" +
         std::to_string(c.virtual_stages) + "/" + std::to_string(c.dp) + "/ep" +
         std::to_string(c.ep) + "/" +
         std::to_string(c.zero) + "/" + std::to_string(c.mbs) + "/" + c.recompute;
}

TEST(Search, RankedByTokensPerSecondAllFitting) {
  SearchOptions o = llama7b_one_node();
  const SearchOutcome out = run_search(o);
  EXPECT_GT(out.candidates, 0u);
  EXPECT_EQ(out.candidates, out.invalid + out.does_not_fit + out.pruned + out.simulated);
  ASSERT_EQ(out.ranked.size(), out.simulated);
  ASSERT_GE(out.ranked.size(), 2u);
  for (std::size_t i = 0; i < out.ranked.size(); ++i) {
    const auto& c = out.ranked[i].config;
    EXPECT_TRUE(out.ranked[i].report.fits_in_memory);
    EXPECT_EQ(c.tp * c.pp * c.dp, 8);
    EXPECT_EQ(32 % c.tp, 0);
    EXPECT_LE(c.pp, 16);
    EXPECT_EQ(c.mbs * c.gas * c.dp, 32);
    if (i > 0) {
      EXPECT_GE(out.ranked[i - 1].report.tokens_per_s, out.ranked[i].report.tokens_per_s);
    }
  }
  // The explanation sorts components by |difference|; they are the whole breakdown, so their
  // differences add up to the difference of the two steps.
  const auto gap = explain_gap(out.ranked[0].report, out.ranked[1].report);
  ASSERT_EQ(gap.size(), 12u);
  double explained = 0;
  for (std::size_t i = 0; i < gap.size(); ++i) {
    explained += gap[i].diff_s();
    if (i > 0) EXPECT_GE(std::abs(gap[i - 1].diff_s()), std::abs(gap[i].diff_s()));
  }
  const double gap_s = out.ranked[1].report.step_time_s - out.ranked[0].report.step_time_s;
  EXPECT_NEAR(explained, gap_s, 1e-9 * out.ranked[1].report.step_time_s);
  const std::string text = search_text(o, out);
  EXPECT_NE(text.find("why #1 beat #2"), std::string::npos) << text;
  const json j = search_json(o, out);
  EXPECT_EQ(j["top"].size(), std::min<std::size_t>(5, out.ranked.size()));
  // Same answer on one thread.
  o.jobs = 1;
  EXPECT_EQ(search_json(o, run_search(o)).dump(), j.dump());
}

// The pruned search's top equals the exhaustive one's, layout for layout and bit for bit; the
// memory screen drops no layout that fits when simulated in full.
void expect_pruned_equals_exhaustive(SearchOptions o, const std::string& what) {
  SCOPED_TRACE(what);
  o.exhaustive = true;
  const SearchOutcome ex = run_search(o);
  o.exhaustive = false;
  const SearchOutcome pr = run_search(o);
  ASSERT_EQ(pr.all.size(), ex.all.size());
  const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(o.top), ex.ranked.size());
  ASSERT_GE(n, 2u) << "a case must rank at least two layouts";
  ASSERT_GE(pr.ranked.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(key_of(pr.ranked[i].config), key_of(ex.ranked[i].config)) << "rank " << i + 1;
    EXPECT_EQ(pr.ranked[i].report.step_time_s, ex.ranked[i].report.step_time_s);
    EXPECT_EQ(pr.ranked[i].report.memory.peak, ex.ranked[i].report.memory.peak);
    EXPECT_EQ(pr.ranked[i].report.device_peak, ex.ranked[i].report.device_peak);
    EXPECT_EQ(pr.ranked[i].report.fingerprint, ex.ranked[i].report.fingerprint);
    EXPECT_EQ(pr.ranked[i].bottleneck.text(), ex.ranked[i].bottleneck.text());
  }
  EXPECT_EQ(search_text(o, pr).substr(search_text(o, pr).find("rank")),
            search_text(o, ex).substr(search_text(o, ex).find("rank")));
  for (std::size_t i = 0; i < ex.all.size(); ++i) {
    SCOPED_TRACE(key_of(ex.all[i]));
    EXPECT_EQ(pr.verdicts[i] == Verdict::Invalid, ex.verdicts[i] == Verdict::Invalid);
    // Conservative screen: what it drops does not fit in the full simulation either.
    if (pr.verdicts[i] == Verdict::DoesNotFit) {
      EXPECT_EQ(ex.verdicts[i], Verdict::DoesNotFit);
    }
    // And a layout simulated in full by both is judged the same.
    if (pr.verdicts[i] == Verdict::Simulated) {
      EXPECT_EQ(ex.verdicts[i], Verdict::Simulated);
    }
  }
  EXPECT_EQ(ex.pruned, 0u);
  EXPECT_GT(pr.pruned, 0u) << "nothing pruned: the case does not test the pruning";
  EXPECT_EQ(pr.candidates, pr.invalid + pr.does_not_fit + pr.pruned + pr.simulated);
  EXPECT_EQ(ex.candidates, ex.invalid + ex.does_not_fit + ex.simulated);
}

TEST(SearchPruning, EqualsExhaustiveOnOneH100Node) {
  expect_pruned_equals_exhaustive(llama7b_one_node(), "llama2-7b, 8 H100, ZeRO 1 and 3");
}

TEST(SearchPruning, EqualsExhaustiveOverExpertParallelDegrees) {
  // Mixtral 8x7B on 16 H100: ep 1-8 at every split; most layouts do not fit.
  SearchOptions o = search_of("mixtral-8x7b", "dgx-h100", 2, 64);
  o.zero_stages = {1};
  o.top = 5;
  expect_pruned_equals_exhaustive(o, "mixtral-8x7b, 16 H100, ep searched");
}

TEST(SearchPruning, EqualsExhaustiveWhereMemoryIsTightAndPipelinesMatter) {
  // 13B on 40 GB A100s: most layouts do not fit, the fast ones pipeline.
  SearchOptions o = search_of("llama2-13b", "dgx-a100-40gb", 2, 64);
  o.zero_stages = {1, 2};
  o.max_tp = 4;
  o.top = 4;
  expect_pruned_equals_exhaustive(o, "llama2-13b, 16 A100-40GB");
}

TEST(SearchPruning, EqualsExhaustiveWithHeadroomShorterSequencesAndAnotherNetwork) {
  // The estimate runs on the analytical network, the ranking on alpha-beta: the margin adapts.
  SearchOptions o = llama7b_one_node();
  o.memory_headroom = 0.25;
  o.seq_length = 2048;
  o.sets = {"sim.network=alpha-beta"};
  o.zero_stages = {0, 2};
  expect_pruned_equals_exhaustive(o, "headroom 25 %, 2048 tokens, alpha-beta");
}

TEST(SearchProgress, ResultsIdenticalWithProgressShownAndAnyThreadCount) {
  SearchOptions o = llama7b_one_node();
  o.zero_stages = {1};
  o.jobs = 1;
  const SearchOutcome quiet = run_search(o);
  SearchOptions loud = o;
  loud.progress = ProgressMode::Always;  // lines on the test's stderr
  loud.jobs = 3;
  const SearchOutcome shown = run_search(loud);
  EXPECT_EQ(search_json(loud, shown).dump(), search_json(o, quiet).dump());
  EXPECT_EQ(search_text(loud, shown), search_text(o, quiet));
}

TEST(SearchProgress, LineGoesToItsStreamOnlyWhenAsked) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress off(3, "test", ProgressMode::Off, f);
    off.update(3);
    off.finish();
    // Not a terminal: Terminal mode stays silent as well.
    Progress term(3, "test", ProgressMode::Terminal, f);
    term.update(3);
    term.finish();
  }
  EXPECT_EQ(std::ftell(f), 0L);
  Progress on(3, "test", ProgressMode::Always, f);
  on.update(2, "best 1");
  on.update(3, "best 2");
  on.finish();
  std::rewind(f);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;  // a log gets whole lines
  EXPECT_NE(text.find("3/3"), std::string::npos) << text;  // the last state, at finish
  EXPECT_NE(text.find("best 2"), std::string::npos) << text;
}

TEST(SearchConstraints, EveryCandidateAndResultWithinTheBounds) {
  SearchOptions o = llama7b_one_node();
  o.zero_stages = {1};
  o.max_tp = 2;
  o.max_pp = 2;
  SearchOutcome out = run_search(o);
  ASSERT_FALSE(out.ranked.empty());
  for (const Candidate& c : out.all) {
    EXPECT_LE(c.tp, 2);
    EXPECT_LE(c.pp, 2);
  }
  o.max_tp = o.max_pp = 0;
  o.tp = 2;
  o.pp = 2;
  out = run_search(o);
  ASSERT_FALSE(out.ranked.empty());
  for (const Candidate& c : out.all) {
    EXPECT_EQ(c.tp, 2);
    EXPECT_EQ(c.pp, 2);
    EXPECT_EQ(c.dp, 2);
  }
  for (int z : {1, 3}) {
    o = llama7b_one_node();
    o.zero_stages = {z};
    for (const Candidate& c : run_search(o).all) EXPECT_EQ(c.zero, z);
  }
}

TEST(SearchConstraints, SequenceLengthIsTheStepsTokens) {
  SearchOptions o = llama7b_one_node();
  o.zero_stages = {1};
  o.top = 3;
  o.seq_length = 1024;
  const SearchOutcome out = run_search(o);
  ASSERT_FALSE(out.ranked.empty());
  for (const SearchResult& r : out.ranked) {
    EXPECT_NEAR(r.report.tokens_per_s * r.report.step_time_s, 32.0 * 1024, 1e-6);
  }
  EXPECT_EQ(search_json(o, out)["constraints"]["seq_length"], 1024);
}

TEST(SearchConstraints, HeadroomIsRespected) {
  SearchOptions o = llama7b_one_node();
  o.top = 50;
  const SearchOutcome plain = run_search(o);
  o.memory_headroom = 0.3;
  const SearchOutcome tight = run_search(o);
  const std::int64_t hbm = plain.memory_limit;
  EXPECT_EQ(tight.memory_limit,
            static_cast<std::int64_t>(std::floor(0.7 * static_cast<double>(hbm))));
  ASSERT_FALSE(tight.ranked.empty());
  for (const SearchResult& r : tight.ranked) EXPECT_LE(r.report.device_peak, tight.memory_limit);
  // Some layout of the plain search fits the GPU but not the headroom: it is counted as such.
  bool squeezed = false;
  for (const SearchResult& r : plain.ranked) squeezed |= r.report.device_peak > tight.memory_limit;
  ASSERT_TRUE(squeezed);
  EXPECT_GT(tight.fit_without_headroom, 0u);
  EXPECT_GT(tight.does_not_fit, plain.does_not_fit);
}

void expect_refused(const SearchOptions& o, const std::string& flag, const std::string& says) {
  try {
    run_search(o);
    ADD_FAILURE() << "accepted; expected an error naming " << flag;
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), flag) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(SearchConstraints, ImpossibleOnesAreRefusedNamingTheFlag) {
  SearchOptions o = llama7b_one_node();  // 32 heads, 32 layers, 8 GPUs, batch 32
  auto with = [&](auto edit) {
    SearchOptions x = o;
    edit(x);
    return x;
  };
  expect_refused(with([](SearchOptions& x) { x.tp = 3; }), "--tp", "32 attention heads");
  expect_refused(with([](SearchOptions& x) { x.pp = 3; }), "--pp", "32 layers");
  expect_refused(with([](SearchOptions& x) { x.pp = 32; }), "--pp",
                 "must divide the model's 32 layers and the 8 GPUs; allowed: 1, 2, 4, 8");
  expect_refused(with([](SearchOptions& x) { x.tp = 4, x.max_tp = 2; }), "--tp", "--max-tp 2");
  expect_refused(with([](SearchOptions& x) { x.tp = 8, x.pp = 2; }), "--tp",
                 "--tp 8, --pp 2 together leave no layout");
  expect_refused(with([](SearchOptions& x) { x.tp = 8, x.max_pp = 1, x.pp = 2; }), "--pp",
                 "2 exceeds --max-pp 1");
  // dp = 8 would have to divide a batch of 4: only a larger tp or pp helps.
  expect_refused(with([](SearchOptions& x) { x.global_batch_size = 4, x.max_tp = x.max_pp = 1; }),
                 "--max-tp", "--max-tp 1, --max-pp 1 together leave no layout");
  expect_refused(with([](SearchOptions& x) { x.global_batch_size = 2, x.tp = 1, x.max_pp = 2; }),
                 "--tp", "--tp 1, --max-pp 2 together");
  // On 16 GPUs a batch of 1 needs tp x pp = 16: TP 8 inside a node and PP 2; only --max-pp is
  // in the way.
  expect_refused(with([](SearchOptions& x) { x.nodes = 2, x.global_batch_size = 1, x.tp = 8,
                                             x.max_pp = 1; }),
                 "--max-pp", "--max-pp 1 leaves no layout: with 16 GPUs and a global batch of 1");
  // 256 GPUs: tp <= 8 and pp <= 16 leave dp >= 2, which cannot divide a batch of 1.
  expect_refused(with([](SearchOptions& x) { x.nodes = 32, x.global_batch_size = 1; }), "--gbs",
                 "no layout");
  expect_refused(with([](SearchOptions& x) { x.max_tp = -1; }), "--max-tp", "at least 1");
  expect_refused(with([](SearchOptions& x) { x.seq_length = -5; }), "--seq-length", "at least 1");
  expect_refused(with([](SearchOptions& x) { x.memory_headroom = 1; }), "--memory-headroom", "100");
  expect_refused(with([](SearchOptions& x) { x.memory_headroom = 0.97; }), "--memory-headroom",
                 "leaves no layout that fits");
  expect_refused(with([](SearchOptions& x) { x.zero_stages = {}; }), "--zero-stages",
                 "at least one");
  // --set of what the search varies or owns: the flag to use instead.
  for (const auto& [set, instead] : std::vector<std::pair<std::string, std::string>>{
           {"parallel.tp=2", "--tp"},
           {"parallel.pp=2", "--pp"},
           {"zero.stage=2", "--zero-stages"},
           {"training.micro_batch_size=2", "1, 2, 4 and 8"},
           {"parallel.recompute=full", "none, selective and full"},
           {"parallel.virtual_stages=2", "1 and 2"},
           {"training.global_batch_size=64", "--gbs"},
           {"cluster.nodes=2", "--nodes"},
           {"model=llama2-13b", "--model"},
           {"sim.allow_oom=true", "--memory-headroom"}}) {
    expect_refused(with([&](SearchOptions& x) { x.sets = {set}; }), "--set", instead);
  }
  expect_refused(
      with([](SearchOptions& x) { x.seq_length = 2048, x.sets = {"model.seq_length=1024"}; }),
      "--set", "--seq-length");
  // A key kept fixed whose value every layout rejects: its own error (3 divides no DP degree
  // of 8 GPUs).
  expect_refused(with([](SearchOptions& x) { x.sets = {"zero.mics_shard_size=3"}; }),
                 "zero.mics_shard_size", "every candidate layout was rejected");
}

// A context-parallel degree given with --set holds for every layout: dp = GPUs / (tp x pp x cp),
// the global batch is dp x micro-batch x steps, and each result passes keys and values around
// its CP ring; a degree that does not divide the GPUs is refused on the scenario's key.
TEST(SearchConstraints, ContextParallelismIsKeptFixed) {
  SearchOptions o = llama7b_one_node();
  o.zero_stages = {1};
  o.top = 3;
  o.sets = {"parallel.framework=megatron", "parallel.cp=2"};
  const SearchOutcome out = run_search(o);
  EXPECT_EQ(out.cp, 2);
  ASSERT_FALSE(out.ranked.empty());
  for (const Candidate& c : out.all) EXPECT_EQ(c.tp * c.pp * c.dp * 2, 8);
  for (const SearchResult& r : out.ranked) {
    EXPECT_GT(r.report.comm_bytes_per_gpu[4], 0);
    EXPECT_NEAR(r.report.tokens_per_s * r.report.step_time_s, 32.0 * 4096, 1e-6);
  }
  EXPECT_EQ(search_json(o, out)["constraints"]["cp"], 2);
  EXPECT_NE(search_text(o, out).find("global batch 32, cp 2"), std::string::npos);
  o.sets = {"parallel.framework=megatron", "parallel.cp=3"};
  expect_refused(o, "parallel", "every candidate layout was rejected");
}

// An expert-parallel degree given with --set holds for every layout: each result exchanges its
// tokens over EP groups; a degree no layout takes is refused on its own key.
TEST(SearchConstraints, ExpertParallelismIsKeptFixed) {
  SearchOptions o = search_of("mixtral-8x7b", "dgx-h100", 2, 32);
  o.zero_stages = {1};
  o.tp = 1;
  o.pp = 1;
  o.sets = {"parallel.ep=8"};
  const SearchOutcome out = run_search(o);
  ASSERT_FALSE(out.ranked.empty());
  for (const SearchResult& r : out.ranked) EXPECT_GT(r.report.comm_bytes_per_gpu[3], 0);
  o.sets = {"parallel.ep=3"};
  expect_refused(o, "parallel.ep", "every candidate layout was rejected");
}

// An MoE model's expert-parallel degree is searched: every layout's ep divides the experts and
// the data-parallel ranks. Mixtral 8x7B's 46.7B parameters take 93 GB in bf16, more than an H100
// holds, so at tp 1 and pp 1 only layouts that spread the experts (ep >= 2) can fit.
TEST(Search, AnMoeModelsExpertParallelismIsSearched) {
  SearchOptions o = search_of("mixtral-8x7b", "dgx-h100", 2, 32);
  o.zero_stages = {1};
  o.tp = 1;
  o.pp = 1;
  o.top = 3;
  const SearchOutcome out = run_search(o);
  EXPECT_TRUE(out.varies_ep);
  std::vector<int> eps;
  for (const Candidate& c : out.all) {
    EXPECT_EQ(8 % c.ep, 0);
    EXPECT_EQ(c.dp % c.ep, 0);
    if (std::find(eps.begin(), eps.end(), c.ep) == eps.end()) eps.push_back(c.ep);
  }
  std::sort(eps.begin(), eps.end());
  EXPECT_EQ(eps, (std::vector<int>{1, 2, 4, 8}));
  ASSERT_FALSE(out.ranked.empty());
  for (const SearchResult& r : out.ranked) {
    EXPECT_GE(r.config.ep, 2);
    EXPECT_GT(r.report.comm_bytes_per_gpu[3], 0);  // tokens exchanged over the EP groups
  }
  const json j = search_json(o, out);
  EXPECT_EQ(j["constraints"]["ep_searched"], true);
  EXPECT_EQ(j["top"][0]["ep"], out.ranked[0].config.ep);
  EXPECT_NE(search_text(o, out).find(" ep zero"), std::string::npos);
  // A dense model keeps ep 1 and its table as it was.
  SearchOptions dense = llama7b_one_node();
  dense.top = 1;
  const SearchOutcome d = run_search(dense);
  EXPECT_FALSE(d.varies_ep);
  for (const Candidate& c : d.all) EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(search_text(dense, d).find(" ep zero"), std::string::npos);
}

TEST(SearchHeadroom, PercentagesAndFractions) {
  EXPECT_DOUBLE_EQ(parse_headroom("10%"), 0.10);
  EXPECT_DOUBLE_EQ(parse_headroom("0.1"), 0.1);
  EXPECT_DOUBLE_EQ(parse_headroom("0"), 0.0);
  EXPECT_DOUBLE_EQ(parse_headroom("12.5%"), 0.125);
  for (const char* bad : {"10", "100%", "-5%", "abc", "", "%", "0.1x", "nan"}) {
    try {
      parse_headroom(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key_path(), "--memory-headroom") << bad;
    }
  }
}

// What the inputs take otherwise than written (a Hugging Face config's defaulted training
// length) is in the search's text and in each ranked layout's JSON.
TEST(Search, InputWarningsAreInItsTextAndJson) {
  const std::string config = std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/llama-2-7b.json";
  SearchOptions o = search_of(config.c_str(), "dgx-h100", 1, 32);
  o.zero_stages = {1};
  o.tp = 1;
  o.top = 2;
  const SearchOutcome out = run_search(o);
  ASSERT_FALSE(out.ranked.empty());
  const std::string key = "model(" + config + ").seq_length";
  EXPECT_NE(search_text(o, out).find(key), std::string::npos);
  const json j = search_json(o, out);
  EXPECT_EQ(j["top"][0]["warnings"][0]["key"], key);
}

TEST(Bottleneck, InTheSearchsTextAndJson) {
  SearchOptions o = llama7b_one_node();
  o.zero_stages = {1};
  o.top = 3;
  const SearchOutcome out = run_search(o);
  const std::string text = search_text(o, out);
  EXPECT_NE(text.find("bottlenecks:"), std::string::npos) << text;
  const json j = search_json(o, out);
  for (const json& t : j["top"]) {
    EXPECT_TRUE(t["bottleneck"].contains("component"));
    EXPECT_NE(text.find(t["bottleneck"]["text"].get<std::string>()), std::string::npos);
  }
}

}  // namespace
}  // namespace zerosim::explore
