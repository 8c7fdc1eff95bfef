#pragma once
// Boost.Program_options parsing shared by the subcommands (sim/cli, sim/explore's commands).
#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace zerosim::cli {

inline boost::program_options::variables_map parse(
    const std::vector<std::string>& args, const boost::program_options::options_description& d,
    const boost::program_options::positional_options_description& pos) {
  namespace po = boost::program_options;
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}

}  // namespace zerosim::cli
