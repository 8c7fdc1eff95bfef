#include "sim/explore/sweep_mpi.h"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <exception>
#include <iostream>
#include <string>

#include "sim/core/error.h"

#ifdef ZEROSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace zerosim::explore {
using json = nlohmann::json;

namespace {

std::vector<std::size_t> indices_of_rank(std::size_t n, int rank, int size) {
  std::vector<std::size_t> idx;
  for (std::size_t i = static_cast<std::size_t>(rank); i < n; i += static_cast<std::size_t>(size)) {
    idx.push_back(i);
  }
  return idx;
}

#ifdef ZEROSIM_HAVE_MPI
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI call failed: ") + what);
}

// Gathers each rank's string on rank 0 (empty vector on the others).
std::vector<std::string> gather_strings(const std::string& mine, int rank, int size) {
  if (mine.size() > static_cast<std::size_t>(INT32_MAX)) {
    throw std::runtime_error("a rank's rows exceed 2 GiB; use more ranks");
  }
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(rank == 0 ? size : 0), displs;
  check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::string all;
  if (rank == 0) {
    displs.resize(size);
    long long total = 0;
    for (int r = 0; r < size; ++r) {
      displs[r] = static_cast<int>(total);
      total += lens[r];
    }
    if (total > INT32_MAX) throw std::runtime_error("gathered rows exceed 2 GiB");
    all.resize(static_cast<std::size_t>(total));
  }
  check(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                    0, MPI_COMM_WORLD),
        "MPI_Gatherv");
  std::vector<std::string> out;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) out.push_back(all.substr(displs[r], lens[r]));
  }
  return out;
}

// MPI_Init_thread .. MPI_Finalize; an exception escaping the sweep aborts every rank.
struct MpiSession {
  MpiSession() {
    int provided = 0;
    int argc = 0;
    char** argv = nullptr;
    check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  }
  ~MpiSession() { MPI_Finalize(); }
};
#endif

}  // namespace

int launched_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 0;
}

bool built_with_mpi() {
#ifdef ZEROSIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

DistributedRows run_sweep_distributed(const json& base, const std::vector<VariedKey>& vary,
                                      int jobs, ProgressMode progress) {
  DistributedRows out;
  const std::size_t n = point_count(vary);
  const int launched = launched_world_size();
#ifdef ZEROSIM_HAVE_MPI
  if (launched > 0) {
    MpiSession session;
    check(MPI_Comm_rank(MPI_COMM_WORLD, &out.rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &out.size), "MPI_Comm_size");
    try {
      const std::vector<std::size_t> mine = indices_of_rank(n, out.rank, out.size);
      std::vector<SweepRow> rows = run_points(base, vary, mine, jobs,
                                                 out.rank == 0 ? progress : ProgressMode::Off);
      std::vector<std::string> parts = gather_strings(rows_to_json(rows).dump(), out.rank, out.size);
      if (out.rank == 0) {
        std::vector<std::vector<SweepRow>> by_rank;
        for (const auto& p : parts) by_rank.push_back(rows_from_json(json::parse(p)));
        out.rows.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t r = i % static_cast<std::size_t>(out.size);
          out.rows.push_back(std::move(by_rank[r].at(i / static_cast<std::size_t>(out.size))));
        }
      }
    } catch (const std::exception& e) {
      std::cerr << "zerosim: internal error on rank " << out.rank << ": " << e.what() << "\n";
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return out;
  }
#else
  if (launched > 1) {
    throw InputError("mpirun", "this zerosim was built without MPI (rebuild with an MPI "
                               "implementation installed) ; run it as one process");
  }
#endif
  out.rows = run_points(base, vary, indices_of_rank(n, 0, 1), jobs, progress);
  return out;
}

}  // namespace zerosim::explore
