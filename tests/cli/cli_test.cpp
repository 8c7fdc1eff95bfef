// The `zerosim` binary end to end: every bad input exits with status 2, prints one line on
// stderr naming the key path, and leaves no output file; good runs print a summary, a JSON
// report with stable keys that reproduces from its own echoed scenario, and a Chrome trace.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct RunResult {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// A fresh working directory with the input files the cases below name.
class CliDir {
 public:
  CliDir() {
    std::string tmpl = (fs::path(::testing::TempDir()) / "zerosim_cli_XXXXXX").string();
    dir_ = fs::path(::mkdtemp(tmpl.data()));
    write(dir_ / "bad.json", "{\"model\": \"llama2-7b\",");
    write(dir_ / "unknown_top.json", R"({"modle": "llama2-7b"})");
    write(dir_ / "unknown_nested.json", R"({"zero": {"stag": 2}})");
    write(dir_ / "wrong_type.json", R"({"zero": {"stage": "two"}})");
    // 6 heads cannot be split over tp = 4 (8 GPUs, so tp divides the cluster).
    write(dir_ / "heads.json",
          R"({"model": {"num_layers": 2, "hidden_size": 96, "num_attention_heads": 6,
                        "vocab_size": 100, "seq_length": 64},
              "cluster": {"preset": "dgx-a100-80gb", "num_gpus": 8},
              "parallel": {"tp": 4}})");
    write(dir_ / "ds_bad.json", "{\"zero_optimization\": {\"stage\": 2}");
    // A NUL and a newline inside a value: the message stays one whole line.
    write(dir_ / "control_chars.json", R"({"parallel": {"framework": "meg\u0000a\ntron"}})");
    write(dir_ / "ds_unknown.json", R"({"zero_optimization": {"stage": 2, "overlap_com": true}})");
    write(dir_ / "ds_both.json", R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})");
    write(dir_ / "tiny.json",
          R"({"model": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                        "vocab_size": 1000, "seq_length": 128},
              "cluster": {"preset": "dgx-a100-80gb", "nodes": 2, "nic_bandwidth": "100Gbps"},
              "training": {"micro_batch_size": 2, "gradient_accumulation_steps": 3},
              "parallel": {"tp": 2},
              "zero": {"stage": 3, "reduce_bucket_size": "auto"}})");
    for (const auto& e : fs::directory_iterator(dir_)) inputs_.insert(e.path().filename());
  }
  ~CliDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& path() const { return dir_; }

  // Runs `zerosim <args>` in this directory; args are shell words.
  RunResult run(const std::string& args) const {
    const std::string cmd =
        "cd '" + dir_.string() + "' && '" ZEROSIM_BIN "' " + args + " > .stdout 2> .stderr";
    RunResult r;
    const int raw = std::system(cmd.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(dir_ / ".stdout");
    r.err = slurp(dir_ / ".stderr");
    fs::remove(dir_ / ".stdout");
    fs::remove(dir_ / ".stderr");
    return r;
  }
  // Files the run created (anything besides the inputs).
  std::set<std::string> created() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (!inputs_.count(e.path().filename())) out.insert(e.path().filename().string());
    }
    return out;
  }

 private:
  fs::path dir_;
  std::set<fs::path> inputs_;
};

// ---- bad input -----------------------------------------------------------------------------

struct BadInput {
  const char* id;
  const char* args;
  const char* key;        // the key path stderr must name
  const char* also = "";  // another fragment stderr must hold (e.g. "did you mean")
};

