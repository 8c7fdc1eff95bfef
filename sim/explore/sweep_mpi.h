#pragma once
// Sweeps across processes: under `mpirun -np N` (detected from the launcher's environment, so
// the plain binary never touches MPI), point i goes to rank i % N, every rank evaluates its
// points on its own threads, and rank 0 gathers the rows back into point order: the rows are
// exactly those of a single-process run. Without ZEROSIM_HAVE_MPI a multi-process launch is an
// InputError (each process would otherwise write the same file).
#include <vector>

#include "sim/explore/sweep.h"

namespace zerosim::explore {

// The world size the launcher announced (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX/MVAPICH2
// variables), or 0 when not launched by an MPI launcher.
int launched_world_size();

// Whether this binary was built with MPI.
bool built_with_mpi();

struct DistributedRows {
  int rank = 0, size = 1;
  std::vector<SweepRow> rows;  // every point in order on rank 0; empty on the other ranks
};

DistributedRows run_sweep_distributed(const nlohmann::json& base,
                                      const std::vector<VariedKey>& vary, int jobs,
                                      ProgressMode progress);

}  // namespace zerosim::explore
