#include "validate/mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

namespace zerosim::validate {
namespace {

enum HeaderOp { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };
const char* header_name(long long op) {
  static const char* names[] = {"?", "all_reduce", "reduce_scatter", "all_gather",
                                "broadcast", "reduce", "all_to_all"};
  return op >= 1 && op <= 6 ? names[op] : "?";
}

int to_int(std::int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX) {
    throw CommError(std::string(what) + ": " + std::to_string(n) +
                    " elements do not fit MPI's int counts");
  }
  return static_cast<int>(n);
}

// FNV-1a over the counts: the header carries a digest, not the whole vector.
long long digest(std::span<const std::int64_t> counts) {
  unsigned long long h = 1469598103934665603ull;
  for (auto c : counts) {
    h ^= static_cast<unsigned long long>(c);
    h *= 1099511628211ull;
  }
  return static_cast<long long>(h & 0x7FFFFFFFFFFFFFFFull);
}

}  // namespace

void mpi_check(int err, const char* expr, const char* file, int line) {
  if (err == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(err, text, &len);
  throw CommError(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                  " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

std::vector<std::string> mpi_gather_strings(const std::string& mine, int root) {
  int rank = 0, size = 1;
  ZEROSIM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  ZEROSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const int len = to_int(static_cast<std::int64_t>(mine.size()), "mpi_gather_strings");
  std::vector<int> lens(rank == root ? size : 0), displs(rank == root ? size : 0);
  ZEROSIM_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, MPI_COMM_WORLD));
  std::int64_t total = 0;
  for (int r = 0; r < static_cast<int>(lens.size()); ++r) {
    displs[r] = to_int(total, "mpi_gather_strings");
    total += lens[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  ZEROSIM_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                                MPI_CHAR, root, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int r = 0; r < static_cast<int>(lens.size()); ++r) out.push_back(all.substr(displs[r], lens[r]));
  return out;
}

bool launched_by_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  ZEROSIM_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  ZEROSIM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  ZEROSIM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  ZEROSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_Comm node = MPI_COMM_NULL;
  ZEROSIM_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  ZEROSIM_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
  ZEROSIM_MPI_CHECK(MPI_Comm_free(&node));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void MpiSession::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

MpiComm::MpiComm(std::vector<std::vector<int>> groups) : Comm(std::move(groups)) {
  ZEROSIM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  ZEROSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  const int ng = static_cast<int>(groups_.size());
  for (const auto& g : groups_) {
    for (int r : g) {
      if (r < 0 || r >= size_) {
        throw CommError("group member " + std::to_string(r) + " outside the " +
                        std::to_string(size_) + " MPI processes");
      }
    }
  }
  comms_.assign(ng, MPI_COMM_NULL);
  calls_.assign(ng, 0);
  // Greedy layering into disjoint groups; every process computes the same layers.
  std::vector<std::vector<int>> layers;
  std::vector<std::vector<char>> used;
  for (int g = 0; g < ng; ++g) {
    std::size_t l = 0;
    for (; l < layers.size(); ++l) {
      if (std::none_of(groups_[g].begin(), groups_[g].end(), [&](int r) { return used[l][r]; })) break;
    }
    if (l == layers.size()) {
      layers.emplace_back();
      used.emplace_back(size_, 0);
    }
    layers[l].push_back(g);
    for (int r : groups_[g]) used[l][r] = 1;
  }
  for (const auto& layer : layers) {
    int color = MPI_UNDEFINED, key = 0, mine = -1;
    for (int g : layer) {
      auto it = std::find(groups_[g].begin(), groups_[g].end(), rank_);
      if (it != groups_[g].end()) {
        color = g;
        key = static_cast<int>(it - groups_[g].begin());
        mine = g;
      }
    }
    MPI_Comm c = MPI_COMM_NULL;
    ZEROSIM_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c));
    if (mine >= 0) comms_[mine] = c;
  }
}

MpiComm::~MpiComm() {
  for (MPI_Comm& c : comms_) {
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);  // errors cannot be reported from a destructor
  }
}

MPI_Comm MpiComm::comm_of(int g) const {
  MPI_Comm c = comms_.at(g);
  if (c == MPI_COMM_NULL) {
    throw CommError("rank " + std::to_string(rank_) + " is not a member of group " + std::to_string(g));
  }
  return c;
}

