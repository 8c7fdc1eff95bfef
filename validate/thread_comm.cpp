#include "validate/thread_comm.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace zerosim::validate {
namespace {

enum CallOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv, kBarrier };
const char* op_name(int op) {
  static const char* names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                "reduce",     "all_to_all",     "send_recv",  "barrier"};
  return names[op];
}

class ThreadComm final : public Comm {
 public:
  ThreadComm(ThreadWorld& world, int rank)
      : Comm(std::vector<std::vector<int>>(world.groups().begin(), world.groups().end() - 1)),
        world_(world),
        rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_.num_ranks(); }
  std::string name() const override { return "threads"; }

  void all_reduce(int g, std::span<float> data) override {
    Call c{kAllReduce, {static_cast<std::int64_t>(data.size())}};
    run(g, c, data, [&](const Slot& s) {
      ordered_sum(parts(s, 0), static_cast<std::int64_t>(data.size()), data.data());
    });
  }
  void reduce_scatter(int g, std::span<const float> in, std::span<const std::int64_t> counts,
                      std::span<float> out) override {
    const auto off = check_counts(g, counts, in.size(), "reduce_scatter in");
    const int p = position(g);
    if (static_cast<std::int64_t>(out.size()) != counts[p]) throw CommError("reduce_scatter: out has the wrong size");
    Call c{kReduceScatter, {counts.begin(), counts.end()}};
    run(g, c, in, [&](const Slot& s) { ordered_sum(parts(s, off[p]), counts[p], out.data()); });
  }
  void all_gather(int g, std::span<const float> in, std::span<const std::int64_t> counts,
                  std::span<float> out) override {
    const auto off = check_counts(g, counts, out.size(), "all_gather out");
    if (static_cast<std::int64_t>(in.size()) != counts[position(g)]) throw CommError("all_gather: in has the wrong size");
    Call c{kAllGather, {counts.begin(), counts.end()}};
    run(g, c, in, [&](const Slot& s) {
      for (std::size_t q = 0; q < s.inputs.size(); ++q) {
        std::copy(s.inputs[q].begin(), s.inputs[q].end(), out.begin() + off[q]);
      }
    });
  }
  void broadcast(int g, int root, std::span<float> data) override {
    Call c{kBroadcast, {static_cast<std::int64_t>(data.size())}, root};
    check_root(g, root);
    run(g, c, data, [&](const Slot& s) {
      std::copy(s.inputs[root].begin(), s.inputs[root].end(), data.begin());
    });
  }
  void reduce(int g, int root, std::span<const float> in, std::span<float> out) override {
    Call c{kReduce, {static_cast<std::int64_t>(in.size())}, root};
    check_root(g, root);
    const bool is_root = position(g) == root;
    if (is_root && out.size() != in.size()) throw CommError("reduce: out has the wrong size at the root");
    run(g, c, in, [&](const Slot& s) {
      if (is_root) ordered_sum(parts(s, 0), static_cast<std::int64_t>(in.size()), out.data());
    });
  }
  void all_to_all(int g, std::span<const float> in, std::span<float> out) override {
    const auto n = static_cast<std::size_t>(group_size(g));
    if (in.size() != out.size() || in.size() % n != 0) {
      throw CommError("all_to_all: in and out must be equal multiples of the group size");
    }
    const std::size_t chunk = in.size() / n;
    const auto p = static_cast<std::size_t>(position(g));
    Call c{kAllToAll, {static_cast<std::int64_t>(in.size())}};
    run(g, c, in, [&](const Slot& s) {
      for (std::size_t q = 0; q < n; ++q) {
        std::copy_n(s.inputs[q].begin() + static_cast<std::ptrdiff_t>(p * chunk), chunk,
                    out.begin() + static_cast<std::ptrdiff_t>(q * chunk));
      }
    });
  }
  void send_recv(int g, int src, int dst, std::span<float> data) override {
    check_root(g, src);
    check_root(g, dst);
    const int p = position(g);
    if (p != src && p != dst) throw CommError("send_recv: this rank is neither the source nor the destination");
    Call c{kSendRecv, {static_cast<std::int64_t>(data.size())}, -1, src, dst};
    // Only the two ends take part: a private sub-group call keyed on the group.
    run(g, c, data, [&](const Slot& s) {
      if (p == dst) std::copy(s.inputs[src].begin(), s.inputs[src].end(), data.begin());
    });
  }
  void barrier() override {
    Call c{kBarrier, {}};
    run(static_cast<int>(world_.groups().size()) - 1, c, {}, [](const Slot&) {});
  }

 private:
  using Call = ThreadWorld::Call;
  using Slot = ThreadWorld::Slot;

  static std::vector<const float*> parts(const Slot& s, std::int64_t offset) {
    std::vector<const float*> p;
    p.reserve(s.inputs.size());
    for (const auto& v : s.inputs) p.push_back(v.data() + offset);
    return p;
  }
  std::vector<std::int64_t> check_counts(int g, std::span<const std::int64_t> counts,
                                         std::size_t total, const char* what) const {
    if (static_cast<int>(counts.size()) != group_size(g)) {
      throw CommError(std::string(what) + ": need one count per member of group " + std::to_string(g));
    }
    auto off = prefix_offsets(counts);
    if (off.back() != static_cast<std::int64_t>(total)) {
      throw CommError(std::string(what) + ": holds " + std::to_string(total) +
                      " elements, the counts add up to " + std::to_string(off.back()));
    }
    return off;
  }
  void check_root(int g, int root) const {
    if (root < 0 || root >= group_size(g)) throw CommError("root/peer position outside the group");
  }
  template <class Fn>
  void run(int g, const Call& c, std::span<const float> input, Fn&& fn) {
    std::int64_t seq = 0;
    auto slot = world_.arrive(rank_, g, c, input, seq, timeout());
    try {
      fn(*slot);
    } catch (...) {
      world_.leave(g, seq, slot);
      throw;
    }
    world_.leave(g, seq, slot);
  }

  ThreadWorld& world_;
  int rank_;
};

}  // namespace

