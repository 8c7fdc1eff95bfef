// PyTorch's caching allocator (sim/memory/caching_allocator.h) against sequences worked by hand
// from CUDACachingAllocator.cpp's rules: the segment sizes of get_allocation_size, best fit per
// stream and pool, splitting, merging inside a segment only, and the release of the cache when
// the device is full.
#include <gtest/gtest.h>

#include "sim/memory/caching_allocator.h"

namespace zerosim {
namespace {

constexpr Bytes kMiB = Bytes{1} << 20;
constexpr Bytes kGiB = Bytes{1} << 30;

TEST(cachingAllocator, SegmentSizes) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * kMiB);         // small pool: 2 MiB
  EXPECT_EQ(CachingAllocator::segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB + 512), 20 * kMiB);  // under 10 MiB: 20 MiB
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB), 10 * kMiB);   // rounded to 2 MiB
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB + 512), 12 * kMiB);
}

TEST(cachingAllocator, SplitsAndReusesALargeSegment) {
  // Two 5 MiB requests share one 20 MiB segment (15 MiB left > 1 MiB: split).
  CachingAllocator a;
  const int x = a.malloc(5 * kMiB, 0);
  const int y = a.malloc(5 * kMiB, 0);
  EXPECT_EQ(a.reserved(), 20 * kMiB);
  EXPECT_EQ(a.allocated(), 10 * kMiB);
  // Both freed, the segment merges back whole: a 20 MiB request fits in it.
  a.free(x);
  a.free(y);
  EXPECT_EQ(a.allocated(), 0);
  a.malloc(20 * kMiB, 0);
  EXPECT_EQ(a.reserved(), 20 * kMiB);
  // A remainder of at most 1 MiB is not split off: the block is handed out whole.
  CachingAllocator b;
  b.free(b.malloc(12 * kMiB, 0));
  b.malloc(11 * kMiB + 512, 0);
  EXPECT_EQ(b.allocated(), 12 * kMiB);
}

TEST(cachingAllocator, FreedSegmentsDoNotMerge) {
  // torchtitan's loss at 1 GiB per 2 bytes of logits: the forward holds the 16-bit logits (2),
  // their fp32 copy (4) and the saved log-softmax (4); the first two are freed; the backward
  // allocates two fp32 gradients (4 each). One reuses the fp32 copy's segment; the 2 GiB segment
  // cannot hold the other, which gets a segment of its own: 14 GiB reserved for 12 allocated.
  CachingAllocator a;
  const int bf16 = a.malloc(2 * kGiB, 0);
  const int copy = a.malloc(4 * kGiB, 0);
  a.malloc(4 * kGiB, 0);
  a.free(bf16);
  a.free(copy);
  a.malloc(4 * kGiB, 0);
  a.malloc(4 * kGiB, 0);
  EXPECT_EQ(a.allocated(), 12 * kGiB);
  EXPECT_EQ(a.reserved_peak(), 14 * kGiB);
}

TEST(cachingAllocator, BestFitPerStream) {
  CachingAllocator a;
  const int small = a.malloc(30 * kMiB, 0);
  const int large = a.malloc(60 * kMiB, 0);
  a.free(small);
  a.free(large);
  // 25 MiB takes the 30 MiB block (the smallest that fits), so 55 MiB still finds the 60.
  a.malloc(25 * kMiB, 0);
  a.malloc(55 * kMiB, 0);
  EXPECT_EQ(a.reserved(), 90 * kMiB);
  // Another stream never reuses stream 0's cache.
  const int other = a.malloc(30 * kMiB, 1);
  EXPECT_EQ(a.reserved(), 120 * kMiB);
  a.free(other);
  a.malloc(30 * kMiB, 0);
  EXPECT_EQ(a.reserved(), 150 * kMiB);
}

TEST(cachingAllocator, ReleasesTheCacheWhenTheDeviceIsFull) {
  CachingAllocator a(150 * kMiB);
  const int x = a.malloc(50 * kMiB, 0);
  const int y = a.malloc(50 * kMiB, 0);
  a.free(x);
  a.free(y);
  // 100 more would pass 150: both free segments go back to CUDA, then the malloc succeeds.
  a.malloc(100 * kMiB, 0);
  EXPECT_EQ(a.reserved(), 100 * kMiB);
  EXPECT_EQ(a.reserved_peak(), 100 * kMiB);
  EXPECT_FALSE(a.out_of_memory());
  // Nothing left to release: out of memory, and the reserved bytes say what was needed.
  a.malloc(100 * kMiB, 0);
  EXPECT_TRUE(a.out_of_memory());
  EXPECT_EQ(a.reserved_peak(), 200 * kMiB);
}

}  // namespace
}  // namespace zerosim
