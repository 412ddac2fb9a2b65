// ShmGroup with ranks as threads (each maps the segment itself, as processes
// do): 1, 2, 3, 7 and 8 ranks; 0, 1, a prime and a multi-chunk number of
// elements; a stalled peer ending in ShmTimeout, and a peer process that
// exited ending in ShmPeerExited.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "vnpu/hccl/shm_group.h"

namespace {

using vnpu::hccl::ShmGroup;

constexpr size_t kSlot = 4096;  // small, so large cases take many chunks

ShmGroup::Deadline soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(20); }

// Accumulates into dst in place, as the adaptor's reducer does: this relies
// on ShmGroup's contract that a dst which is one of srcs is srcs[0].
void sum_floats(void* dst, const void* const* srcs, int count, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  float* out = static_cast<float*>(dst);
  if (dst != srcs[0]) std::copy_n(static_cast<const float*>(srcs[0]), n, out);
  for (int s = 1; s < count; ++s) {
    const float* src = static_cast<const float*>(srcs[s]);
    for (size_t i = 0; i < n; ++i) out[i] += src[i];
  }
}

// Runs fn(group) on `ranks` threads, one group each.
template <typename Fn>
void on_ranks(int ranks, Fn fn) {
  ShmGroup root = ShmGroup::create(ranks, kSlot);
  const std::string address = root.address();
  std::vector<std::thread> threads;
  for (int r = 1; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ShmGroup g = ShmGroup::attach(r, ranks, kSlot, address);
      fn(g);
    });
  }
  fn(root);
  for (auto& t : threads) t.join();
}

class ShmGroupRanks : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(ShmGroupRanks, AllreduceSums) {
  const auto [ranks, count] = GetParam();
  on_ranks(ranks, [&, ranks = ranks, count = count](ShmGroup& g) {
    for (int round = 0; round < 3; ++round) {  // back to back: the double buffers are reused
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(g.rank() * 1000 + i + round);
      g.allreduce(data.data(), count * sizeof(float), sizeof(float), sum_floats, soon());
      for (size_t i = 0; i < count; ++i) {
        const float want = 1000.0f * ranks * (ranks - 1) / 2 + static_cast<float>(ranks * (i + round));
        ASSERT_EQ(data[i], want) << "rank " << g.rank() << " element " << i;
      }
    }
  });
}

TEST_P(ShmGroupRanks, AllgatherBroadcastReduceScatter) {
  const auto [ranks, count] = GetParam();
  on_ranks(ranks, [&, ranks = ranks, count = count](ShmGroup& g) {
    std::vector<float> mine(count, static_cast<float>(g.rank()));
    std::vector<float> all(count * ranks, -1.0f);
    g.allgather(mine.data(), count * sizeof(float), all.data(), soon());
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[r * count + i], static_cast<float>(r));
    }
    std::vector<float> b(count, g.rank() == ranks - 1 ? 7.0f : 0.0f);
    g.broadcast(b.data(), count * sizeof(float), ranks - 1, soon());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], 7.0f);
    std::vector<float> blocks(count * ranks);
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < count; ++i) blocks[r * count + i] = static_cast<float>(r + i);
    }
    std::vector<float> out(count, -1.0f);
    g.reduce_scatter(blocks.data(), count * sizeof(float), out.data(), sizeof(float), sum_floats, soon());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<float>(ranks * (g.rank() + i)));
    g.barrier(soon());
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, ShmGroupRanks,
                         ::testing::Combine(::testing::Values(1, 2, 3, 7, 8),
                                            ::testing::Values<size_t>(0, 1, 1009, 5 * kSlot + 17)));

// Zero copy: each rank's buffers come from its own SharedArena, which the
// peers map (through /proc/self/fd here, as processes do through each
// other's pid).
class SharedRanks : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// `count` floats in `arena` (nullptr: on the heap, outside every arena).
struct Floats {
  Floats(vnpu::SharedArena* arena, size_t count) : arena(arena), bytes(std::max<size_t>(count, 1) * sizeof(float)) {
    void* p = arena != nullptr ? arena->map(bytes, 512) : std::malloc(bytes);
    data = static_cast<float*>(p);
  }
  ~Floats() { arena != nullptr ? arena->unmap(data, bytes) : std::free(data); }
  vnpu::SharedArena* arena;
  size_t bytes;
  float* data;
};

