#include "sim/memory/memory_timeline.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

// With ZEROSIM_CHECK_INVARIANTS (Debug builds, the sanitizer and fuzz presets) the replay also
// checks, per rank, what the category totals cannot show: that no allocation (an Alloc/Free
// name, "alloc X" / "free X", in its category) is freed beyond what was allocated, that one the
// step frees is freed entirely by the step's end (a leak would otherwise pass as a persistent
// buffer), that no activation outlives the step, and that the events come in time order.
// A violation is a plan-builder bug: std::logic_error naming the rank and the allocation.
#if defined(ZEROSIM_CHECK_INVARIANTS) && ZEROSIM_CHECK_INVARIANTS
#define ZEROSIM_MEMORY_CHECKS 1
#else
#define ZEROSIM_MEMORY_CHECKS 0
#endif

namespace zerosim {

namespace {

// "alloc X" and "free X" name the same allocation X.
std::string allocation_of(const std::string& op_name) {
  const std::size_t space = op_name.find(' ');
  return space == std::string::npos ? op_name : op_name.substr(space + 1);
}

}  // namespace

#if ZEROSIM_MEMORY_CHECKS
namespace {

class AllocationLedger {
 public:
  void play(const Plan& plan, const Op& op, SimTime when) {
    if (when < last_) {
      throw std::logic_error("memory replay: '" + plan.names[op.name] + "' on rank " +
                             std::to_string(op.rank) + " ends at " + std::to_string(when) +
                             " ps, before the previous event (" + std::to_string(last_) + " ps)");
    }
    last_ = when;
    if (op.bytes < 0) {
      throw std::logic_error("memory replay: '" + plan.names[op.name] + "' on rank " +
                             std::to_string(op.rank) + " has negative size " +
                             std::to_string(op.bytes));
    }
    Entry& e = held_[{op.rank, allocation_of(plan.names[op.name]), op.category}];
    if (op.kind == OpKind::Alloc) {
      e.bytes += op.bytes;
      return;
    }
    e.freed = true;
    e.bytes -= op.bytes;
    if (e.bytes < 0) {
      throw std::logic_error("memory replay: '" + plan.names[op.name] + "' on rank " +
                             std::to_string(op.rank) + " frees " + std::to_string(-e.bytes) +
                             " bytes more of " + mem_category_name(op.category) +
                             " than were allocated under that name");
    }
  }

  void check_step_end() const {
    for (const auto& [key, e] : held_) {
      const auto& [rank, name, category] = key;
      if (e.bytes == 0) continue;
      if (e.freed || category == MemCategory::Activations) {
        throw std::logic_error("memory replay: " + std::to_string(e.bytes) + " bytes of '" +
                               name + "' (" + mem_category_name(category) + ") on rank " +
                               std::to_string(rank) + " are still allocated when the step ends");
      }
    }
  }

