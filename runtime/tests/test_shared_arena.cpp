// SharedArena: blocks carved from one memfd, visible through a second
// mapping (as a peer process sees them), coalesced and punched on return.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "vnpu/device_memory.h"
#include "vnpu/shared_arena.h"

namespace {

using vnpu::PeerMapping;
using vnpu::SharedArena;

constexpr std::size_t kSmallReserve = std::size_t{64} << 20;

TEST(SharedArena, BlocksArePageAlignedAndDisjoint) {
  SharedArena arena(kSmallReserve);
  std::vector<char*> blocks;
  for (std::size_t bytes : {1, 4096, 4097, 100000}) {
    char* p = static_cast<char*>(arena.map(bytes, 512));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % SharedArena::kPageBytes, 0u);
    std::memset(p, 0x5a, bytes);
    for (char* q : blocks) EXPECT_NE(p, q);
    blocks.push_back(p);
  }
  EXPECT_EQ(arena.map(0, 512), nullptr);
  EXPECT_EQ(arena.map(16, 8192), nullptr);  // alignment beyond a page
}

TEST(SharedArena, PeerMappingSeesTheSameBytes) {
  SharedArena arena(kSmallReserve);
  char* p = static_cast<char*>(arena.map(8192, 512));
  ASSERT_NE(p, nullptr);
  const std::uint64_t offset = arena.offset_of(p, 8192);
  ASSERT_NE(offset, SharedArena::kNotInside);
  PeerMapping peer(arena.address(), arena.size());
  std::strcpy(p, "written by the owner");
  EXPECT_STREQ(peer.base() + offset, "written by the owner");
  std::strcpy(peer.base() + offset + 4096, "written by a peer");
  EXPECT_STREQ(p + 4096, "written by a peer");
}

TEST(SharedArena, OffsetOfRejectsOutsideRanges) {
  SharedArena arena(kSmallReserve);
  char* p = static_cast<char*>(arena.map(4096, 512));
  int on_stack = 0;
  EXPECT_EQ(arena.offset_of(&on_stack, sizeof(on_stack)), SharedArena::kNotInside);
  EXPECT_EQ(arena.offset_of(p, kSmallReserve + 1), SharedArena::kNotInside);
  EXPECT_EQ(arena.offset_of(arena.base() + arena.size() - 8, 16), SharedArena::kNotInside);
  EXPECT_EQ(arena.offset_of(arena.base() + arena.size() - 8, 8), arena.size() - 8);
}

TEST(SharedArena, ReturnedBlocksCoalesceAndReadAsZero) {
  SharedArena arena(std::size_t{1} << 20);  // 256 pages
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(arena.map(256 << 10, 512));
  for (void* b : blocks) ASSERT_NE(b, nullptr);
  EXPECT_EQ(arena.map(4096, 512), nullptr) << "the reservation is full";
  std::memset(blocks[1], 7, 256 << 10);
  // Return the middle two, out of order: they must merge into one range.
  arena.unmap(blocks[2], 256 << 10);
  arena.unmap(blocks[1], 256 << 10);
  char* merged = static_cast<char*>(arena.map(512 << 10, 512));
  ASSERT_EQ(merged, blocks[1]);
  EXPECT_EQ(merged[0], 0) << "punched pages come back as zeros";
  EXPECT_EQ(merged[(256 << 10) - 1], 0);
}

TEST(SharedArena, BacksDeviceMemory) {
  auto arena = std::make_shared<SharedArena>(kSmallReserve);
  vnpu::DeviceMemory memory(0, kSmallReserve);
  memory.set_arena(arena);
  void* p = memory.allocate(1 << 20);
  EXPECT_NE(arena->offset_of(p, 1 << 20), SharedArena::kNotInside);
  memory.release(p);
}

TEST(SharedArena, UnknownPeerAddressIsAClearError) {
  EXPECT_THROW(PeerMapping("not-an-address", 4096), std::invalid_argument);
  try {
    PeerMapping("999999999:3", 4096);
    FAIL() << "mapped a process that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/999999999/fd/3"), std::string::npos) << e.what();
  }
}

}  // namespace
