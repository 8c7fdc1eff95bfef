#pragma once
// `zerosim` subcommands. Each parses its flags, resolves the scenario and calls into sim/; bad
// input surfaces as InputError, which main() turns into one line and exit status 2.
#include <string>
#include <vector>

namespace zerosim::cli {

int cmd_simulate(const std::vector<std::string>& args, bool memory_only);
int cmd_plan(const std::vector<std::string>& args);
int cmd_validate_published(const std::vector<std::string>& args);
int cmd_calibrate(const std::vector<std::string>& args);
int cmd_list(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);

}  // namespace zerosim::cli
