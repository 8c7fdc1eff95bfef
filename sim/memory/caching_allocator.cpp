#include "sim/memory/caching_allocator.h"

#include <algorithm>

namespace zerosim {

Bytes CachingAllocator::round_size(Bytes bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

Bytes CachingAllocator::segment_size(Bytes rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocator::FreeSet& CachingAllocator::pool(int stream, bool small) {
  const std::size_t i = 2 * static_cast<std::size_t>(stream) + (small ? 1 : 0);
  while (pools_.size() <= i) pools_.emplace_back(nodes_.get());
  return pools_[i];
}

int CachingAllocator::new_block() {
  if (!unused_.empty()) {
    const int id = unused_.back();
    unused_.pop_back();
    blocks_[static_cast<std::size_t>(id)] = Block{};
    return id;
  }
  blocks_.emplace_back();
  return static_cast<int>(blocks_.size()) - 1;
}

void CachingAllocator::insert_free(int id) {
  Block& b = blocks_[static_cast<std::size_t>(id)];
  b.free = true;
  pool(b.stream, b.small).emplace(b.size, b.address, id);
}

void CachingAllocator::erase_free(int id) {
  Block& b = blocks_[static_cast<std::size_t>(id)];
  pool(b.stream, b.small).erase({b.size, b.address, id});
  b.free = false;
}

int CachingAllocator::new_segment(Bytes size, int stream, bool small) {
  if (capacity_ > 0 && reserved_ + size > capacity_) {
    release_cached_segments();
    // Out of memory: the process would fail here. The segment is counted anyway, so that the
    // reserved peak says how much the step needs.
    if (reserved_ + size > capacity_) out_of_memory_ = true;
  }
  const int id = new_block();
  Block& b = blocks_[static_cast<std::size_t>(id)];
  b.address = next_address_;
  b.size = size;
  b.stream = stream;
  b.small = small;
  next_address_ += size;
  reserved_ += size;
  if (reserved_ > reserved_peak_) reserved_peak_ = reserved_;
  return id;
}

void CachingAllocator::release_cached_segments() {
  for (FreeSet& p : pools_) {
    std::erase_if(p, [&](const std::tuple<Bytes, Bytes, int>& e) {
      const int id = std::get<2>(e);
      Block& b = blocks_[static_cast<std::size_t>(id)];
      if (b.prev >= 0 || b.next >= 0) return false;
      reserved_ -= b.size;
      b = Block{};
      unused_.push_back(id);
      return true;
    });
  }
}

int CachingAllocator::malloc(Bytes bytes, int stream) {
  const Bytes size = round_size(bytes);
  const bool small = size <= kSmallSize;
  FreeSet& p = pool(stream, small);
  int id = -1;
  const auto it = p.lower_bound({size, 0, -1});
  if (it != p.end()) {
    id = std::get<2>(*it);
    erase_free(id);
  } else {
    id = new_segment(segment_size(size), stream, small);
  }
  Block& b = blocks_[static_cast<std::size_t>(id)];
  const Bytes remaining = b.size - size;
  if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
    const int rest = new_block();
    Block& r = blocks_[static_cast<std::size_t>(rest)];
    Block& a = blocks_[static_cast<std::size_t>(id)];  // new_block may have moved the vector
    r.address = a.address + size;
    r.size = remaining;
    r.stream = a.stream;
    r.small = a.small;
    r.prev = id;
    r.next = a.next;
    if (a.next >= 0) blocks_[static_cast<std::size_t>(a.next)].prev = rest;
    a.next = rest;
    a.size = size;
    insert_free(rest);
  }
  allocated_ += blocks_[static_cast<std::size_t>(id)].size;
  return id;
}

void CachingAllocator::absorb(int left, int right) {
  Block& a = blocks_[static_cast<std::size_t>(left)];
  const Block b = blocks_[static_cast<std::size_t>(right)];
  a.size += b.size;
  a.next = b.next;
  if (b.next >= 0) blocks_[static_cast<std::size_t>(b.next)].prev = left;
  blocks_[static_cast<std::size_t>(right)] = Block{};
  unused_.push_back(right);
}

void CachingAllocator::free(int id) {
  allocated_ -= blocks_[static_cast<std::size_t>(id)].size;
  // Merge with free neighbours of the same segment: the next one folds into this block, this
  // block into the previous one.
  const int next = blocks_[static_cast<std::size_t>(id)].next;
  if (next >= 0 && blocks_[static_cast<std::size_t>(next)].free) {
    erase_free(next);
    absorb(id, next);
  }
  const int prev = blocks_[static_cast<std::size_t>(id)].prev;
  if (prev >= 0 && blocks_[static_cast<std::size_t>(prev)].free) {
    erase_free(prev);
    absorb(prev, id);
    id = prev;
  }
  insert_free(id);
}

}  // namespace zerosim
