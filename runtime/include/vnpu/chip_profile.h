// Chip profiles: the static facts of an Ascend chip that the virtual device
// reports (name, SoC version, memory, core counts, L2 size).
//
// Values follow what torch_npu reports on the real chips; SoC version numbers
// follow the ranges libraries such as vllm-ascend test (910B1-910B4 = 220-225,
// 910_93 = 250-256, 310P = 200-205, 910A/910 = 100-104).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vnpu {

struct ChipProfile {
  std::string name;             // "Ascend910B2": what get_device_name() returns
  int soc_version = 0;          // torch_npu.npu.get_soc_version()
  std::uint64_t total_memory_bytes = 0;
  int cube_core_num = 0;        // AI Cube cores
  int vector_core_num = 0;      // AI Vector cores
  std::uint64_t l2_cache_bytes = 0;
  int capability_major = 0;     // get_device_capability(), kept for parity with torch.cuda
  int capability_minor = 0;
  bool supports_bf16 = true;    // 310P has no bfloat16
  // On-chip buffers of one AI core, which Ascend C kernels allocate from
  // (TPipe::InitBuffer): the Unified Buffer of the vector unit, and the
  // cube unit's L1 and L0A/L0B/L0C. Per DaVinci generation.
  std::uint32_t ub_bytes = 0;
  std::uint32_t l1_bytes = 0;
  std::uint32_t l0a_bytes = 0;
  std::uint32_t l0b_bytes = 0;
  std::uint32_t l0c_bytes = 0;
};

// The profile used when VNPU_CHIP is unset.
const char* default_chip_name();

// All profiles the runtime knows, in a stable order.
const std::vector<ChipProfile>& known_chip_profiles();

// Looks a profile up by name (case-insensitive, "Ascend" prefix optional).
// Returns nullptr when unknown.
const ChipProfile* find_chip_profile(const std::string& name);

}  // namespace vnpu
