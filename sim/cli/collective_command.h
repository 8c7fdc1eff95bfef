#pragma once
// `zerosim collective`: nccl-tests for the simulated cluster. It takes nccl-tests' flags with
// their meaning and defaults (-b -e -i -f sizes, -t -g GPUs, -o op, -d datatype, -r root, -G
// graphs; the flags of a real run's measurement are accepted, warned about and ignored) and prints
// nccl-tests' table (nccl-tests' columns and number formats, the layout of the release named by
// --nccl-tests-version), each row the NCCL model's prediction for the size nccl-tests would
// have run, then nccl-tests' footer. A `# zerosim` preamble names the model and tables.
//
//   zerosim collective --collective all_reduce --cluster dgx-h100 --nodes 4 -b 8 -e 8G -f 2
//                      [--nprocs P -t T -g G | --ranks SPEC] [-o sum|...|all] [-d float|...|all]
//                      [-r ROOT] [-G N] [--algo ring|tree|nvls|nvls_tree|pat|auto]
//                      [--proto LL|LL128|Simple|auto] [--nccl-version 2.21] [--no-nvls]
//                      [--no-launch-overhead] [--no-pipeline] [--cpu intel|amd]
//                      [--fabric] [--oversubscription R] [--nodes-per-leaf P]
//                      [--nccl-tests-version V] [--verbose] [--json FILE|-]
//   zerosim collective --validate FILE [--markdown] [--json FILE|-]
//
// --ranks SPEC: comma-separated ranks and ranges, a range optionally strided: "0-7",
// "0,8,16,24", "0-63:8". The ring follows this order. Without --ranks, --nprocs, -t or -g every
// GPU takes part. --fabric routes the collective's flows on the cluster's topology and applies
// the fabric factor (oversubscription, ECMP collisions). --validate compares the model with a
// collectives.json-format file and prints the error table (--markdown: the tables of
// docs/VALIDATION.md).
//
// Bad input throws InputError with key path "collective.<flag>"; main() turns it into exit 2.
#include <string>
#include <vector>

namespace zerosim::cli {

int run_collective_command(const std::vector<std::string>& args);

}  // namespace zerosim::cli