template <typename Fn>
void on_sharing_ranks(int ranks, Fn fn, int rank_without_arena = -1) {
  on_ranks(ranks, [&](ShmGroup& g) {
    std::shared_ptr<vnpu::SharedArena> arena;
    if (g.rank() != rank_without_arena) arena = std::make_shared<vnpu::SharedArena>(std::size_t{64} << 20);
    const bool on = g.share_memory(arena, soon());
    EXPECT_EQ(on, rank_without_arena < 0 && ranks > 0);
    fn(g, arena.get());
  });
}

TEST_P(SharedRanks, CollectivesOnPeersBuffers) {
  const auto [ranks, count] = GetParam();
  on_sharing_ranks(ranks, [&, ranks = ranks, count = count](ShmGroup& g, vnpu::SharedArena* arena) {
    for (int round = 0; round < 2; ++round) {
      Floats data(arena, count);
      for (size_t i = 0; i < count; ++i) data.data[i] = static_cast<float>(g.rank() * 1000 + i + round);
      g.allreduce(data.data, count * sizeof(float), sizeof(float), sum_floats, soon());
      for (size_t i = 0; i < count; ++i) {
        const float want = 1000.0f * ranks * (ranks - 1) / 2 + static_cast<float>(ranks * (i + round));
        ASSERT_EQ(data.data[i], want) << "rank " << g.rank() << " element " << i;
      }
    }
    Floats b(arena, count);
    std::fill(b.data, b.data + count, g.rank() == 0 ? 7.0f : 0.0f);
    g.broadcast(b.data, count * sizeof(float), 0, soon());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(b.data[i], 7.0f);
    // all_gather with the input in this rank's block of the output (FSDP).
    Floats all(arena, count * ranks);
    std::fill(all.data, all.data + count * ranks, -1.0f);
    float* own = all.data + g.rank() * count;
    std::fill(own, own + count, static_cast<float>(g.rank()));
    g.allgather(own, count * sizeof(float), all.data, soon());
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(all.data[r * count + i], static_cast<float>(r));
    }
    // reduce_scatter into a separate output, then in place into the own block.
    Floats blocks(arena, count * ranks);
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < count; ++i) blocks.data[r * count + i] = static_cast<float>(r + i);
    }
    Floats out(arena, count);
    g.reduce_scatter(blocks.data, count * sizeof(float), out.data, sizeof(float), sum_floats, soon());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out.data[i], static_cast<float>(ranks * (g.rank() + i)));
    float* in_place = blocks.data + g.rank() * count;
    g.reduce_scatter(blocks.data, count * sizeof(float), in_place, sizeof(float), sum_floats, soon());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(in_place[i], static_cast<float>(ranks * (g.rank() + i)));
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, SharedRanks,
                         ::testing::Combine(::testing::Values(1, 2, 3, 7, 8),
                                            ::testing::Values<size_t>(0, 1009, 40009, 300007)));

TEST(ShmGroup, ZeroCopyFallsBackPerCollectiveForBuffersOutsideTheArena) {
  on_sharing_ranks(3, [](ShmGroup& g, vnpu::SharedArena* arena) {
    const size_t count = 70001;  // above kZeroCopyMinBytes
    // Rank 1's buffer is on the heap: every rank must take the slots.
    Floats data(g.rank() == 1 ? nullptr : arena, count);
    for (size_t i = 0; i < count; ++i) data.data[i] = static_cast<float>(g.rank() + i);
    g.allreduce(data.data, count * sizeof(float), sizeof(float), sum_floats, soon());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(data.data[i], static_cast<float>(3 + 3 * i));
  });
}

TEST(ShmGroup, ZeroCopyNeedsEveryRanksArena) {
  on_sharing_ranks(2, [](ShmGroup& g, vnpu::SharedArena*) {
    std::vector<float> data(70001, 1.0f);
    g.allreduce(data.data(), data.size() * sizeof(float), sizeof(float), sum_floats, soon());
    ASSERT_EQ(data.front(), 2.0f);
    ASSERT_EQ(data.back(), 2.0f);
  }, /*rank_without_arena=*/1);
}

