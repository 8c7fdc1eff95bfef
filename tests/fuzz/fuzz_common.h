#pragma once
// What the libFuzzer targets share: turning the input bytes into JSON, the crash rule, and the
// size limit below which a resolved scenario is also simulated.
//
// The crash rule (sim/core/error.h): bad input must come back as an InputError naming the key
// path. Any other exception escaping a reader (std::out_of_range, nlohmann's type_error,
// std::invalid_argument, the engine's std::logic_error, ...) is a bug, so the target prints it
// and aborts, which libFuzzer records as a crash with the input that caused it. ASan/UBSan
// reports and timeouts (-timeout) are crashes too.
//
// The input is a JSON document. Inputs nlohmann::json itself rejects (syntax errors, and numbers
// out of double range, which it reports as out_of_range 406) never reach the readers and are
// skipped: the CLI's file reader is covered by tests/edges instead.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/core/error.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim::fuzz {

using json = nlohmann::json;

inline std::optional<json> parse_input(const std::uint8_t* data, std::size_t size) {
  try {
    return json::parse(data, data + size);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// Bugs already reported, each with its reproducer in tests/edges (a test skipped with a "BUG:"
// message). Listed so that a campaign goes on looking for new bugs; delete an entry, and the
// skip of its reproducer, once the bug is fixed.
inline bool known_bug(const std::exception&) { return false; }

// Runs `f`; InputError is a reader's answer to bad input, anything else escaping is a bug.
template <class F>
void guarded(const char* target, F&& f) {
  try {
    f();
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    if (known_bug(e)) return;
    std::fprintf(stderr, "%s: exception other than InputError escaped: %s\n", target, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "%s: non-standard exception escaped\n", target);
    std::abort();
  }
}

// Scenarios small enough to simulate on every input (a few milliseconds at most): the plan's
// op count grows with GPUs (sim.ranks = all), layers, micro-batches and virtual stages.
inline bool small_enough(const Scenario& s) {
  return s.num_gpus() <= 64 && s.model.num_layers <= 8 &&
         s.training.gradient_accumulation_steps <= 64 && s.parallel.virtual_stages <= 8;
}

// Simulates a resolved scenario when it is small: the timed step and the memory-only replay.
inline void simulate_if_small(const Scenario& s) {
  if (!small_enough(s)) return;
  (void)simulate_step(s);
  (void)memory_report(s);
}

// The scratch directory of this process: hf.json (a small Llama-style config) and not-json.json.
// Fuzzed input never reads the machine's files (/dev/zero would read forever): model values that
// name a file are flattened into this directory (see confine_paths).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/zerosim-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      std::perror("zerosim fuzz: scratch directory");
      std::abort();
    }
    const std::string d = tmpl;
    std::ofstream(d + "/hf.json") << R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 172, "num_attention_heads": 4, "num_key_value_heads": 2,
      "num_hidden_layers": 2, "max_position_embeddings": 128, "vocab_size": 1000,
      "hidden_act": "silu", "tie_word_embeddings": false})";
    std::ofstream(d + "/not-json.json") << "{\"hidden_size\": ";
    return d;
  }();
  return dir;
}

// Rewrites the `model` value (a path string, or an object's hf_config) of a scenario or case to
// name a file of the scratch directory: "a/b/hf.json" -> "<scratch>/a_b_hf.json". Only strings
// the model reader would take for a path (a '/' or a ".json" ending) are rewritten, so preset
// names stay as they are.
inline void confine_paths(json& doc) {
  auto confine = [](json& v) {
    if (!v.is_string()) return;
    std::string s = v.get<std::string>();
    const bool path = s.find('/') != std::string::npos ||
                      (s.size() >= 5 && s.compare(s.size() - 5, 5, ".json") == 0);
    if (!path) return;
    for (char& c : s) {
      if (c == '/') c = '_';
    }
    v = scratch_dir() + "/" + s;
  };
  if (!doc.is_object()) return;
  auto m = doc.find("model");
  if (m == doc.end()) return;
  if (m->is_string()) confine(*m);
  if (m->is_object()) {
    auto h = m->find("hf_config");
    if (h != m->end()) confine(*h);
  }
}

}  // namespace zerosim::fuzz