void MpiComm::wait(MPI_Request& req, int g, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(1);
  for (;;) {
    int flag = 0;
    ZEROSIM_MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    if (flag) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string group = g >= 0 ? "group " + std::to_string(g) + ", call #" + std::to_string(calls_[g])
                                 : std::string("the world");
      throw CommError(std::string(what) + " on " + group + " did not finish within " +
                      std::to_string(timeout_.count()) + " ms (rank " + std::to_string(rank_) +
                      "); a peer is missing, stuck or called something else");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void MpiComm::agree(int g, int op, std::span<const std::int64_t> counts, int root) {
  MPI_Comm c = comm_of(g);
  ++calls_[g];
  long long mine[3] = {op, digest(counts), root};
  std::vector<long long> all(3 * static_cast<std::size_t>(group_size(g)));
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Iallgather(mine, 3, MPI_LONG_LONG, all.data(), 3, MPI_LONG_LONG, c, &req));
  wait(req, g, header_name(op));
  for (int p = 1; p < group_size(g); ++p) {
    if (all[3 * p] != all[0] || all[3 * p + 1] != all[1] || all[3 * p + 2] != all[2]) {
      throw CommError("group " + std::to_string(g) + ", call #" + std::to_string(calls_[g]) +
                      ": member 0 called " + header_name(all[0]) + " but member " +
                      std::to_string(p) + " called " + header_name(all[3 * p]) +
                      " (or with other counts / root)");
    }
  }
}

void MpiComm::all_reduce(int g, std::span<float> data) {
  const std::int64_t counts[1] = {static_cast<std::int64_t>(data.size())};
  agree(g, kAllReduce, counts, -1);
  const int n = to_int(static_cast<std::int64_t>(data.size()), "all_reduce");
  const int size = group_size(g);
  std::vector<float> all(static_cast<std::size_t>(n) * size);
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Iallgather(data.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, comm_of(g), &req));
  wait(req, g, "all_reduce");
  std::vector<const float*> parts;
  for (int p = 0; p < size; ++p) parts.push_back(all.data() + static_cast<std::size_t>(p) * n);
  ordered_sum(parts, n, data.data());
}

void MpiComm::reduce_scatter(int g, std::span<const float> in, std::span<const std::int64_t> counts,
                             std::span<float> out) {
  agree(g, kReduceScatter, counts, -1);
  const int size = group_size(g);
  const int p = position(g);
  if (static_cast<int>(counts.size()) != size) throw CommError("reduce_scatter: one count per member");
  const auto off = prefix_offsets(counts);
  if (off.back() != static_cast<std::int64_t>(in.size()) || counts[p] != static_cast<std::int64_t>(out.size())) {
    throw CommError("reduce_scatter: buffer sizes do not match the counts");
  }
  to_int(off.back(), "reduce_scatter");
  const int mine = to_int(counts[p], "reduce_scatter");
  to_int(static_cast<std::int64_t>(mine) * size, "reduce_scatter");
  std::vector<int> scount(size), sdispl(size), rcount(size, mine), rdispl(size);
  for (int q = 0; q < size; ++q) {
    scount[q] = static_cast<int>(counts[q]);
    sdispl[q] = static_cast<int>(off[q]);
    rdispl[q] = q * mine;
  }
  std::vector<float> all(static_cast<std::size_t>(mine) * size);
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Ialltoallv(in.data(), scount.data(), sdispl.data(), MPI_FLOAT, all.data(),
                                   rcount.data(), rdispl.data(), MPI_FLOAT, comm_of(g), &req));
  wait(req, g, "reduce_scatter");
  std::vector<const float*> parts;
  for (int q = 0; q < size; ++q) parts.push_back(all.data() + static_cast<std::size_t>(q) * mine);
  ordered_sum(parts, mine, out.data());
}

