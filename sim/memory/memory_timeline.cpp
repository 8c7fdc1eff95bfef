#include "sim/memory/memory_timeline.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include "sim/memory/caching_allocator.h"

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

// What one Alloc op holds: the allocator's blocks (one per tensor: ids[first, first + count) of
// the rank's id list), the bytes the plan asked for and the stream they were allocated on.
struct HeldBlock {
  std::size_t first = 0, count = 0;
  Bytes bytes = 0;
  int stream = 0;
};

struct RankAllocator {
  CachingAllocator allocator;
  std::vector<int> ids;

  HeldBlock allocate(const Plan& plan, const Op& op) {
    HeldBlock h{ids.size(), 0, op.bytes, static_cast<int>(op.stream)};
    const auto tensors = plan.alloc_tensors.find({op.name, op.bytes});
    if (tensors == plan.alloc_tensors.end()) {
      ids.push_back(allocator.malloc(op.bytes, h.stream));
    } else {
      for (Bytes b : tensors->second) {
        if (b > 0) ids.push_back(allocator.malloc(b, h.stream));
      }
    }
    h.count = ids.size() - h.first;
    return h;
  }
  void free(const HeldBlock& h) {
    for (std::size_t i = h.first; i < h.first + h.count; ++i) allocator.free(ids[i]);
  }
  // A free of `bytes` under an allocation's name: the plan names allocations, not blocks, so
  // the oldest block of exactly that size is freed (one layer's activations of the earliest
  // micro-batch in flight, as a pipeline frees them), else the oldest blocks until `bytes` are
  // covered; a block covered only in part is freed and its remainder allocated anew.
  void release(std::vector<HeldBlock>& blocks, Bytes bytes) {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].bytes != bytes) continue;
      free(blocks[i]);
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
    while (bytes > 0 && !blocks.empty()) {
      HeldBlock& b = blocks.front();
      free(b);
      if (b.bytes > bytes) {
        b.bytes -= bytes;
        b.first = ids.size();
        b.count = 1;
        ids.push_back(allocator.malloc(b.bytes, b.stream));
        return;
      }
      bytes -= b.bytes;
      blocks.erase(blocks.begin());
    }
  }
};

}  // namespace

std::vector<MemoryUsage> replay_memory(const Plan& plan, const EngineResult& result,
                                       const std::vector<int>& ranks, bool keep_timeline,
                                       const std::vector<Bytes>& capacity) {
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
  // Each rank's allocations played through PyTorch's caching allocator (caching_allocator.h),
  // which gives the reserved bytes. A block is cached for the stream it was allocated on; a free
  // returns it to that stream's pool, which may not be the freeing op's stream (a stage-3
  // gather's buffer is allocated on the gather stream, freed after compute).
  std::vector<bool> is_memory_name(plan.names.size(), false);
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::Alloc || op.kind == OpKind::Free) is_memory_name[op.name] = true;
  }
  const AllocationKeys keys = allocation_keys(plan, is_memory_name);
  std::vector<RankAllocator> allocators;
  allocators.reserve(ranks.size());
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    allocators.push_back({CachingAllocator(k < capacity.size() ? capacity[k] : 0), {}});
  }
  // The blocks each (slot, allocation) holds, oldest first, with the bytes each was asked for.
  std::vector<std::vector<HeldBlock>> held(ranks.size() * static_cast<std::size_t>(keys.count));
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
    std::vector<HeldBlock>& blocks =
        held[k * static_cast<std::size_t>(keys.count) + static_cast<std::size_t>(keys.of_name[op.name])];
    if (op.kind == OpKind::Alloc) {
      if (op.bytes > 0) blocks.push_back(allocators[k].allocate(plan, op));
    } else {
      allocators[k].release(blocks, op.bytes);
    }
    if (current[k][c] > u.category_max[c]) u.category_max[c] = current[k][c];
    if (total[k] > u.peak) {
      u.peak = total[k];
      u.peak_time = result.end[id];
      u.at_peak = current[k];
    }
    if (keep_timeline) u.timeline.emplace_back(result.end[id], total[k]);
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    usage[k].reserved_peak = allocators[k].allocator.reserved_peak();
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) usage[k].end = total[k];
#if ZEROSIM_MEMORY_CHECKS
  ledger.check_step_end();
#endif
  return usage;
}

}  // namespace zerosim
