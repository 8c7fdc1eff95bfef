#pragma once
// The flow network's queue of pending dates: which flows have their next event (end of latency,
// or completion) at which picosecond.
//
// Why dates are grouped. Collectives make hundreds of flows share one date: they all end their
// latency together, a solve gives the flows of a symmetric collective one rate and so one
// completion date, and they complete together. A heap of flows pays for each of them (taking a
// batch of k flows out of n is k sifts or one O(n) rebuild; re-dating r flows is r sifts or
// another rebuild), and the DualPipe step of a 64-layer MoE on 2,048 GPUs spent 58 % of its time
// there (docs/PERFORMANCE.md). Here a flow sits in the bucket of its date, a doubly linked list
// threaded through per-flow nodes, and only the buckets are in a heap. Moving a flow to another
// date is O(1) when a bucket of that date is at hand (the common case: flows re-dated by one solve
// mostly share a few dates) and O(log B) otherwise, B being the number of buckets: a flow alone in
// its bucket re-dates the bucket, any other opens one. Taking the earliest date is O(k log k) for
// its k flows (they are sorted by start order). When flows keep dates of their own (one flow per
// bucket), this costs more than a heap of flows: net_bench's synthetic spine, 8 % in all.
//
// Order. take_earliest returns the flows of the earliest date in increasing start order (`seq`),
// so the order of extraction is the total order (date, seq) whatever the buckets' history; two
// buckets may hold the same date (a bucket is found by a small hash of recent dates, a hint that
// may miss), and they are taken together.
//
// Memory. Nodes are indexed by flow slot and grow with the slots; buckets are recycled through a
// free list and hold no storage of their own, so steady state allocates nothing.
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sim/core/units.h"

namespace zerosim::net {

// No date: a flow that is stalled or endless, or an empty queue.
inline constexpr SimTime kNever = std::numeric_limits<SimTime>::max();

class DateQueue {
 public:
  // Puts `slot` at `date` (moving it if queued elsewhere); kNever takes it out. `seq` is its start
  // order, unique among queued slots and constant while it is queued.
  void set(std::uint32_t slot, SimTime date, std::uint64_t seq);
  // set() for each move, in order. When the moves are many beside the buckets (a solve that
  // re-dates a whole collective, each flow to a date of its own), the buckets' heap is rebuilt
  // once in O(B) after them instead of being sifted per move.
  struct Move {
    std::uint32_t slot;
    SimTime date;
    std::uint64_t seq;
  };
  void set_many(std::span<const Move> moves);
  // Takes `slot` out; nothing if it is not queued.
  void erase(std::uint32_t slot);
  bool contains(std::uint32_t slot) const {
    return slot < nodes_.size() && nodes_[slot].bucket != kNone;
  }
  bool empty() const { return heap_.empty(); }
  // The earliest date queued, kNever if none.
  SimTime earliest() const { return heap_.empty() ? kNever : heap_[0].date; }
  // Takes every slot dated earliest() out and appends them to `out` in increasing seq.
  void take_earliest(std::vector<std::uint32_t>& out);

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  struct Node {              // one per flow slot
    std::uint64_t seq = 0;
    std::uint32_t bucket = kNone;
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;
  };
  struct Bucket {
    SimTime date = kNever;
    std::uint32_t head = kNone;
    std::uint32_t heap_pos = kNone;  // kNone while on the free list
  };
  struct Taken {
    std::uint64_t seq;
    std::uint32_t slot;
  };

  std::uint32_t hinted(SimTime date) const;  // the hint's bucket if it holds `date`, else kNone
  std::uint32_t bucket_for(SimTime date);
  void unlink(std::uint32_t slot);
  void release(std::uint32_t bucket);
  // A bucket's entry in the heap, its date inline so that sifting reads one array.
  struct HeapEntry {
    SimTime date;
    std::uint32_t bucket;
  };
  static bool earlier(const HeapEntry& a, const HeapEntry& b) { return a.date < b.date; }
  void place(std::uint32_t slot, SimTime date, std::uint64_t seq);
  void heap_place(std::size_t pos, const HeapEntry& e);
  void resift(std::size_t pos);
  void sift_up(std::size_t pos);
  void sift_down(std::size_t pos);

  std::vector<Node> nodes_;
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_buckets_;
  std::vector<HeapEntry> heap_;  // a binary min-heap of the buckets by date
  // The bucket last opened for each of 256 classes of dates: a hint, checked before use.
  struct Hint {
    SimTime date = kNever;
    std::uint32_t bucket = kNone;
  };
  std::array<Hint, 256> recent_{};
  std::vector<Taken> taken_;  // scratch of take_earliest
  // While set_many defers the heap: new buckets are appended unsorted and emptied ones stay.
  bool deferred_ = false;
};

}  // namespace zerosim::net
