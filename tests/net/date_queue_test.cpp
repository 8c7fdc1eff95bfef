// The date queue against a brute-force reference: an ordered set of (date, seq, slot). Random
// sequences of inserts, moves (one by one and in batches), erasures and takes, over few distinct dates (so buckets are shared,
// emptied, recycled, and hints go stale) and over many (so hints collide), must give the same
// earliest date and the same slots in the same order at every take.
#include "sim/net/date_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace zerosim::net {
namespace {

struct Reference {
  std::set<std::tuple<SimTime, std::uint64_t, std::uint32_t>> entries;
  std::map<std::uint32_t, std::pair<SimTime, std::uint64_t>> where;

  void set(std::uint32_t slot, SimTime date, std::uint64_t seq) {
    erase(slot);
    if (date == kNever) return;
    entries.insert({date, seq, slot});
    where[slot] = {date, seq};
  }
  void erase(std::uint32_t slot) {
    const auto it = where.find(slot);
    if (it == where.end()) return;
    entries.erase({it->second.first, it->second.second, slot});
    where.erase(it);
  }
  SimTime earliest() const { return entries.empty() ? kNever : std::get<0>(*entries.begin()); }
  std::vector<std::uint32_t> take() {
    std::vector<std::uint32_t> out;
    const SimTime date = earliest();
    while (!entries.empty() && std::get<0>(*entries.begin()) == date) {
      const std::uint32_t slot = std::get<2>(*entries.begin());
      out.push_back(slot);
      erase(slot);
    }
    return out;
  }
};

void run_random(std::uint32_t seed, int distinct_dates, std::uint32_t slots) {
  std::mt19937_64 rng(seed);
  DateQueue queue;
  Reference ref;
  std::vector<std::uint64_t> seq_of(slots, 0);
  std::uint64_t next_seq = 0;
  SimTime now = 0;
  std::vector<std::uint32_t> got;
  int takes = 0;
  for (int op = 0; op < 20000; ++op) {
    const std::uint32_t slot = static_cast<std::uint32_t>(rng() % slots);
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 5) {
      // Insert or move to a date at or after now; a slot not queued gets a new start order, as
      // a recycled flow slot does.
      if (!queue.contains(slot)) seq_of[slot] = next_seq++;
      const SimTime date =
          rng() % 17 == 0 ? kNever : now + static_cast<SimTime>(rng() % distinct_dates) * 1000;
      queue.set(slot, date, seq_of[slot]);
      ref.set(slot, date, seq_of[slot]);
    } else if (kind < 6) {
      queue.erase(slot);
      ref.erase(slot);
    } else if (kind < 7) {
      // A solve's re-datings: sometimes few (one by one), sometimes many beside the dates
      // waiting (the heap rebuilt once after them).
      const std::size_t count = rng() % 3 == 0 ? 64 + rng() % 400 : 1 + rng() % 40;
      std::vector<DateQueue::Move> moves;
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint32_t s = static_cast<std::uint32_t>(rng() % slots);
        if (ref.where.count(s) == 0) seq_of[s] = next_seq++;
        const SimTime date =
            rng() % 17 == 0 ? kNever : now + static_cast<SimTime>(rng() % distinct_dates) * 1000;
        moves.push_back({s, date, seq_of[s]});
        ref.set(s, date, seq_of[s]);
      }
      queue.set_many(moves);
    } else {
      ASSERT_EQ(queue.earliest(), ref.earliest()) << "op " << op;
      if (queue.empty()) continue;
      now = queue.earliest();
      got.clear();
      queue.take_earliest(got);
      ASSERT_EQ(got, ref.take()) << "op " << op;
      ++takes;
    }
    ASSERT_EQ(queue.contains(slot), ref.where.count(slot) == 1) << "op " << op;
    ASSERT_EQ(queue.empty(), ref.entries.empty()) << "op " << op;
  }
  EXPECT_GT(takes, 1000);
  while (!queue.empty()) {
    got.clear();
    queue.take_earliest(got);
    ASSERT_EQ(got, ref.take());
  }
  EXPECT_TRUE(ref.entries.empty());
  EXPECT_EQ(queue.earliest(), kNever);
}

TEST(DateQueue, MatchesAnOrderedSetWithFewDates) {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) run_random(seed, 4, 200);
}

TEST(DateQueue, MatchesAnOrderedSetWithManyDates) {
  for (std::uint32_t seed = 11; seed <= 15; ++seed) run_random(seed, 5000, 2000);
}

// Two buckets of one date (the hint replaced by a bucket of a colliding date in between) are
// taken together, in start order across both.
TEST(DateQueue, EqualDatesInSeveralBucketsComeOutTogetherInStartOrder) {
  DateQueue queue;
  std::vector<std::uint32_t> got;
  // Dates 0..2047 cover each of the 256 hint classes several times over, so the hint for date
  // 5000 is overwritten before it is asked for again.
  queue.set(7, 5000, 3);
  for (std::uint32_t i = 0; i < 2048; ++i) queue.set(100 + i, 6000 + i, 10 + i);
  queue.set(8, 5000, 1);
  queue.set(9, 5000, 2);
  queue.take_earliest(got);
  EXPECT_EQ(got, (std::vector<std::uint32_t>{8, 9, 7}));
  EXPECT_EQ(queue.earliest(), 6000);
}

}  // namespace
}  // namespace zerosim::net
