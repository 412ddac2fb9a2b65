#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "vnpu/device_memory.h"
#include "vnpu/memory_arena.h"
#include "vnpu/error.h"

namespace {

using vnpu::DeviceMemory;
using vnpu::Error;
using vnpu::ErrorCode;

TEST(DeviceMemory, AllocatesAlignedRoundedBlocks) {
  DeviceMemory mem(0, 1 << 20);
  EXPECT_EQ(mem.allocate(0), nullptr);
  EXPECT_EQ(mem.reserved(), 0u);

  void* p = mem.allocate(1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % DeviceMemory::kAlignmentBytes, 0u);
  EXPECT_EQ(mem.reserved(), DeviceMemory::kAlignmentBytes);
  EXPECT_EQ(mem.free_bytes(), (1u << 20) - DeviceMemory::kAlignmentBytes);

  char* c = static_cast<char*>(p);
  EXPECT_TRUE(mem.owns(c));
  EXPECT_TRUE(mem.owns(c + DeviceMemory::kAlignmentBytes - 1));
  EXPECT_FALSE(mem.owns(c + DeviceMemory::kAlignmentBytes));
  EXPECT_FALSE(mem.owns(c - 1));
  c[0] = 1;  // the block is real, writable memory
  c[DeviceMemory::kAlignmentBytes - 1] = 2;

  mem.release(p);
  EXPECT_EQ(mem.reserved(), 0u);
  EXPECT_FALSE(mem.owns(p));
  mem.release(nullptr);  // ignored
}

TEST(DeviceMemory, ReservesMoreThanTheHostHasUntilTouched) {
  // A 910B2 has 64 GiB; hosts often have less. Reserving half of it must
  // work as on the chip (only written pages take RAM).
  constexpr std::size_t kGiB = std::size_t{1} << 30;
  DeviceMemory mem(0, 128 * kGiB);
  void* p = mem.allocate(64 * kGiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % DeviceMemory::kAlignmentBytes, 0u);
  char* c = static_cast<char*>(p);
  c[0] = 1;
  c[64 * kGiB - 1] = 2;
  EXPECT_EQ(c[0] + c[64 * kGiB - 1], 3);
  mem.release(p);
  void* small = mem.allocate(4096);  // below the threshold: malloc's, as before
  ASSERT_NE(small, nullptr);
  mem.release(small);
  EXPECT_EQ(mem.reserved(), 0u);
}

TEST(DeviceMemory, CapacityIsEnforcedWithMessage) {
  DeviceMemory mem(2, 4096);
  void* a = mem.allocate(4096);
  ASSERT_NE(a, nullptr);
  try {
    mem.allocate(1);
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_STREQ(e.what(),
                 "virtual NPU 2 out of memory: tried to reserve 512 bytes, 4096 of 4096 bytes "
                 "already reserved");
  }
  EXPECT_EQ(mem.reserved(), 4096u);  // the failed attempt reserved nothing
  mem.release(a);
  void* b = mem.allocate(4096);  // room again after release
  EXPECT_NE(b, nullptr);
  mem.release(b);

  try {
    mem.allocate(8192);
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("tried to reserve 8192 bytes, 0 of 4096"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceMemory, LoweringCapacityKeepsExistingBlocks) {
  DeviceMemory mem(0, 8192);
  void* a = mem.allocate(4096);
  mem.set_capacity(1024);
  EXPECT_EQ(mem.free_bytes(), 0u);
  EXPECT_THROW(mem.allocate(512), Error);
  EXPECT_TRUE(mem.owns(a));
  mem.release(a);
  EXPECT_EQ(mem.free_bytes(), 1024u);
}

TEST(DeviceMemory, ReleaseOfForeignPointerIsRejected) {
  DeviceMemory mem(1, 1 << 20);
  void* host = std::malloc(64);
  ASSERT_NE(host, nullptr);
  try {
    mem.release(host);
    FAIL() << "expected invalid value";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
    EXPECT_NE(std::string(e.what()).find("virtual NPU 1"), std::string::npos) << e.what();
  }
  std::free(host);

  void* p = mem.allocate(2048);
  EXPECT_THROW(mem.release(static_cast<char*>(p) + 512), Error);  // interior pointer
  EXPECT_EQ(mem.reserved(), 2048u);
  mem.release(p);
  EXPECT_THROW(mem.release(p), Error);  // double free
  EXPECT_EQ(mem.reserved(), 0u);

  // A block of another device is foreign too.
  DeviceMemory other(2, 1 << 20);
  void* q = other.allocate(512);
  EXPECT_THROW(mem.release(q), Error);
  EXPECT_FALSE(mem.owns(q));
  other.release(q);
}

TEST(DeviceMemory, LargeAllocationsAreLazy) {
  // 4 GiB is reserved without being touched; the test would take seconds
  // (and the RAM) if the runtime zeroed it.
  constexpr std::uint64_t kGiB = 1ull << 30;
  DeviceMemory mem(0, 64 * kGiB);
  void* p = mem.allocate(4 * kGiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(mem.reserved(), 4 * kGiB);
  mem.release(p);
}

TEST(DeviceMemory, ConcurrentAllocateNeverExceedsCapacity) {
  constexpr std::uint64_t kCapacity = 256 * 1024;
  DeviceMemory mem(0, kCapacity);
  std::atomic<std::uint64_t> live{0};      // bytes the threads hold
  std::atomic<bool> exceeded{false};
  std::atomic<int> ooms{0};
  std::atomic<int> wrong_code{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<std::size_t> size_dist(1, 64 * 1024);
      std::vector<std::pair<void*, std::size_t>> held;
      for (int i = 0; i < 2000; ++i) {
        if (held.size() < 4) {
          const std::size_t rounded =
              (size_dist(rng) + DeviceMemory::kAlignmentBytes - 1) & ~(DeviceMemory::kAlignmentBytes - 1);
          try {
            void* p = mem.allocate(rounded);
            const std::uint64_t now = live.fetch_add(rounded) + rounded;
            if (now > kCapacity || mem.reserved() > kCapacity) exceeded = true;
            held.emplace_back(p, rounded);
          } catch (const vnpu::Error& e) {
            if (e.code() != ErrorCode::kOutOfMemory) ++wrong_code;
            ++ooms;
          }
        } else {
          const std::size_t k = rng() % held.size();
          live.fetch_sub(held[k].second);
          mem.release(held[k].first);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
      for (const auto& block : held) {
        live.fetch_sub(block.second);
        mem.release(block.first);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(exceeded.load());
  EXPECT_EQ(wrong_code.load(), 0);
  EXPECT_EQ(mem.reserved(), 0u);
  EXPECT_EQ(live.load(), 0u);
  // 8 threads x 4 blocks x ~32 KiB on average is far above 256 KiB.
  RecordProperty("ooms", ooms.load());
}

}  // namespace

namespace {

// Counts what passes through it; hands out host memory.
class CountingArena final : public vnpu::MemoryArena {
 public:
  void* map(std::size_t bytes, std::size_t alignment) override {
    ++maps;
    mapped += bytes;
    return host.map(bytes, alignment);
  }
  void unmap(void* ptr, std::size_t bytes) override {
    ++unmaps;
    mapped -= bytes;
    host.unmap(ptr, bytes);
  }
  const char* name() const override { return "counting"; }
  std::atomic<int> maps{0}, unmaps{0};
  std::atomic<std::size_t> mapped{0};

 private:
  vnpu::HostArena host;
};

TEST(DeviceMemoryArena, BlocksComeFromThePluggedArena) {
  DeviceMemory memory(0, 1 << 20);
  EXPECT_STREQ(memory.arena()->name(), "host");
  auto arena = std::make_shared<CountingArena>();
  memory.set_arena(arena);
  void* a = memory.allocate(1000);
  void* b = memory.allocate(4096);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % DeviceMemory::kAlignmentBytes, 0u);
  EXPECT_EQ(arena->maps.load(), 2);
  EXPECT_EQ(arena->mapped.load(), 1024u + 4096u);  // sizes rounded to the alignment
  // Not while blocks of the arena are live.
  const auto host = vnpu::host_arena();
  try {
    memory.set_arena(host);
    FAIL() << "changed the arena under live blocks";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
  }
  memory.release(a);
  memory.release(b);
  EXPECT_EQ(arena->unmaps.load(), 2);
  EXPECT_EQ(arena->mapped.load(), 0u);
  memory.set_arena(host);
}

class EmptyArena final : public vnpu::MemoryArena {
 public:
  void* map(std::size_t, std::size_t) override { return nullptr; }
  void unmap(void*, std::size_t) override {}
  const char* name() const override { return "empty"; }
};

TEST(DeviceMemoryArena, AnExhaustedArenaIsOutOfMemoryAndReleasesTheReservation) {
  DeviceMemory memory(3, 1 << 20);
  memory.set_arena(std::make_shared<EmptyArena>());
  try {
    memory.allocate(512);
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("empty arena"), std::string::npos) << e.what();
  }
  EXPECT_EQ(memory.reserved(), 0u);
}

}  // namespace
