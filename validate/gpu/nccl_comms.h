#pragma once
// One NCCL communicator per group of the plan, on this process's current CUDA device.
//
// Creation: groups are packed into layers of disjoint groups (as MpiComm does); layer by layer,
// the member at position 0 of each group calls ncclGetUniqueId, the id is broadcast to the
// group's members over the bootstrap Comm (MPI, or the 1-rank in-process world), and each member
// calls ncclCommInitRankConfig with its position as NCCL rank.
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0): no NCCL call can hang the host.
// Every call is followed by wait(), which polls ncclCommGetAsyncError until the call has been
// handled, an error comes back, or the timeout passes; on timeout or error the communicators
// are aborted (ncclCommAbort) and NcclError names the group and what was being done.
#include <nccl.h>

#include <chrono>
#include <string>
#include <vector>

#include "validate/comm.h"

namespace zerosim::validate::gpu {

class NcclComms {
 public:
  NcclComms(Comm& boot, std::chrono::milliseconds timeout);
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  ncclComm_t get(int g) const;  // throws if this rank is not in group g
  bool member(int g) const { return comms_.at(g) != nullptr; }
  int size(int g) const { return sizes_.at(g); }
  int position(int g) const { return positions_.at(g); }

  // Polls group g's communicator until the last call on it has been handled (see above).
  void wait(int g, const std::string& what);
  // Every communicator's asynchronous state, "" when all are fine; for watchdog messages.
  std::string async_errors() const;
  void abort_all() noexcept;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::vector<ncclComm_t> comms_;  // per group; nullptr where not a member
  std::vector<int> sizes_, positions_;
  std::vector<std::string> names_;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
};

}  // namespace zerosim::validate::gpu
