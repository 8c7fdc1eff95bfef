#include "sim/net/date_queue.h"

#include <algorithm>

namespace zerosim::net {

namespace {

// Fibonacci hashing of a date to one of 256 hint classes.
std::size_t date_class(SimTime date) {
  return static_cast<std::size_t>((static_cast<std::uint64_t>(date) * 0x9e3779b97f4a7c15ull) >> 56);
}

}  // namespace

std::uint32_t DateQueue::hinted(SimTime date) const {
  const Hint& hint = recent_[date_class(date)];
  if (hint.date != date) return kNone;
  // The bucket may since have been released, or recycled for another date.
  const Bucket& b = buckets_[hint.bucket];
  return b.heap_pos != kNone && b.date == date ? hint.bucket : kNone;
}

std::uint32_t DateQueue::bucket_for(SimTime date) {
  if (const std::uint32_t hint = hinted(date); hint != kNone) return hint;
  std::uint32_t b;
  if (!free_buckets_.empty()) {
    b = free_buckets_.back();
    free_buckets_.pop_back();
  } else {
    b = static_cast<std::uint32_t>(buckets_.size());
    buckets_.emplace_back();
  }
  buckets_[b].date = date;
  buckets_[b].head = kNone;
  heap_.push_back({date, b});
  if (deferred_) {
    buckets_[b].heap_pos = static_cast<std::uint32_t>(heap_.size() - 1);
  } else {
    sift_up(heap_.size() - 1);
  }
  recent_[date_class(date)] = {date, b};
  return b;
}

void DateQueue::set(std::uint32_t slot, SimTime date, std::uint64_t seq) {
  if (date == kNever) {
    erase(slot);
  } else {
    place(slot, date, seq);
  }
}

void DateQueue::set_many(std::span<const Move> moves) {
  constexpr std::size_t kFew = 32;
  if (moves.size() < kFew || moves.size() * 8 < heap_.size()) {
    for (const Move& m : moves) set(m.slot, m.date, m.seq);
    return;
  }
  deferred_ = true;
  for (const Move& m : moves) set(m.slot, m.date, m.seq);
  deferred_ = false;
  std::size_t kept = 0;
  for (const HeapEntry& e : heap_) {
    if (buckets_[e.bucket].head == kNone) {
      buckets_[e.bucket].heap_pos = kNone;
      free_buckets_.push_back(e.bucket);
    } else {
      heap_[kept++] = e;
    }
  }
  heap_.resize(kept);
  std::make_heap(heap_.begin(), heap_.end(),
                 [](const HeapEntry& a, const HeapEntry& b) { return earlier(b, a); });
  for (std::size_t i = 0; i < heap_.size(); ++i) {
    buckets_[heap_[i].bucket].heap_pos = static_cast<std::uint32_t>(i);
  }
}

void DateQueue::place(std::uint32_t slot, SimTime date, std::uint64_t seq) {
  if (slot >= nodes_.size()) nodes_.resize(static_cast<std::size_t>(slot) + 1);
  Node& n = nodes_[slot];
  if (n.bucket != kNone) {
    Bucket& current = buckets_[n.bucket];
    if (current.date == date) return;
    // Alone in its bucket, with no bucket of the new date at hand: the bucket itself changes
    // date (a solve that re-dates every flow to a date of its own moves no node).
    if (current.head == slot && n.next == kNone && hinted(date) == kNone) {
      current.date = date;
      heap_[current.heap_pos].date = date;
      if (!deferred_) resift(current.heap_pos);
      recent_[date_class(date)] = {date, n.bucket};
      return;
    }
    unlink(slot);
  }
  const std::uint32_t b = bucket_for(date);
  Bucket& bucket = buckets_[b];
  n.seq = seq;
  n.bucket = b;
  n.prev = kNone;
  n.next = bucket.head;
  if (bucket.head != kNone) nodes_[bucket.head].prev = slot;
  bucket.head = slot;
}

void DateQueue::erase(std::uint32_t slot) {
  if (contains(slot)) unlink(slot);
}

void DateQueue::unlink(std::uint32_t slot) {
  Node& n = nodes_[slot];
  Bucket& bucket = buckets_[n.bucket];
  if (n.prev != kNone) {
    nodes_[n.prev].next = n.next;
  } else {
    bucket.head = n.next;
  }
  if (n.next != kNone) nodes_[n.next].prev = n.prev;
  const std::uint32_t b = n.bucket;
  n.bucket = kNone;
  if (bucket.head == kNone && !deferred_) release(b);
}

// Takes an empty bucket out of the heap and onto the free list.
void DateQueue::release(std::uint32_t bucket) {
  const std::size_t pos = buckets_[bucket].heap_pos;
  buckets_[bucket].heap_pos = kNone;
  free_buckets_.push_back(bucket);
  const HeapEntry last = heap_.back();
  heap_.pop_back();
  if (pos < heap_.size()) {
    heap_place(pos, last);
    resift(pos);
  }
}

void DateQueue::take_earliest(std::vector<std::uint32_t>& out) {
  if (heap_.empty()) return;
  const SimTime date = heap_[0].date;
  taken_.clear();
  while (!heap_.empty() && heap_[0].date == date) {
    const std::uint32_t b = heap_[0].bucket;
    for (std::uint32_t s = buckets_[b].head; s != kNone; s = nodes_[s].next) {
      taken_.push_back({nodes_[s].seq, s});
      nodes_[s].bucket = kNone;
    }
    buckets_[b].head = kNone;
    release(b);
  }
  std::sort(taken_.begin(), taken_.end(),
            [](const Taken& a, const Taken& b) { return a.seq < b.seq; });
  for (const Taken& t : taken_) out.push_back(t.slot);
}

void DateQueue::heap_place(std::size_t pos, const HeapEntry& e) {
  heap_[pos] = e;
  buckets_[e.bucket].heap_pos = static_cast<std::uint32_t>(pos);
}

// The entry at `pos` has a new date: up or down to its place.
void DateQueue::resift(std::size_t pos) {
  const std::uint32_t bucket = heap_[pos].bucket;
  sift_up(pos);
  sift_down(buckets_[bucket].heap_pos);
}

void DateQueue::sift_up(std::size_t pos) {
  const HeapEntry e = heap_[pos];
  while (pos > 0) {
    const std::size_t parent = (pos - 1) / 2;
    if (!earlier(e, heap_[parent])) break;
    heap_place(pos, heap_[parent]);
    pos = parent;
  }
  heap_place(pos, e);
}

void DateQueue::sift_down(std::size_t pos) {
  const HeapEntry e = heap_[pos];
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && earlier(heap_[child + 1], heap_[child])) ++child;
    if (!earlier(heap_[child], e)) break;
    heap_place(pos, heap_[child]);
    pos = child;
  }
  heap_place(pos, e);
}

}  // namespace zerosim::net