std::string ThreadWorld::Call::describe() const {
  std::ostringstream s;
  s << op_name(op) << "(counts";
  for (auto c : counts) s << " " << c;
  if (root >= 0) s << ", root " << root;
  if (src >= 0) s << ", " << src << "->" << dst;
  s << ")";
  return s.str();
}

ThreadWorld::ThreadWorld(int num_ranks, std::vector<std::vector<int>> groups)
    : num_ranks_(num_ranks), groups_(std::move(groups)) {
  if (num_ranks < 1) throw CommError("ThreadWorld: need at least one rank");
  for (const auto& g : groups_) {
    for (int r : g) {
      if (r < 0 || r >= num_ranks) throw CommError("ThreadWorld: group member outside the world");
    }
  }
  std::vector<int> world(num_ranks);
  for (int r = 0; r < num_ranks; ++r) world[r] = r;
  groups_.push_back(std::move(world));
  next_seq_.resize(num_ranks);
}

std::unique_ptr<Comm> ThreadWorld::comm(int rank) {
  if (rank < 0 || rank >= num_ranks_) throw CommError("ThreadWorld::comm: no such rank");
  auto c = std::make_unique<ThreadComm>(*this, rank);
  c->set_timeout(timeout_);
  return c;
}

void ThreadWorld::abort(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (!aborted_) {
    aborted_ = true;
    abort_reason_ = reason;
  }
  cv_.notify_all();
}

std::shared_ptr<ThreadWorld::Slot> ThreadWorld::arrive(int rank, int g, const Call& call,
                                                       std::span<const float> input,
                                                       std::int64_t& seq,
                                                       std::chrono::milliseconds timeout) {
  const auto& members = groups_.at(g);
  const auto it = std::find(members.begin(), members.end(), rank);
  if (it == members.end()) {
    throw CommError("rank " + std::to_string(rank) + " is not a member of group " + std::to_string(g));
  }
  const auto pos = static_cast<std::size_t>(it - members.begin());
  // A send/recv involves only its two ends; the others never see its slot.
  const bool p2p = call.op == kSendRecv;
  const int expected = p2p ? 2 : static_cast<int>(members.size());

  std::unique_lock lock(mu_);
  if (aborted_) throw CommError("aborted: " + abort_reason_);
  // Group calls are numbered per group; point-to-point calls per (group, src, dst), so that they
  // do not consume the sequence numbers of members that are not involved.
  const SlotKey key{g, p2p ? call.src : -1, p2p ? call.dst : -1, 0};
  seq = next_seq_[rank][std::make_tuple(std::get<0>(key), std::get<1>(key), std::get<2>(key))]++;
  SlotKey full = key;
  std::get<3>(full) = seq;
  auto& slot = slots_[full];
  if (!slot) {
    slot = std::make_shared<Slot>();
    slot->inputs.resize(members.size());
    slot->here.assign(members.size(), 0);
  }
  auto s = slot;
  if (!s->has_call) {
    s->call = call;
    s->has_call = true;
  } else if (!(s->call == call) && s->error.empty()) {
    s->error = "group " + std::to_string(g) + ", call #" + std::to_string(seq) + ": rank " +
               std::to_string(rank) + " called " + call.describe() + " but another member called " +
               s->call.describe();
  }
  s->inputs[pos].assign(input.begin(), input.end());
  s->here[pos] = 1;
  ++s->arrived;
  cv_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (s->arrived < expected && !aborted_ && s->error.empty()) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && s->arrived < expected) {
      std::string missing;
      for (std::size_t q = 0; q < members.size(); ++q) {
        const bool involved = !p2p || static_cast<int>(q) == call.src || static_cast<int>(q) == call.dst;
        if (involved && !s->here[q]) missing.append(" ").append(std::to_string(members[q]));
      }
      const std::string msg = "collective timed out after " + std::to_string(timeout.count()) +
                              " ms: " + call.describe() + " on group " + std::to_string(g) +
                              ", call #" + std::to_string(seq) + "; ranks that never arrived:" + missing;
      aborted_ = true;
      abort_reason_ = msg;
      cv_.notify_all();
      throw CommError(msg);
    }
  }
  if (!s->error.empty()) {
    aborted_ = true;
    if (abort_reason_.empty()) abort_reason_ = s->error;
    cv_.notify_all();
    throw CommError(s->error);
  }
  if (s->arrived < expected) throw CommError("aborted: " + abort_reason_);
  return s;
}

void ThreadWorld::leave(int g, std::int64_t seq, const std::shared_ptr<Slot>& slot) {
  std::lock_guard lock(mu_);
  const bool p2p = slot->call.op == kSendRecv;
  const int expected = p2p ? 2 : static_cast<int>(slot->inputs.size());
  if (++slot->departed == expected) {
    slots_.erase(SlotKey{g, p2p ? slot->call.src : -1, p2p ? slot->call.dst : -1, seq});
  }
}

}  // namespace zerosim::validate
