#pragma once
// PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), as far as it decides how
// much device memory a process reserves: which cached block serves a request, when a block is
// split, which segment a new request cudaMallocs, and when the cache is given back. The memory
// replay (memory_timeline.cpp) plays a rank's allocations through it; reserved() is what
// torch.cuda.max_memory_reserved and nvidia-smi count, allocated() what max_memory_allocated
// counts (the blocks handed out, rounding and unsplit remainders included).
//
// The rules, with the allocator's constants:
// - A request is rounded up to a multiple of kMinBlockSize (512 bytes). Requests up to
//   kSmallSize (1 MiB) use the small pool, larger ones the large pool.
// - A request is served by the smallest cached free block of its pool and stream that is large
//   enough, ties broken by address (BlockComparatorSize; get_free_block). Blocks are cached per
//   stream: one stream never reuses another's.
// - A block is split when what is left would be at least kMinBlockSize (small pool) or more than
//   kSmallSize (large pool); the rest stays free in the same segment (should_split).
// - With no block large enough, a new segment is cudaMalloc'ed: kSmallBuffer (2 MiB) for a small
//   request, kLargeBuffer (20 MiB) for one under kMinLargeAlloc (10 MiB), else the request
//   rounded up to kRoundLarge (2 MiB) (get_allocation_size).
// - A freed block merges with free neighbours of its own segment, never across segments
//   (try_merge_blocks).
// - When cudaMalloc would exceed the device, every cached segment that is entirely free is
//   released (release_cached_blocks) and the malloc retried; if it still does not fit, the
//   process is out of memory. (The default allocator config: no max_split_size_mb, no
//   expandable segments, no garbage-collection threshold.)
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <set>
#include <tuple>
#include <vector>

#include "sim/core/units.h"

namespace zerosim {

class CachingAllocator {
 public:
  static constexpr Bytes kMinBlockSize = 512;
  static constexpr Bytes kSmallSize = Bytes{1} << 20;
  static constexpr Bytes kSmallBuffer = Bytes{2} << 20;
  static constexpr Bytes kLargeBuffer = Bytes{20} << 20;
  static constexpr Bytes kMinLargeAlloc = Bytes{10} << 20;
  static constexpr Bytes kRoundLarge = Bytes{2} << 20;

  // `capacity`: the device memory the allocator may reserve (the GPU less what the process holds
  // outside it); 0 = unlimited.
  explicit CachingAllocator(Bytes capacity = 0)
      : capacity_(capacity), nodes_(std::make_unique<std::pmr::unsynchronized_pool_resource>()) {}

  // A block of at least `bytes` on `stream`: its id. When even the released cache leaves no
  // room, out_of_memory() turns true and the segment is counted anyway (reserved() then passes
  // the capacity by what the step would need).
  int malloc(Bytes bytes, int stream);
  // Returns block `id` to its stream's cache.
  void free(int id);

  Bytes reserved() const { return reserved_; }
  Bytes reserved_peak() const { return reserved_peak_; }
  Bytes allocated() const { return allocated_; }
  bool out_of_memory() const { return out_of_memory_; }

  static Bytes round_size(Bytes bytes);
  static Bytes segment_size(Bytes rounded);

 private:
  struct Block {
    Bytes address = 0, size = 0;
    int stream = 0;
    bool small = false, free = false;
    int prev = -1, next = -1;  // neighbours in the segment
  };
  // (size, address, id) in order; the tree's nodes come from one pool of this allocator's.
  using FreeSet = std::pmr::set<std::tuple<Bytes, Bytes, int>>;
  FreeSet& pool(int stream, bool small);
  int new_block();
  void insert_free(int id);
  void erase_free(int id);
  int new_segment(Bytes size, int stream, bool small);
  void release_cached_segments();
  // Folds block `right` into its left neighbour `left` of the same segment.
  void absorb(int left, int right);

  Bytes capacity_ = 0;
  Bytes reserved_ = 0, reserved_peak_ = 0, allocated_ = 0;
  bool out_of_memory_ = false;
  Bytes next_address_ = 0;
  std::vector<Block> blocks_;
  std::vector<int> unused_;  // ids of merged-away blocks, reused
  // Free blocks per (stream, pool), ordered by size, then address.
  std::unique_ptr<std::pmr::unsynchronized_pool_resource> nodes_;
  std::vector<FreeSet> pools_;
};

}  // namespace zerosim
