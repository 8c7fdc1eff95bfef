#pragma once
// Collectives over fp32 host buffers between the ranks of fixed groups: what the CPU backend and
// the ZeRO check run on, implemented in-process (thread_comm.h, threads as ranks) and over MPI
// (mpi_comm.h, one process per rank). The GPU backend uses a Comm only to bootstrap NCCL.
//
// Determinism: every reduction adds the members' inputs in group order,
//     out[i] = ((in_0[i] + in_1[i]) + in_2[i]) + ...
// whatever the implementation or the number of threads, so results are bit-reproducible and equal
// to a single process summing the same vectors in the same order.
//
// Matching: the k-th call a rank makes on group g meets the k-th call of every other member. All
// members must make the same call (operation, counts, root); a mismatch throws CommError on every
// member. A call that does not complete within the timeout throws CommError naming the group,
// the call number and the members that never arrived.
#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace zerosim::validate {

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Comm {
 public:
  explicit Comm(std::vector<std::vector<int>> groups) : groups_(std::move(groups)) {}
  virtual ~Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  virtual int rank() const = 0;  // world rank
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;  // "threads", "mpi"

  // Groups fixed at construction; groups()[g] lists world ranks in group order.
  const std::vector<std::vector<int>>& groups() const { return groups_; }
  int group_size(int g) const { return static_cast<int>(groups_.at(g).size()); }
  int position(int g) const;  // this rank's position in group g; throws if not a member

  // In place: data = sum over members.
  virtual void all_reduce(int g, std::span<float> data) = 0;
  // in: sum(counts) elements, member p's part at offset counts[0] + ... + counts[p-1];
  // out: counts[position] elements, the sum over members of this rank's part.
  virtual void reduce_scatter(int g, std::span<const float> in,
                              std::span<const std::int64_t> counts, std::span<float> out) = 0;
  // in: counts[position] elements; out: sum(counts) elements, member p's input at its offset.
  virtual void all_gather(int g, std::span<const float> in, std::span<const std::int64_t> counts,
                          std::span<float> out) = 0;
  // In place: every member's data becomes the root's (root = a group position).
  virtual void broadcast(int g, int root, std::span<float> data) = 0;
  // out (root only; others may pass an empty span) = sum over members of in.
  virtual void reduce(int g, int root, std::span<const float> in, std::span<float> out) = 0;
  // in and out hold group_size equal chunks; chunk p of in goes to member p, out's chunk p comes
  // from member p.
  virtual void all_to_all(int g, std::span<const float> in, std::span<float> out) = 0;
  // Point to point between two positions of group g: src sends `data`, dst receives into it.
  virtual void send_recv(int g, int src, int dst, std::span<float> data) = 0;
  // Every world rank.
  virtual void barrier() = 0;

  // Equal-count conveniences.
  void reduce_scatter(int g, std::span<const float> in, std::span<float> out);
  void all_gather(int g, std::span<const float> in, std::span<float> out);

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 protected:
  std::vector<std::vector<int>> groups_;
  std::chrono::milliseconds timeout_{std::chrono::seconds(120)};
};

// Sum of `parts` (each of length n) in order into out: the one reduction every Comm uses.
void ordered_sum(const std::vector<const float*>& parts, std::int64_t n, float* out);

// Offsets of each member's part: offsets[p] = counts[0] + ... + counts[p-1]; offsets[size] = total.
std::vector<std::int64_t> prefix_offsets(std::span<const std::int64_t> counts);

}  // namespace zerosim::validate