const BadInput kBadInputs[] = {
    {"malformed_scenario_json", "simulate bad.json", "scenario", "not valid JSON"},
    {"plan_negative_rank", "plan tiny.json --rank=-1 --out plan.json", "--rank", "leave --rank out"},
    {"unknown_top_level_key", "simulate unknown_top.json", "modle", "did you mean 'model'"},
    {"unknown_nested_key", "simulate unknown_nested.json", "zero.stag", "did you mean 'stage'"},
    {"wrong_type", "simulate wrong_type.json", "zero.stage"},
    {"micro_batch_zero_set", "simulate --set training.micro_batch_size=0",
     "training.micro_batch_size"},
    {"micro_batch_zero_flag", "simulate --mbs 0", "training.micro_batch_size"},
    {"nodes_negative", "simulate --nodes -1", "cluster.nodes"},
    {"nodes_zero_flag", "simulate --nodes 0", "cluster.nodes"},
    {"tp_zero_flag", "simulate --tp 0", "parallel.tp"},
    {"nic_bandwidth_negative", "simulate --set cluster.nic_bandwidth=-5Gbps",
     "cluster.nic_bandwidth"},
    {"bandwidth_bad_unit", "simulate --set cluster.nic_bandwidth=400GiB", "cluster.nic_bandwidth",
     "unit"},
    {"dp_times_tp_not_gpus", "simulate --set parallel.dp=3", "parallel.dp"},
    {"heads_not_divisible_by_tp", "simulate heads.json", "parallel.tp"},
    {"batch_not_divisible", "simulate --gbs 100", "training.global_batch_size"},
    {"batch_inconsistent", "simulate --mbs 2 --gas 4 --gbs 100", "training.global_batch_size"},
    {"zero_stage_out_of_range", "simulate --zero 5", "zero.stage"},
    {"negative_bucket", "simulate --set zero.reduce_bucket_size=-1", "zero.reduce_bucket_size"},
    {"unknown_set_key", "simulate --set zero.stagee=2", "zero.stagee", "did you mean"},
    {"unknown_model_preset", "simulate --model nosuch-7b", "model"},
    {"unknown_cluster_preset", "simulate --cluster nosuch-cluster", "cluster.preset"},
    {"missing_scenario_file", "simulate missing.json", "scenario", "missing.json"},
    {"missing_hf_config", "simulate --model nodir/config.json", "model", "nodir/config.json"},
    {"malformed_ds_config", "simulate --deepspeed ds_bad.json", "--deepspeed"},
    {"unknown_ds_zero_key", "simulate --deepspeed ds_unknown.json", "zero_optimization.overlap_com",
     "did you mean 'overlap_comm'"},
    {"fp16_and_bf16", "simulate --deepspeed ds_both.json", "fp16", "bf16"},
    {"control_characters_in_a_value", "simulate control_chars.json", "parallel.framework",
     "'meg\\u0000a\\u000atron'"},
    {"does_not_fit", "simulate --model gpt3-175b --zero 0 --tp 1 --pp 1 --set parallel.virtual_stages=1 --nodes 2 --gbs 32", "memory", "--allow-oom"},
    {"memory_command_bad_key", "memory --set zero.stage=9", "zero.stage"},
    {"set_without_equals", "simulate --set zero.stage", "--set", "KEY=VALUE"},
    {"unknown_subcommand", "frobnicate", "frobnicate"},
    {"unknown_list_kind", "list foo", "list", "foo"},
    // tiny.json: 16 GPUs, TP 2, folded to the first data-parallel replica (ranks 0 and 1).
    {"trace_ranks_syntax", "simulate tiny.json --trace-ranks 0-x", "--trace-ranks", "0-x"},
    {"trace_ranks_backwards", "simulate tiny.json --trace-ranks 7-3", "--trace-ranks", "backwards"},
    {"trace_ranks_beyond_cluster", "simulate tiny.json --trace-ranks 0,16", "--trace-ranks",
     "16 GPUs"},
    {"trace_ranks_folded_away", "simulate tiny.json --trace-ranks 2", "--trace-ranks",
     "sim.ranks=all"},
};

void PrintTo(const BadInput& c, std::ostream* os) { *os << c.id << ": zerosim " << c.args; }

class cliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(cliBadInput, ExitTwoOneLineNamingTheKeyAndNoOutput) {
  const BadInput& c = GetParam();
  CliDir dir;
  std::string args = c.args;
  const bool simulate = args.rfind("simulate", 0) == 0, memory = args.rfind("memory", 0) == 0;
  if (simulate) args += " --json out.json --trace out.trace";
  if (memory) args += " --json out.json";
  RunResult r = dir.run(args);
  EXPECT_EQ(r.status, 2) << args << "\nstderr: " << r.err;
  ASSERT_FALSE(r.err.empty()) << args;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_NE(r.err.find(c.key), std::string::npos) << "no key '" << c.key << "' in: " << r.err;
  EXPECT_NE(r.err.find(c.also), std::string::npos) << "no '" << c.also << "' in: " << r.err;
  EXPECT_TRUE(dir.created().empty()) << args << " left " << *dir.created().begin();
  if (simulate || memory) {
    // The same with the report on stdout: nothing but the error comes out.
    RunResult s = dir.run(std::string(c.args) + " --json -");
    EXPECT_EQ(s.status, 2) << c.args;
    EXPECT_EQ(s.out, "") << c.args;
  }
}

INSTANTIATE_TEST_SUITE_P(cli, cliBadInput, ::testing::ValuesIn(kBadInputs),
                         [](const ::testing::TestParamInfo<BadInput>& i) { return i.param.id; });