void MpiComm::all_gather(int g, std::span<const float> in, std::span<const std::int64_t> counts,
                         std::span<float> out) {
  agree(g, kAllGather, counts, -1);
  const int size = group_size(g);
  const int p = position(g);
  if (static_cast<int>(counts.size()) != size) throw CommError("all_gather: one count per member");
  const auto off = prefix_offsets(counts);
  if (off.back() != static_cast<std::int64_t>(out.size()) || counts[p] != static_cast<std::int64_t>(in.size())) {
    throw CommError("all_gather: buffer sizes do not match the counts");
  }
  to_int(off.back(), "all_gather");
  std::vector<int> rcount(size), rdispl(size);
  for (int q = 0; q < size; ++q) {
    rcount[q] = static_cast<int>(counts[q]);
    rdispl[q] = static_cast<int>(off[q]);
  }
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Iallgatherv(in.data(), static_cast<int>(in.size()), MPI_FLOAT, out.data(),
                                    rcount.data(), rdispl.data(), MPI_FLOAT, comm_of(g), &req));
  wait(req, g, "all_gather");
}

void MpiComm::broadcast(int g, int root, std::span<float> data) {
  const std::int64_t counts[1] = {static_cast<std::int64_t>(data.size())};
  agree(g, kBroadcast, counts, root);
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Ibcast(data.data(), to_int(counts[0], "broadcast"), MPI_FLOAT, root,
                               comm_of(g), &req));
  wait(req, g, "broadcast");
}

void MpiComm::reduce(int g, int root, std::span<const float> in, std::span<float> out) {
  const std::int64_t counts[1] = {static_cast<std::int64_t>(in.size())};
  agree(g, kReduce, counts, root);
  const int n = to_int(counts[0], "reduce");
  const int size = group_size(g);
  const bool is_root = position(g) == root;
  if (is_root && out.size() != in.size()) throw CommError("reduce: out has the wrong size at the root");
  std::vector<float> all(is_root ? static_cast<std::size_t>(n) * size : 0);
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Igather(in.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, root, comm_of(g), &req));
  wait(req, g, "reduce");
  if (!is_root) return;
  std::vector<const float*> parts;
  for (int q = 0; q < size; ++q) parts.push_back(all.data() + static_cast<std::size_t>(q) * n);
  ordered_sum(parts, n, out.data());
}

void MpiComm::all_to_all(int g, std::span<const float> in, std::span<float> out) {
  const std::int64_t counts[1] = {static_cast<std::int64_t>(in.size())};
  agree(g, kAllToAll, counts, -1);
  const auto size = static_cast<std::size_t>(group_size(g));
  if (in.size() != out.size() || in.size() % size != 0) {
    throw CommError("all_to_all: in and out must be equal multiples of the group size");
  }
  const int chunk = to_int(static_cast<std::int64_t>(in.size() / size), "all_to_all");
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Ialltoall(in.data(), chunk, MPI_FLOAT, out.data(), chunk, MPI_FLOAT,
                                  comm_of(g), &req));
  wait(req, g, "all_to_all");
}

void MpiComm::send_recv(int g, int src, int dst, std::span<float> data) {
  const int p = position(g);
  if (p != src && p != dst) throw CommError("send_recv: this rank is neither the source nor the destination");
  MPI_Comm c = comm_of(g);
  const int n = to_int(static_cast<std::int64_t>(data.size()), "send_recv");
  constexpr int kTag = 7;
  // The count travels first, so a size mismatch is an error rather than a truncated message.
  long long count = n;
  MPI_Request req = MPI_REQUEST_NULL;
  if (p == src) {
    ZEROSIM_MPI_CHECK(MPI_Isend(&count, 1, MPI_LONG_LONG, dst, kTag, c, &req));
    wait(req, g, "send_recv (size)");
    ZEROSIM_MPI_CHECK(MPI_Isend(data.data(), n, MPI_FLOAT, dst, kTag, c, &req));
    wait(req, g, "send_recv (send)");
  } else {
    long long theirs = -1;
    ZEROSIM_MPI_CHECK(MPI_Irecv(&theirs, 1, MPI_LONG_LONG, src, kTag, c, &req));
    wait(req, g, "send_recv (size)");
    if (theirs != count) {
      throw CommError("send_recv on group " + std::to_string(g) + ": the sender sends " +
                      std::to_string(theirs) + " elements, the receiver expects " + std::to_string(count));
    }
    ZEROSIM_MPI_CHECK(MPI_Irecv(data.data(), n, MPI_FLOAT, src, kTag, c, &req));
    wait(req, g, "send_recv (recv)");
  }
}

void MpiComm::barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  ZEROSIM_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  wait(req, -1, "barrier");
}

}  // namespace zerosim::validate
