#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "vnpu/helper_team.h"

namespace {

using vnpu::HelperTeam;

TEST(HelperTeam, RunsEveryPartOnceThePartsBeyondTheFirstOnHelpers) {
  std::atomic<int> started{0};
  HelperTeam team(3, [&] { started++; });
  for (int parts = 1; parts <= 4; ++parts) {
    std::vector<int> ran(parts, 0);
    std::vector<std::thread::id> by(parts);
    team.run(parts, [&](int part) {
      ran[part]++;
      by[part] = std::this_thread::get_id();
    });
    for (int part = 0; part < parts; ++part) EXPECT_EQ(ran[part], 1) << parts << " parts, part " << part;
    EXPECT_EQ(by[0], std::this_thread::get_id());
    std::set<std::thread::id> distinct(by.begin(), by.end());
    EXPECT_EQ(static_cast<int>(distinct.size()), parts);
  }
  EXPECT_EQ(started.load(), 3);
}

TEST(HelperTeam, RethrowsAPartsErrorAfterAllPartsRan) {
  HelperTeam team(2, nullptr);
  std::atomic<int> finished{0};
  EXPECT_THROW(team.run(3,
                        [&](int part) {
                          if (part == 2) throw std::runtime_error("part 2 failed");
                          finished++;
                        }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 2);
  std::atomic<int> again{0};
  team.run(3, [&](int) { again++; });  // the team still works
  EXPECT_EQ(again.load(), 3);
}

TEST(HelperTeam, RefusesMorePartsThanThreads) {
  HelperTeam team(1, nullptr);
  EXPECT_THROW(team.run(3, [](int) {}), std::invalid_argument);
  EXPECT_THROW(team.run(0, [](int) {}), std::invalid_argument);
  HelperTeam none(0, nullptr);
  int ran = 0;
  none.run(1, [&](int) { ran++; });
  EXPECT_EQ(ran, 1);
}

TEST(HelperTeam, TryRunRunsNothingWhileAnotherCallersJobRuns) {
  HelperTeam team(1, nullptr);
  std::atomic<bool> inside{false}, release{false};
  std::thread first([&] {
    team.run(2, [&](int part) {
      if (part == 0) {
        inside = true;
        while (!release) std::this_thread::yield();
      }
    });
  });
  while (!inside) std::this_thread::yield();
  std::atomic<int> ran{0};
  EXPECT_FALSE(team.try_run(2, [&](int) { ran++; }));
  EXPECT_EQ(ran.load(), 0);
  team.run(2, [&](int) { ran++; });  // busy: both parts on this thread
  EXPECT_EQ(ran.load(), 2);
  release = true;
  first.join();
  EXPECT_TRUE(team.try_run(2, [&](int) { ran++; }));
  EXPECT_EQ(ran.load(), 4);
}

TEST(HelperTeam, ConcurrentCallersEachGetAllTheirPartsRun) {
  HelperTeam team(2, nullptr);
  constexpr int kCallers = 4;
  constexpr int kJobs = 300;
  std::vector<long> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int job = 0; job < kJobs; ++job) {
        std::atomic<long> sum{0};
        team.run(3, [&](int part) { sum += part + 1; });
        sums[c] += sum.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(sums[c], 6L * kJobs);
}

}  // namespace
