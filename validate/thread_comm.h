#pragma once
// In-process collectives: threads as ranks. A ThreadWorld holds the groups and the rendezvous
// table; each rank's thread talks through its own ThreadComm. Each member stages a copy of its
// input in the call's slot, waits for the others, then computes its own output from the staged
// inputs (sums in group order, comm.h), so no thread reads a buffer another thread may be writing.
//
// If one rank's thread fails, call ThreadWorld::abort(): every rank blocked in (or entering) a
// collective then throws CommError carrying the reason, instead of waiting forever.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "validate/comm.h"

namespace zerosim::validate {

class ThreadWorld {
 public:
  ThreadWorld(int num_ranks, std::vector<std::vector<int>> groups);
  int num_ranks() const { return num_ranks_; }
  const std::vector<std::vector<int>>& groups() const { return groups_; }

  // A rank's handle; its timeout (Comm::set_timeout) starts as the world's.
  std::unique_ptr<Comm> comm(int rank);
  void abort(const std::string& reason);
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  // What a member brings to one call; all members must bring equal descriptions.
  struct Call {
    int op = 0;
    std::vector<std::int64_t> counts;
    int root = -1, src = -1, dst = -1;
    bool operator==(const Call&) const = default;
    std::string describe() const;
  };
  struct Slot {
    Call call;
    bool has_call = false;
    std::vector<std::vector<float>> inputs;  // per group position
    int arrived = 0, departed = 0;
    std::vector<char> here;
    std::string error;
  };

  // Stages `input` as rank's part of its next call on group g and waits (at most `timeout`) for
  // every member. Returns the slot; the caller reads inputs from it, then calls leave().
  std::shared_ptr<Slot> arrive(int rank, int g, const Call& call, std::span<const float> input,
                               std::int64_t& seq, std::chrono::milliseconds timeout);
  void leave(int g, std::int64_t seq, const std::shared_ptr<Slot>& slot);

 private:
  int num_ranks_;
  std::vector<std::vector<int>> groups_;  // the plan's groups, then the world group
  std::chrono::milliseconds timeout_{std::chrono::seconds(120)};
  std::mutex mu_;
  std::condition_variable cv_;
  // (group, src, dst, call number); src = dst = -1 for calls of the whole group.
  using SlotKey = std::tuple<int, int, int, std::int64_t>;
  std::map<SlotKey, std::shared_ptr<Slot>> slots_;
  std::vector<std::map<std::tuple<int, int, int>, std::int64_t>> next_seq_;  // [rank][channel]
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace zerosim::validate
