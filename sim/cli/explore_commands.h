#pragma once
// The `zerosim sweep` and `zerosim search` subcommands (wired in sim/cli/main.cpp).
#include <string>
#include <vector>

namespace zerosim::cli {

int cmd_sweep(const std::vector<std::string>& args);
int cmd_search(const std::vector<std::string>& args);

}  // namespace zerosim::cli