TEST(cliBadInputCount, AtLeastTwentyDistinctCases) {
  std::set<std::string> args;
  for (const BadInput& c : kBadInputs) args.insert(c.args);
  EXPECT_GE(args.size(), 20u);
}

// A report that cannot be written is an error (exit 2, one line naming the flag), whether to a
// file, a device or standard output, and a device given as the output stays a device.
TEST(cliBadOutput, FailedWritesExitTwo) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  CliDir dir;
  for (const char* args : {"simulate tiny.json --json /dev/full", "simulate tiny.json --trace /dev/full",
                           "plan tiny.json --out /dev/full"}) {
    RunResult r = dir.run(args);
    EXPECT_EQ(r.status, 2) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find("cannot write '/dev/full'"), std::string::npos) << args << ": " << r.err;
  }
  const int raw = std::system(("cd '" + dir.path().string() + "' && '" ZEROSIM_BIN
                               "' list keys > /dev/full 2> .stderr")
                                  .c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 2);
  EXPECT_NE(slurp(dir.path() / ".stderr").find("cannot write to standard output"), std::string::npos);
  fs::remove(dir.path() / ".stderr");
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  EXPECT_TRUE(dir.created().empty());
}

// ---- good runs -----------------------------------------------------------------------------

TEST(cliOutput, SimulateWithoutArgumentsPrintsASummary) {
  CliDir dir;
  RunResult r = dir.run("simulate");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* line : {"step time", "throughput", "memory per GPU", "peak"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " missing in:\n" << r.out;
  }
  EXPECT_TRUE(dir.created().empty());
}

void expect_number(const json& j, const std::string& key) {
  ASSERT_TRUE(j.contains(key)) << "missing key " << key;
  EXPECT_TRUE(j[key].is_number()) << key << " = " << j[key].dump();
}

