#include <gtest/gtest.h>

#include <set>

#include "vnpu/chip_profile.h"

namespace {

constexpr std::uint64_t kGiB = 1024ull * 1024ull * 1024ull;
constexpr std::uint64_t kMiB = 1024ull * 1024ull;

TEST(ChipProfile, DefaultIsAscend910B2) {
  EXPECT_STREQ(vnpu::default_chip_name(), "Ascend910B2");
  const vnpu::ChipProfile* p = vnpu::find_chip_profile(vnpu::default_chip_name());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->name, "Ascend910B2");
  EXPECT_EQ(p->total_memory_bytes, 64 * kGiB);
  EXPECT_EQ(p->cube_core_num, 24);
  EXPECT_EQ(p->vector_core_num, 48);
  EXPECT_EQ(p->l2_cache_bytes, 192 * kMiB);
  EXPECT_TRUE(p->supports_bf16);
  EXPECT_GE(p->soc_version, 220);
  EXPECT_LE(p->soc_version, 225);
}

TEST(ChipProfile, LookupIsCaseInsensitiveAndPrefixOptional) {
  const vnpu::ChipProfile* canonical = vnpu::find_chip_profile("Ascend910B4");
  ASSERT_NE(canonical, nullptr);
  EXPECT_EQ(vnpu::find_chip_profile("ascend910b4"), canonical);
  EXPECT_EQ(vnpu::find_chip_profile("ASCEND910B4"), canonical);
  EXPECT_EQ(vnpu::find_chip_profile("910B4"), canonical);
  EXPECT_EQ(vnpu::find_chip_profile("910b4"), canonical);
  EXPECT_EQ(canonical->total_memory_bytes, 32 * kGiB);
}

TEST(ChipProfile, UnknownNamesAreRejected) {
  EXPECT_EQ(vnpu::find_chip_profile("Ascend999"), nullptr);
  EXPECT_EQ(vnpu::find_chip_profile(""), nullptr);
  EXPECT_EQ(vnpu::find_chip_profile("Ascend"), nullptr);
  EXPECT_EQ(vnpu::find_chip_profile("Ascend910B2 "), nullptr);
}

TEST(ChipProfile, FamiliesHaveExpectedSocVersions) {
  const auto soc = [](const char* name) {
    const vnpu::ChipProfile* p = vnpu::find_chip_profile(name);
    return p == nullptr ? -1 : p->soc_version;
  };
  for (const char* name : {"Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4"}) {
    EXPECT_GE(soc(name), 220) << name;
    EXPECT_LE(soc(name), 225) << name;
  }
  EXPECT_GE(soc("Ascend910_9391"), 250);
  EXPECT_GE(soc("Ascend910_9392"), 250);
  EXPECT_EQ(soc("Ascend910A"), 100);
  EXPECT_EQ(soc("Ascend310P3"), 202);
  EXPECT_EQ(soc("Ascend950"), 260);
  const vnpu::ChipProfile* p310 = vnpu::find_chip_profile("Ascend310P3");
  ASSERT_NE(p310, nullptr);
  EXPECT_FALSE(p310->supports_bf16);
}

TEST(ChipProfile, KnownProfilesAreUniqueAndFindable) {
  std::set<std::string> names;
  std::set<int> socs;
  for (const vnpu::ChipProfile& p : vnpu::known_chip_profiles()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_TRUE(socs.insert(p.soc_version).second) << p.name;
    EXPECT_EQ(vnpu::find_chip_profile(p.name), &p);
    EXPECT_GT(p.total_memory_bytes, 0u) << p.name;
    EXPECT_GT(p.cube_core_num, 0) << p.name;
  }
  EXPECT_GE(names.size(), 9u);
}

}  // namespace
