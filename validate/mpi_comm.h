#pragma once
// Comm over MPI: one process per rank (mpirun -np N). Built only when MPI is found
// (ZEROSIM_HAVE_MPI). Every MPI call is checked (ZEROSIM_MPI_CHECK throws CommError with file,
// line, the call and MPI's error string; MPI_COMM_WORLD is switched to MPI_ERRORS_RETURN so errors
// come back as codes instead of killing the job silently).
//
// Results equal ThreadComm's bit for bit: reductions gather every member's input (MPI_Iallgather,
// MPI_Ialltoallv, MPI_Igather) and add them in group order locally instead of trusting MPI's
// reduction order. Before each collective the members exchange a small header (operation, counts,
// root) and refuse mismatched calls. Every wait polls with a deadline (Comm::timeout()); a
// collective that does not finish in time throws CommError naming it; the caller then aborts the
// job (MPI cannot cancel a started collective).
//
// Sub-communicators: groups are packed greedily into layers of disjoint groups and each layer is
// one MPI_Comm_split (color = group id, key = position, so a member's rank in its group's
// communicator is its position).
#include <mpi.h>

#include <string>
#include <vector>

#include "validate/comm.h"

#define ZEROSIM_MPI_CHECK(expr) ::zerosim::validate::mpi_check((expr), #expr, __FILE__, __LINE__)

namespace zerosim::validate {

void mpi_check(int err, const char* expr, const char* file, int line);

// Rank 0 receives every rank's string (in rank order); other ranks get an empty vector.
std::vector<std::string> mpi_gather_strings(const std::string& mine, int root = 0);

// True when this process was started by mpirun/srun (Open MPI, MPICH/PMI or PMIx variables).
bool launched_by_mpi_launcher();

// MPI_Init_thread(FUNNELED) on construction, MPI_Finalize on destruction.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes of this node
  [[noreturn]] static void abort(int code);

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

class MpiComm final : public Comm {
 public:
  // Collective over MPI_COMM_WORLD (every process must construct it with the same groups).
  explicit MpiComm(std::vector<std::vector<int>> groups);
  ~MpiComm() override;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_reduce(int g, std::span<float> data) override;
  void reduce_scatter(int g, std::span<const float> in, std::span<const std::int64_t> counts,
                      std::span<float> out) override;
  void all_gather(int g, std::span<const float> in, std::span<const std::int64_t> counts,
                  std::span<float> out) override;
  void broadcast(int g, int root, std::span<float> data) override;
  void reduce(int g, int root, std::span<const float> in, std::span<float> out) override;
  void all_to_all(int g, std::span<const float> in, std::span<float> out) override;
  void send_recv(int g, int src, int dst, std::span<float> data) override;
  void barrier() override;

  using Comm::all_gather;
  using Comm::reduce_scatter;

 private:
  MPI_Comm comm_of(int g) const;
  void agree(int g, int op, std::span<const std::int64_t> counts, int root);
  void wait(MPI_Request& req, int g, const char* what);

  int rank_ = 0, size_ = 1;
  std::vector<MPI_Comm> comms_;  // per group; MPI_COMM_NULL where this rank is not a member
  std::vector<long long> calls_;  // per group: calls made, for error messages
};

}  // namespace zerosim::validate
