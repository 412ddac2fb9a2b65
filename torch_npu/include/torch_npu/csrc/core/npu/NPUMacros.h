// vNPU: torch_npu's public C++ API, as extensions include it.
//
// These headers are vNPU's own, written to the signatures of real
// torch_npu's (torch_npu/csrc/...): an extension written for torch_npu
// compiles against them unchanged and links against libtorch_npu.so, which
// in vNPU is torch_npu/_C.so (torch_npu/lib/libtorch_npu.so is a linker
// script naming it). Import torch_npu before loading such an extension.
#pragma once

#include <torch/headeronly/version.h>

#define C10_NPU_EXPORT __attribute__((__visibility__("default")))
#define C10_NPU_IMPORT C10_NPU_EXPORT
#define C10_NPU_API C10_NPU_EXPORT
#define TORCH_NPU_API C10_NPU_EXPORT

// The largest device count torch_npu supports.
#define C10_COMPILE_TIME_MAX_NPUS 16

namespace c10_npu {
namespace detail {
// Compares the torch an extension was compiled against (its TORCH_VERSION)
// with the torch torch_npu runs with, once per version: a mismatch is
// reported on stderr naming both and what to do (rebuild the extension).
// Returns true when they match.
C10_NPU_API bool check_extension_torch_version(const char* built_with) noexcept;
// Runs when the extension is loaded (one per translation unit; cheap).
static const bool extension_torch_version_matches = check_extension_torch_version(TORCH_VERSION);
}  // namespace detail
}  // namespace c10_npu
