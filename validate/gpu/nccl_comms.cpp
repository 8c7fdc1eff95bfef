#include "validate/gpu/nccl_comms.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "validate/gpu/gpu_check.h"

namespace zerosim::validate::gpu {

NcclComms::NcclComms(Comm& boot, std::chrono::milliseconds timeout) : timeout_(timeout) {
  const auto& groups = boot.groups();
  const int ng = static_cast<int>(groups.size());
  comms_.assign(ng, nullptr);
  sizes_.assign(ng, 0);
  positions_.assign(ng, -1);
  names_.resize(ng);
  // Same greedy layering on every rank.
  std::vector<std::vector<int>> layers;
  std::vector<std::vector<char>> used;
  for (int g = 0; g < ng; ++g) {
    sizes_[g] = static_cast<int>(groups[g].size());
    names_[g] = "group " + std::to_string(g);
    std::size_t l = 0;
    for (; l < layers.size(); ++l) {
      if (std::none_of(groups[g].begin(), groups[g].end(), [&](int r) { return used[l][r]; })) break;
    }
    if (l == layers.size()) {
      layers.emplace_back();
      used.emplace_back(boot.world_size(), 0);
    }
    layers[l].push_back(g);
    for (int r : groups[g]) used[l][r] = 1;
  }
  for (const auto& layer : layers) {
    for (int g : layer) {
      auto it = std::find(groups[g].begin(), groups[g].end(), boot.rank());
      if (it == groups[g].end()) continue;
      const int pos = static_cast<int>(it - groups[g].begin());
      ncclUniqueId id{};
      if (pos == 0) ZEROSIM_NCCL_CHECK(ncclGetUniqueId(&id));
      // One byte per float: exact whatever the transport does with float bit patterns.
      std::vector<float> wire(sizeof(id.internal));
      for (std::size_t i = 0; i < wire.size(); ++i) wire[i] = static_cast<unsigned char>(id.internal[i]);
      boot.broadcast(g, 0, wire);
      for (std::size_t i = 0; i < wire.size(); ++i) {
        id.internal[i] = static_cast<char>(static_cast<unsigned char>(wire[i]));
      }
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t c = nullptr;
      ZEROSIM_NCCL_CHECK(ncclCommInitRankConfig(&c, sizes_[g], id, pos, &config));
      comms_[g] = c;
      positions_[g] = pos;
      wait(g, "ncclCommInitRankConfig");
    }
  }
}

NcclComms::~NcclComms() {
  if (aborted_) return;
  for (ncclComm_t c : comms_) {
    if (c == nullptr) continue;
    // Finalize flushes outstanding work; with a non-blocking communicator, poll for it (bounded).
    ncclResult_t st = ncclCommFinalize(c);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (st == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (ncclCommGetAsyncError(c, &st) != ncclSuccess) st = ncclSystemError;
    }
    if (st == ncclSuccess) {
      ncclCommDestroy(c);
    } else {
      ncclCommAbort(c);  // errors cannot be reported from a destructor
    }
  }
}

ncclComm_t NcclComms::get(int g) const {
  ncclComm_t c = comms_.at(g);
  if (c == nullptr) throw NcclError(ncclInvalidUsage, "this rank has no communicator for " + names_.at(g));
  return c;
}

void NcclComms::wait(int g, const std::string& what) {
  ncclComm_t c = get(g);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(1);
  for (;;) {
    ncclResult_t st = ncclSuccess;
    ZEROSIM_NCCL_CHECK(ncclCommGetAsyncError(c, &st));
    if (st == ncclSuccess) return;
    if (st != ncclInProgress) {
      const std::string msg = what + " on " + names_[g] + ": NCCL reports " + ncclGetErrorString(st) +
                              " (" + ncclGetLastError(c) + ")";
      abort_all();
      throw NcclError(st, msg);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort_all();
      throw NcclError(ncclInProgress, what + " on " + names_[g] + " still in progress after " +
                                          std::to_string(timeout_.count()) +
                                          " ms; communicators aborted (a peer is missing or stuck)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::string NcclComms::async_errors() const {
  std::string out;
  for (std::size_t g = 0; g < comms_.size(); ++g) {
    if (comms_[g] == nullptr) continue;
    ncclResult_t st = ncclSuccess;
    if (ncclCommGetAsyncError(comms_[g], &st) != ncclSuccess) st = ncclSystemError;
    if (st != ncclSuccess && st != ncclInProgress) {
      out += (out.empty() ? "" : "; ") + names_[g] + ": " + ncclGetErrorString(st);
    }
  }
  return out;
}

void NcclComms::abort_all() noexcept {
  if (aborted_) return;
  aborted_ = true;
  for (ncclComm_t& c : comms_) {
    if (c != nullptr) ncclCommAbort(c);
    c = nullptr;
  }
}

}  // namespace zerosim::validate::gpu
