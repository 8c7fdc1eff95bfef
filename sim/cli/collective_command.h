#pragma once
// `zerosim collective`: nccl-tests for the simulated cluster. For each size from -b to -e
// (times -f), the NCCL model's prediction: size, time, algbw and busbw (nccl-tests'
// definitions), NCCL's algorithm, protocol and channel count.
//
//   zerosim collective --cluster dgx-h100 --nodes 4 --op all_reduce -b 8 -e 8G -f 2
//                      [--gpus N | --ranks SPEC] [--algo ring|tree|nvls|nvls_tree|pat|auto]
//                      [--proto LL|LL128|Simple|auto] [--nccl-version 2.21] [--no-nvls]
//                      [--no-launch-overhead] [--no-pipeline] [--cpu intel|amd]
//                      [--fabric] [--oversubscription R] [--nodes-per-leaf P]
//                      [--json FILE|-]
//   zerosim collective --validate FILE [--markdown] [--json FILE|-]
//
// --ranks SPEC: comma-separated ranks and ranges, a range optionally strided: "0-7",
// "0,8,16,24", "0-63:8". The ring follows this order. --fabric routes the collective's flows on
// the cluster's topology and applies the fabric factor (oversubscription, ECMP collisions).
// --validate compares the model with a collectives.json-format file and prints the error table
// (--markdown: the tables of docs/VALIDATION.md).
//
// Bad input throws InputError with key path "collective.<flag>"; main() turns it into exit 2.
#include <string>
#include <vector>

namespace zerosim::cli {

int run_collective_command(const std::vector<std::string>& args);

}  // namespace zerosim::cli