 private:
  struct Entry {
    Bytes bytes = 0;
    bool freed = false;
  };
  struct KeyHash {
    std::size_t operator()(const std::tuple<int, std::string, MemCategory>& k) const {
      return std::hash<std::string>()(std::get<1>(k)) * 31 +
             static_cast<std::size_t>(std::get<0>(k)) * 8 + static_cast<std::size_t>(std::get<2>(k));
    }
  };
  std::unordered_map<std::tuple<int, std::string, MemCategory>, Entry, KeyHash> held_;
  SimTime last_ = 0;
};

}  // namespace
#endif

namespace {

// PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp) rounds every request up to a
// multiple of kMinBlockSize = 512 bytes (round_size).
Bytes allocator_block(Bytes request) { return (request + 511) / 512 * 512; }

// The allocation each op name refers to ("alloc X" and "free X": X), numbered 0 .. count - 1;
// -1 for names of other ops.
struct AllocationKeys {
  std::vector<std::int32_t> of_name;
  std::int32_t count = 0;
};

AllocationKeys allocation_keys(const Plan& plan, const std::vector<bool>& is_memory_name) {
  AllocationKeys keys;
  keys.of_name.assign(plan.names.size(), -1);
  std::unordered_map<std::string, std::int32_t> ids;
  for (std::size_t i = 0; i < plan.names.size(); ++i) {
    if (!is_memory_name[i]) continue;
    keys.of_name[i] = ids.emplace(allocation_of(plan.names[i]), keys.count).first->second;
    keys.count = static_cast<std::int32_t>(ids.size());
  }
  return keys;
}

}  // namespace

std::vector<MemoryUsage> replay_memory(const Plan& plan, const EngineResult& result,
                                       const std::vector<int>& ranks, bool keep_timeline) {
  std::vector<int> slot(static_cast<std::size_t>(plan.num_ranks), -1);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= plan.num_ranks) {
      throw std::out_of_range("replay_memory: rank " + std::to_string(ranks[i]) +
                              " is not in the plan's " + std::to_string(plan.num_ranks));
    }
    slot[ranks[i]] = static_cast<int>(i);
  }
  std::vector<MemoryUsage> usage(ranks.size());
  std::vector<std::array<Bytes, kNumMemCategories>> current(ranks.size());
  std::vector<Bytes> total(ranks.size(), 0);
  for (auto& c : current) c.fill(0);
  // The caching allocator's pools. A block is cached for the stream it was allocated on, and only
  // allocations on that stream reuse it (a Block carries its stream; get_free_block searches the
  // requesting stream's blocks only); cached segments go back to CUDA only on empty_cache() or a
  // failed cudaMalloc. So from one step to the next each stream's pool holds at least the peak of
  // the blocks allocated on it, and the process reserves at least the sum of those peaks. A free
  // returns its block to the pool of the stream that allocated it, which may not be the freeing
  // op's stream (a stage-3 gather's buffer is allocated on the gather stream, freed after compute).
  std::vector<bool> is_memory_name(plan.names.size(), false);
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::Alloc || op.kind == OpKind::Free) is_memory_name[op.name] = true;
  }
  const AllocationKeys keys = allocation_keys(plan, is_memory_name);
  // The stream each (slot, allocation) was last allocated on; kNumStreams: not yet allocated.
  std::vector<std::uint8_t> allocated_on(ranks.size() * static_cast<std::size_t>(keys.count),
                                         static_cast<std::uint8_t>(kNumStreams));
  std::vector<std::array<Bytes, kNumStreams>> pool(ranks.size()), pool_peak(ranks.size());
  for (auto& p : pool) p.fill(0);
  for (auto& p : pool_peak) p.fill(0);
#if ZEROSIM_MEMORY_CHECKS
  AllocationLedger ledger;
#endif
  for (OpId id : result.order) {
    const Op& op = plan.ops[id];
    if (op.kind != OpKind::Alloc && op.kind != OpKind::Free) continue;
    const int k = slot[op.rank];
    if (k < 0) continue;
    MemoryUsage& u = usage[k];
    const int c = static_cast<int>(op.category);
    const Bytes delta = op.kind == OpKind::Alloc ? op.bytes : -op.bytes;
    current[k][c] += delta;
    total[k] += delta;
    if (current[k][c] < 0) {
      throw std::logic_error("memory of category " + std::string(mem_category_name(op.category)) +
                             " went negative on rank " + std::to_string(op.rank) + " at '" +
                             plan.names[op.name] + "'");
    }
#if ZEROSIM_MEMORY_CHECKS
    ledger.play(plan, op, result.end[id]);
#endif
    std::uint8_t& on = allocated_on[k * static_cast<std::size_t>(keys.count) +
                                    static_cast<std::size_t>(keys.of_name[op.name])];
    if (op.kind == OpKind::Alloc) on = static_cast<std::uint8_t>(op.stream);
    const int stream = on < kNumStreams ? on : static_cast<int>(op.stream);
    const Bytes block = allocator_block(op.bytes);
    Bytes& in_pool = pool[k][stream];
    in_pool += op.kind == OpKind::Alloc ? block : -block;
    Bytes& pool_max = pool_peak[k][stream];
    if (in_pool > pool_max) pool_max = in_pool;
    if (current[k][c] > u.category_max[c]) u.category_max[c] = current[k][c];
    if (total[k] > u.peak) {
      u.peak = total[k];
      u.peak_time = result.end[id];
      u.at_peak = current[k];
    }
    if (keep_timeline) u.timeline.emplace_back(result.end[id], total[k]);
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    usage[k].end = total[k];
    for (Bytes b : pool_peak[k]) usage[k].reserved_peak += b;
  }
#if ZEROSIM_MEMORY_CHECKS
  ledger.check_step_end();
#endif
  return usage;
}

}  // namespace zerosim