TEST(ShmGroup, SignaturesAgreeOrNameTheRankThatDiffers) {
  on_ranks(3, [](ShmGroup& g) {
    uint64_t theirs = 0;
    EXPECT_EQ(g.compare_signatures(42, &theirs, soon()), -1);
    const int differs = g.compare_signatures(g.rank() == 2 ? 7 : 42, &theirs, soon());
    EXPECT_EQ(differs, g.rank() == 2 ? 0 : 2);
    EXPECT_EQ(theirs, g.rank() == 2 ? 42u : 7u);
    EXPECT_EQ(g.compare_signatures(1, &theirs, soon()), -1);  // and the group goes on
  });
}

TEST(ShmGroup, MeetPeersTellsWhetherEveryPeerReachedTheNextCollective) {
  ShmGroup root = ShmGroup::create(2, kSlot);
  ShmGroup peer = ShmGroup::attach(1, 2, kSlot, root.address());
  // The peer has not reached it: root gives up after its patience, announced.
  EXPECT_FALSE(root.meet_peers(std::chrono::microseconds(200)));
  // The peer finds root's announcement at once, and both run the collective.
  EXPECT_TRUE(peer.meet_peers(std::chrono::microseconds(0)));
  float a = 1.0f, b = 2.0f;
  std::thread other([&] { peer.allreduce(&b, sizeof(b), sizeof(b), sum_floats, soon()); });
  root.allreduce(&a, sizeof(a), sizeof(a), sum_floats, soon());
  other.join();
  EXPECT_EQ(a, 3.0f);
  EXPECT_EQ(b, 3.0f);
  // The announcement was for that collective only.
  EXPECT_FALSE(peer.meet_peers(std::chrono::microseconds(0)));
  // Ranks that reach the next one together meet.
  std::thread late([&] { EXPECT_TRUE(root.meet_peers(std::chrono::seconds(20))); });
  EXPECT_TRUE(peer.meet_peers(std::chrono::seconds(20)));
  late.join();
}

TEST(ShmGroup, StalledPeerTimesOut) {
  ShmGroup root = ShmGroup::create(2, kSlot);
  ShmGroup peer = ShmGroup::attach(1, 2, kSlot, root.address());  // maps, but never joins
  float x = 1.0f;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(root.allreduce(&x, sizeof(x), sizeof(x), sum_floats,
                              start + std::chrono::milliseconds(200)),
               vnpu::hccl::ShmTimeout);
  // It ends (a hang would not): a generous bound, since sanitizers on a loaded
  // 2-core machine have taken 6 s past a 200 ms deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

// A peer process that maps the group and exits without taking part: the
// waiting rank fails at once, with HCCL's code, instead of at its deadline;
// whether the exited peer is still a zombie or already reaped.
void expect_exited_peer_noticed(bool reap_first) {
  ShmGroup root = ShmGroup::create(2, kSlot);
  const std::string address = root.address();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ShmGroup peer = ShmGroup::attach(1, 2, kSlot, address);
    _exit(0);
  }
  if (reap_first) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
  } else {
    // Until its parent reaps it, an exited child stays a zombie: wait for that state.
    const std::string stat_path = "/proc/" + std::to_string(child) + "/stat";
    for (int i = 0; i < 2000; ++i) {
      std::ifstream stat(stat_path);
      std::string line;
      std::getline(stat, line);
      const size_t close = line.rfind(')');
      if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  float x = 1.0f;
  const auto start = std::chrono::steady_clock::now();
  try {
    root.allreduce(&x, sizeof(x), sizeof(x), sum_floats, start + std::chrono::seconds(120));
    ADD_FAILURE() << "the allreduce completed without its peer";
  } catch (const vnpu::hccl::ShmPeerExited& e) {
    EXPECT_NE(std::string(e.what()).find("EI0002: remote rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));  // well before the deadline
  if (!reap_first) waitpid(child, nullptr, 0);
}

TEST(ShmGroup, ExitedPeerIsNoticedBeforeTheDeadline) { expect_exited_peer_noticed(/*reap_first=*/true); }

TEST(ShmGroup, ZombiePeerIsNoticedBeforeTheDeadline) { expect_exited_peer_noticed(/*reap_first=*/false); }

TEST(ShmGroup, BadArguments) {
  EXPECT_THROW(ShmGroup::create(0, kSlot), std::invalid_argument);
  EXPECT_THROW(ShmGroup::create(2, 100), std::invalid_argument);
  EXPECT_THROW(ShmGroup::attach(1, 2, kSlot, "no-colon"), std::invalid_argument);
  EXPECT_THROW(ShmGroup::attach(1, 2, kSlot, "1:99999"), std::runtime_error);  // no such fd
}

}  // namespace
