#include "vnpu/chip_profile.h"

#include <cctype>
#include <cstddef>

namespace vnpu {
namespace {

constexpr std::uint64_t kMiB = 1024ull * 1024ull;
constexpr std::uint64_t kGiB = 1024ull * kMiB;

ChipProfile make(const char* name, int soc_version, std::uint64_t memory, int cube, int vector,
                 std::uint64_t l2, int major, int minor, bool bf16) {
  ChipProfile p;
  p.name = name;
  p.soc_version = soc_version;
  p.total_memory_bytes = memory;
  p.cube_core_num = cube;
  p.vector_core_num = vector;
  p.l2_cache_bytes = l2;
  p.capability_major = major;
  p.capability_minor = minor;
  p.supports_bf16 = bf16;
  // Buffers per generation: c220 (910B, 910_93) has a 192 KiB UB, 512 KiB L1
  // and a 128 KiB L0C; c100 (910A) and m200 (310P) 256 KiB UB, 1 MiB L1 and
  // 256 KiB L0C. L0A and L0B are 64 KiB on all of them. The 950's figures
  // are not published: it is given c220's L1 and c100's UB and L0C.
  constexpr std::uint32_t kKiB = 1024;
  const bool c220 = major == 2 && minor == 2;
  p.ub_bytes = c220 ? 192 * kKiB : 256 * kKiB;
  p.l1_bytes = (c220 || major == 3) ? 512 * kKiB : 1024 * kKiB;
  p.l0a_bytes = 64 * kKiB;
  p.l0b_bytes = 64 * kKiB;
  p.l0c_bytes = c220 ? 128 * kKiB : 256 * kKiB;
  return p;
}

std::vector<ChipProfile> build_profiles() {
  // Figures are the published ones for each chip (HBM per device, AI Cube /
  // AI Vector core counts, L2). Capability mirrors the DaVinci architecture
  // generation: c100 (910A) -> 1.0, m200 (310P) -> 2.0, c220 (910B, 910_93)
  // -> 2.2, 950 -> 3.5. The 910_93 dies are reported one device per die.
  return {
      make("Ascend910B1", 220, 64 * kGiB, 24, 48, 192 * kMiB, 2, 2, true),
      make("Ascend910B2", 221, 64 * kGiB, 24, 48, 192 * kMiB, 2, 2, true),
      make("Ascend910B3", 223, 64 * kGiB, 20, 40, 192 * kMiB, 2, 2, true),
      make("Ascend910B4", 224, 32 * kGiB, 20, 40, 96 * kMiB, 2, 2, true),
      make("Ascend910_9391", 250, 64 * kGiB, 24, 48, 192 * kMiB, 2, 2, true),
      make("Ascend910_9392", 251, 64 * kGiB, 24, 48, 192 * kMiB, 2, 2, true),
      make("Ascend910A", 100, 32 * kGiB, 32, 0, 32 * kMiB, 1, 0, false),
      make("Ascend310P3", 202, 24 * kGiB, 8, 7, 16 * kMiB, 2, 0, false),
      make("Ascend950", 260, 128 * kGiB, 32, 64, 256 * kMiB, 3, 5, true),
  };
}

// Lower-cases `name` and drops a leading "ascend", so that "ascend910b2",
// "910B2" and "Ascend910B2" all compare equal.
std::string normalise(const std::string& name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  static const std::string kPrefix = "ascend";
  if (out.compare(0, kPrefix.size(), kPrefix) == 0) out.erase(0, kPrefix.size());
  return out;
}

}  // namespace

const char* default_chip_name() { return "Ascend910B2"; }

const std::vector<ChipProfile>& known_chip_profiles() {
  static const std::vector<ChipProfile> profiles = build_profiles();
  return profiles;
}

const ChipProfile* find_chip_profile(const std::string& name) {
  const std::string wanted = normalise(name);
  if (wanted.empty()) return nullptr;
  for (const ChipProfile& profile : known_chip_profiles()) {
    if (normalise(profile.name) == wanted) return &profile;
  }
  return nullptr;
}

}  // namespace vnpu