TEST(cliOutput, JsonReportOnStdoutHasTheStableKeys) {
  CliDir dir;
  RunResult r = dir.run("simulate --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  json j = json::parse(r.out);  // stdout holds the JSON document and nothing else
  for (const char* k : {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu"})
    expect_number(j, k);
  for (const char* k : {"forward", "backward", "optimizer", "exposed_comm", "bubble", "offload",
                        "comm_overhead", "other"}) {
    expect_number(j["breakdown_s"], k);
  }
  for (const char* k : {"params", "grads", "optimizer_states", "activations", "buffers", "peak"}) {
    expect_number(j["memory_per_gpu_bytes"], k);
  }
  for (const char* k : {"dp", "tp", "pp"}) expect_number(j["comm_bytes_per_gpu"], k);
  expect_number(j["model"], "params");
  ASSERT_TRUE(j.contains("fits_in_memory"));
  EXPECT_TRUE(j["fits_in_memory"].is_boolean());
  ASSERT_TRUE(j.contains("scenario"));
  EXPECT_TRUE(j["scenario"].is_object());
  // Definitions: tokens per second = global batch x sequence length / step time.
  const json& sc = j["scenario"];
  const double tokens =
      sc["training"]["global_batch_size"].get<double>() * sc["model"]["seq_length"].get<double>();
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["step_time_s"].get<double>(), tokens,
              1e-9 * tokens);
  EXPECT_GE(j["memory_per_gpu_bytes"]["peak"].get<double>(),
            j["memory_per_gpu_bytes"]["params"].get<double>());
}

TEST(cliOutput, SameInputTwiceGivesByteIdenticalJson) {
  CliDir dir;
  ASSERT_EQ(dir.run("simulate tiny.json --json a.json").status, 0);
  ASSERT_EQ(dir.run("simulate tiny.json --json b.json").status, 0);
  const std::string a = slurp(dir.path() / "a.json"), b = slurp(dir.path() / "b.json");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

TEST(cliOutput, EchoedScenarioReproducesTheReport) {
  CliDir dir;
  for (const char* input : {"", "tiny.json"}) {
    ASSERT_EQ(dir.run(std::string("simulate ") + input + " --json first.json").status, 0) << input;
    const json first = json::parse(slurp(dir.path() / "first.json"));
    write(dir.path() / "echo.json", first["scenario"].dump(2));
    RunResult r = dir.run("simulate echo.json --json second.json");
    ASSERT_EQ(r.status, 0) << input << ": " << r.err;
    json second = json::parse(slurp(dir.path() / "second.json"));
    EXPECT_EQ(second["fingerprint"], first["fingerprint"]) << input;
    // The echo holds resolved values: what the first run reported about its input (an "auto"
    // filled in) has nothing left to report the second time.
    EXPECT_TRUE(second["warnings"].empty()) << second["warnings"].dump();
    json expected = first;
    expected["warnings"] = json::array();
    EXPECT_EQ(second, expected) << input;
  }
}

// The pids of a trace's complete events, after checking each event's fields.
std::set<int> trace_pids(const json& t) {
  std::set<int> pids;
  EXPECT_TRUE(t.contains("traceEvents") && t["traceEvents"].is_array());
  for (const json& e : t["traceEvents"]) {
    EXPECT_TRUE(e.contains("ph")) << e.dump();
    if (e["ph"] != "X") continue;
    for (const char* k : {"pid", "tid"}) {
      EXPECT_TRUE(e.contains(k) && e[k].is_number_integer()) << e.dump();
    }
    for (const char* k : {"ts", "dur"}) EXPECT_TRUE(e.contains(k) && e[k].is_number()) << e.dump();
    EXPECT_GE(e["dur"].get<double>(), 0) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0) << e.dump();
    EXPECT_TRUE(e.contains("name") && e["name"].is_string()) << e.dump();
    pids.insert(e["pid"].get<int>());
  }
  return pids;
}

TEST(cliOutput, ChromeTraceIsValid) {
  CliDir dir;
  RunResult r = dir.run("simulate tiny.json --trace trace.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json t = json::parse(slurp(dir.path() / "trace.json"));
  // tiny.json: 2 nodes x 8 GPUs = 16 ranks, tp = 2, one pipeline stage: rank 0 by default.
  EXPECT_EQ(trace_pids(t), (std::set<int>{0}));
  EXPECT_EQ(t["otherData"]["traced_ranks"], json::array({0}));
  EXPECT_EQ(t["otherData"]["num_gpus"], 16);
  EXPECT_NE(r.err.find("trace trace.json holds 1 of 16 ranks (0: the first rank of each pipeline "
                       "stage"),
            std::string::npos)
      << r.err;
}

TEST(cliTraceRanks, DefaultIsTheFirstRankOfEachPipelineStageByClusterRank) {
  CliDir dir;
  // 16 GPUs as TP 2 x PP 2 x DP 4: Megatron's order puts stage 1 at cluster ranks 8-15. Folded,
  // the plan holds plan ranks 0-3; the trace numbers them as the GPUs they are.
  RunResult r = dir.run("simulate tiny.json --pp 2 --trace trace.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json t = json::parse(slurp(dir.path() / "trace.json"));
  EXPECT_EQ(trace_pids(t), (std::set<int>{0, 8}));
  std::set<std::string> names;
  for (const json& e : t["traceEvents"]) {
    if (e["name"] == "process_name") names.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(names, (std::set<std::string>{"rank 0", "rank 8"}));
  EXPECT_NE(r.err.find("2 of 16 ranks (0,8:"), std::string::npos) << r.err;
}

TEST(cliTraceRanks, ListsRangesAndAll) {
  CliDir dir;
  RunResult r = dir.run("simulate tiny.json --pp 2 --trace list.json --trace-ranks 9,0-1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(trace_pids(json::parse(slurp(dir.path() / "list.json"))), (std::set<int>{0, 1, 9}));
  EXPECT_NE(r.err.find("3 of 16 ranks (0-1,9: as --trace-ranks asked)"), std::string::npos)
      << r.err;
  // all: every simulated rank, which folded is the first data-parallel replica...
  r = dir.run("simulate tiny.json --pp 2 --trace folded.json --trace-ranks all");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(trace_pids(json::parse(slurp(dir.path() / "folded.json"))),
            (std::set<int>{0, 1, 8, 9}));
  EXPECT_NE(r.err.find("sim.ranks=folded"), std::string::npos) << r.err;
  // ...and unfolded, the full trace of every GPU.
  r = dir.run("simulate tiny.json --pp 2 --set sim.ranks=all --trace full.json --trace-ranks all");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::set<int> pids = trace_pids(json::parse(slurp(dir.path() / "full.json")));
  EXPECT_EQ(pids.size(), 16u);
  EXPECT_EQ(*pids.rbegin(), 15);
  EXPECT_NE(r.err.find("16 of 16 ranks (0-15: every rank)"), std::string::npos) << r.err;
}

TEST(cliTraceRanks, WithoutTraceIsAnError) {
  CliDir dir;
  RunResult r = dir.run("simulate tiny.json --trace-ranks all");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--trace-ranks"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--trace FILE"), std::string::npos) << r.err;
}

// The size a default trace reaches on 32 nodes: llama2-70b, TP 8 x PP 4 x DP 8, 128 micro-batches.
// Every rank's trace was 120 MB; the first rank of each stage is 15 MB.
TEST(cliTraceRanks, DefaultTraceOf32NodesStaysUnder20MB) {
  CliDir dir;
  RunResult r = dir.run("simulate --model llama2-70b --cluster dgx-h100 --nodes 32 --tp 8 --pp 4 "
                        "--zero 1 --gbs 1024 --mbs 1 --trace big.json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto bytes = fs::file_size(dir.path() / "big.json");
  EXPECT_LT(bytes, 20'000'000u);
  EXPECT_GT(bytes, 1'000'000u);  // it still holds the step
  const json t = json::parse(slurp(dir.path() / "big.json"));
  EXPECT_EQ(trace_pids(t), (std::set<int>{0, 64, 128, 192}));
}

// The Blackwell and H100 PCIe presets (and GB200 NVL72 at one rack) simulate a small data-parallel
// step end to end: Llama 3 8B, ZeRO-2, on one node (one rack for GB200).
TEST(cliOutput, NewerClusterPresetsSimulate) {
  CliDir dir;
  for (const char* cluster : {"--cluster dgx-b200 --nodes 1", "--cluster h100-pcie-80gb --nodes 1",
                              "--cluster gb200-nvl72 --nodes 18"}) {
    SCOPED_TRACE(cluster);
    RunResult r = dir.run(std::string("simulate --model llama3-8b ") + cluster +
                          " --zero 2 --mbs 1 --gbs 72 --seq-length 2048 --recompute full --json -");
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_GT(j["step_time_s"].get<double>(), 0);
    EXPECT_GT(j["mfu"].get<double>(), 0);
    EXPECT_LT(j["mfu"].get<double>(), 1);
    EXPECT_TRUE(j["fits_in_memory"].get<bool>());
  }
}

TEST(cliOutput, AllowOomSimulatesWhatDoesNotFit) {
  CliDir dir;
  RunResult r = dir.run("simulate --model gpt3-175b --zero 0 --tp 1 --pp 1 --set parallel.virtual_stages=1 --nodes 2 --gbs 32 --allow-oom --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_FALSE(j["fits_in_memory"].get<bool>());
  EXPECT_GT(j["memory_per_gpu_bytes"]["peak"].get<double>(), j["gpu_memory_bytes"].get<double>());
}

// --seq-length is the flag of training.seq_length: it reaches the model and the echo, and
// `list keys` shows the key.
TEST(cliOutput, SeqLengthFlagSetsTheTrainingLength) {
  CliDir dir;
  RunResult r = dir.run("memory tiny.json --seq-length 64 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["scenario"]["training"]["seq_length"], 64);
  EXPECT_EQ(j["scenario"]["model"]["seq_length"], 64);
  r = dir.run("list keys");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("training.seq_length"), std::string::npos) << r.out;
}

TEST(cliOutput, MemoryCommandReportsWithoutTiming) {
  CliDir dir;
  RunResult r = dir.run("memory tiny.json --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j.contains("memory_per_gpu_bytes"));
  EXPECT_TRUE(j.contains("fits_in_memory"));
  EXPECT_FALSE(j.contains("step_time_s"));
}

}  // namespace

// `zerosim calibrate` checks --grid before it simulates anything: a bad grid is one line naming
// the flag and what it allows, exit 2, nothing on stdout and no --json file.
TEST(cliCalibrate, BadGridExitsTwoBeforeAnyOutput) {
  CliDir dir;
  for (const char* grid : {"0.95:0.70:0.01", "0.70:0.95", "0.70:0.95:0", "0.7:0.9:0.005",
                           "0.70:1.50:0.05", "x"}) {
    RunResult r = dir.run(std::string("calibrate --grid ") + grid + " --json out.json");
    EXPECT_EQ(r.status, 2) << grid << "\nstderr: " << r.err;
    EXPECT_EQ(r.out, "") << grid;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_NE(r.err.find("--grid"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("LO:HI:STEP"), std::string::npos) << r.err;
    EXPECT_TRUE(dir.created().empty()) << grid;
  }
  RunResult j = dir.run("calibrate --jobs -1");
  EXPECT_EQ(j.status, 2);
  EXPECT_NE(j.err.find("--jobs"), std::string::npos) << j.err;
}
