#include <boost/program_options/errors.hpp>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/commands.h"
#include "sim/cli/collective_command.h"
#include "sim/core/error.h"
#include "sim/core/output_file.h"
#include "sim/cli/explore_commands.h"

namespace {

const char* kUsage =
    "usage: zerosim <command> [options]\n"
    "\n"
    "commands:\n"
    "  simulate [SCENARIO.json] [flags]   simulate one training step (summary, --json, --trace)\n"
    "  memory   [SCENARIO.json] [flags]   per-GPU memory and whether it fits, without timing\n"
    "  plan     [SCENARIO.json] --out F   export the op list of one or every rank (JSON)\n"
    "  collective --collective K -b -e .. nccl-tests' flags and table, predicted (NCCL model)\n"
    "  validate-published [--cases F]     simulate published runs, predicted vs measured\n"
    "  calibrate [--grid LO:HI:STEP]      refit the fitted constants, evaluation error before/after\n"
    "  sweep    [SCENARIO.json] --vary ..  cross product of keys to CSV/JSON (mpirun splits)\n"
    "  search   --model M --cluster C ... fastest tp/pp/dp/ZeRO/micro-batch layout, ranked\n"
    "  list     models|clusters|keys      what the scenario can name\n"
    "  bench                              engine speed at DP = 8 .. 4096 (events/s)\n"
    "\n"
    "Run `zerosim <command> --help` for its flags.\n";

// The command's exit status; -1 for an unknown command.
int run(const std::string& command, const std::vector<std::string>& args) {
  if (command == "simulate") return zerosim::cli::cmd_simulate(args, false);
  if (command == "memory") return zerosim::cli::cmd_simulate(args, true);
  if (command == "list") return zerosim::cli::cmd_list(args);
  if (command == "plan") return zerosim::cli::cmd_plan(args);
  if (command == "collective") return zerosim::cli::run_collective_command(args);
  if (command == "validate-published") return zerosim::cli::cmd_validate_published(args);
  if (command == "calibrate") return zerosim::cli::cmd_calibrate(args);
  if (command == "bench") return zerosim::cli::cmd_bench(args);
  if (command == "sweep") return zerosim::cli::cmd_sweep(args);
  if (command == "search") return zerosim::cli::cmd_search(args);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    const int status = run(command, args);
    // What went to standard output must have got there (a closed pipe, a full device).
    if (!zerosim::flush_standard_output()) {
      std::cerr << "zerosim: error: cannot write to standard output\n";
      return 2;
    }
    if (status >= 0) return status;
    std::cerr << "zerosim: error: unknown command '" << command << "'"
              << zerosim::did_you_mean(command, {"simulate", "memory", "plan", "collective", "validate-published", "calibrate", "list", "bench", "sweep", "search"})
              << "; commands: simulate, memory, plan, collective, validate-published, calibrate, list, bench, sweep, search\n";
    return 2;
  } catch (const zerosim::InputError& e) {
    std::cerr << "zerosim: error: " << e.what() << "\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    std::cerr << "zerosim: error: " << e.what() << " (see zerosim " << command << " --help)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "zerosim: internal error: " << e.what() << "\n";
    return 1;
  }
}
