// validate/thread_comm: in-process collectives with threads as ranks. Results are checked against
// sums written out by hand; failures (mismatched calls, a rank that never comes, an aborted world)
// must end in CommError on every member, never in a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "validate/thread_comm.h"

namespace zv = zerosim::validate;

namespace {

// Runs fn(comm) on every rank of a world with the given groups; returns the error text per rank.
std::vector<std::string> run_ranks(int n, std::vector<std::vector<int>> groups,
                                   const std::function<void(zv::Comm&)>& fn,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  zv::ThreadWorld world(n, std::move(groups));
  world.set_timeout(timeout);
  std::vector<std::string> errors(n);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) {
    t.emplace_back([&, r] {
      try {
        auto c = world.comm(r);
        fn(*c);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        world.abort(e.what());
      }
    });
  }
  for (auto& th : t) th.join();
  return errors;
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(ThreadComm, AllCollectivesOverOneToEightRanks) {
  for (int n = 1; n <= 8; ++n) {
    // Rank r contributes r + 1 at every element: sum = n (n + 1) / 2.
    const float sum = static_cast<float>(n * (n + 1) / 2);
    auto errors = run_ranks(n, {iota(n)}, [&](zv::Comm& c) {
      const int r = c.rank();
      std::vector<float> a(5, static_cast<float>(r + 1));
      c.all_reduce(0, a);
      for (float x : a) ASSERT_EQ(x, sum);

      // reduce_scatter with uneven counts: member p receives p + 1 elements.
      std::vector<std::int64_t> counts;
      for (int p = 0; p < n; ++p) counts.push_back(p + 1);
      const std::int64_t total = n * (n + 1) / 2;
      std::vector<float> in(total, static_cast<float>(r + 1)), out(r + 1);
      c.reduce_scatter(0, in, counts, out);
      for (float x : out) ASSERT_EQ(x, sum);

      // all_gather with the same uneven counts: member p's part holds p.
      std::vector<float> mine(r + 1, static_cast<float>(r)), all(total);
      c.all_gather(0, mine, counts, all);
      std::int64_t k = 0;
      for (int p = 0; p < n; ++p) {
        for (int i = 0; i <= p; ++i) ASSERT_EQ(all[k++], static_cast<float>(p));
      }

      std::vector<float> bc(3, static_cast<float>(r));
      c.broadcast(0, n - 1, bc);
      for (float x : bc) ASSERT_EQ(x, static_cast<float>(n - 1));

      std::vector<float> red_in(2, 1.0f), red_out(r == 0 ? 2 : 0);
      c.reduce(0, 0, red_in, red_out);
      if (r == 0) {
        ASSERT_EQ(red_out[1], static_cast<float>(n));
      }

      // all_to_all: chunk q of rank r's input is 10 r + q; rank r receives 10 q + r from each q.
      std::vector<float> ai(2 * n), ao(2 * n);
      for (int q = 0; q < n; ++q) ai[2 * q] = ai[2 * q + 1] = static_cast<float>(10 * r + q);
      c.all_to_all(0, ai, ao);
      for (int q = 0; q < n; ++q) ASSERT_EQ(ao[2 * q], static_cast<float>(10 * q + r));
      c.barrier();
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "n=" << n << " rank " << r;
  }
}

// Sums add members in group order: ((a0 + a1) + a2). With a0 = 1e8, a1 = -1e8, a2 = 1 that is 1;
// in the other order (a0 + (a1 + a2)) it would be 0. Group order here is ranks 2, 0, 1.
TEST(ThreadComm, ReductionsAddInGroupOrder) {
  auto errors = run_ranks(3, {{2, 0, 1}}, [](zv::Comm& c) {
    const float mine[] = {-1e8f, 1.0f, 1e8f};  // rank 0, 1, 2
    std::vector<float> v{mine[c.rank()]};
    c.all_reduce(0, v);
    ASSERT_EQ(v[0], 1.0f);  // (1e8 + -1e8) + 1
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(ThreadComm, SendRecvInvolvesOnlyItsEnds) {
  auto errors = run_ranks(3, {{0, 1, 2}}, [](zv::Comm& c) {
    std::vector<float> d{static_cast<float>(c.rank())};
    if (c.rank() != 1) c.send_recv(0, 2, 0, d);  // position 2 sends to position 0
    if (c.rank() == 0) {
      ASSERT_EQ(d[0], 2.0f);
    }
    c.all_reduce(0, d);  // rank 1 skipped the send_recv; the group's sequence is unaffected
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(ThreadComm, MismatchedCallsFailOnEveryMember) {
  auto errors = run_ranks(2, {{0, 1}}, [](zv::Comm& c) {
    std::vector<float> v(4, 1.0f), out(8);
    if (c.rank() == 0) c.all_reduce(0, v);
    else c.all_gather(0, v, out);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("but another member called"), std::string::npos) << e;
}

// The timeout firing shows in the message; the test reads no clock (a hang would meet ctest's
// timeout).
TEST(ThreadComm, AMissingRankTimesOutNamingIt) {
  auto errors = run_ranks(
      3, {{0, 1, 2}},
      [](zv::Comm& c) {
        std::vector<float> v(1, 1.0f);
        if (c.rank() != 2) c.all_reduce(0, v);
      },
      std::chrono::milliseconds(200));
  EXPECT_NE(errors[0].find("never arrived: 2"), std::string::npos) << errors[0];
  EXPECT_FALSE(errors[1].empty());
  EXPECT_EQ(errors[2], "");
}

TEST(ThreadComm, AFailingRankReleasesTheOthers) {
  auto errors = run_ranks(2, {{0, 1}}, [](zv::Comm& c) {
    if (c.rank() == 1) throw std::runtime_error("rank 1 broke");
    std::vector<float> v(1);
    c.all_reduce(0, v);
  });
  EXPECT_EQ(errors[1], "rank 1 broke");
  EXPECT_NE(errors[0].find("rank 1 broke"), std::string::npos) << errors[0];
}

TEST(ThreadComm, RejectsWrongSizes) {
  auto errors = run_ranks(2, {{0, 1}}, [](zv::Comm& c) {
    std::vector<float> in(3), out(1);
    const std::int64_t counts[] = {1, 1};
    c.reduce_scatter(0, in, counts, out);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("counts add up to 2"), std::string::npos) << e;
}

}  // namespace
