// Ascend C on the virtual NPU: what a kernel asks about the core it runs on, and debug aids.
//
// Models: GetBlockIdx / GetBlockNum (and the block_idx / block_num variables of the
// .asc dialect), GetSubBlockIdx, GetTaskRation, GetDataBlockSizeInBytes,
// GetRuntimeUBSize, the system workspace (SetSysWorkspace / GetSysWorkSpacePtr /
// GetUserWorkspace, which skips the 16 MiB CANN reserves for the system on 910B),
// KERNEL_TASK_TYPE_DEFAULT with ASCEND_IS_AIC / ASCEND_IS_AIV, InitSocState, the
// 910B memory-size constants, and printf / PRINTF / DumpTensor / ASSERT / assert.
// A failed ASSERT or assert inside a kernel is a KernelError (the task fails with its
// message); outside a kernel, assert aborts like the standard one.
// Does not model: mixed AIC+AIV kernels (KERNEL_TYPE_MIX_*: a KernelError says so),
// GetSubBlockIdx other than 0, and the device printf's buffer and ordering (vNPU's
// printf writes straight to stdout, blocks interleaving).
#ifndef VNPU_ASCENDC_SYSTEM_H
#define VNPU_ASCENDC_SYSTEM_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "block_context.h"
#include "keywords.h"
#include "local_tensor.h"

// The .asc dialect's built-in variables: this block's index and the launch's block count.
inline thread_local int64_t block_idx = 0;
inline thread_local int64_t block_num = 1;

namespace AscendC {

// 910B (dav-c220) memory sizes in bytes, as CANN's constants name them.
constexpr uint32_t TOTAL_UB_SIZE = 192 * 1024;
constexpr int32_t TOTAL_VEC_LOCAL_SIZE = 184 * 1024;
constexpr uint32_t TOTAL_L1_SIZE = 512 * 1024 - 128;
constexpr uint32_t TOTAL_L0A_SIZE = 64 * 1024;
constexpr uint32_t TOTAL_L0B_SIZE = 64 * 1024;
constexpr uint32_t TOTAL_L0C_SIZE = 128 * 1024;

inline int64_t GetBlockIdx() { return vnpu::ascendc::detail::CurrentBlock("GetBlockIdx").block_idx; }
inline int64_t GetBlockNum() { return vnpu::ascendc::detail::CurrentBlock("GetBlockNum").block_num; }
inline int64_t GetSubBlockIdx() { return 0; }
inline int64_t GetTaskRation() { return 1; }
inline int64_t GetDataBlockSizeInBytes() { return 32; }
inline int64_t GetRuntimeUBSize() { return vnpu::ascendc::detail::CurrentBlock("GetRuntimeUBSize").env->ub_bytes; }
inline void InitSocState() {}

// The bytes at the start of a kernel's workspace that CANN reserves for the system
// (Matmul and other library code) on 910B; the user's part follows.
constexpr uint64_t kSystemWorkspaceBytes = 16ull * 1024 * 1024;

inline void SetSysWorkspace(GM_ADDR workspace) {
  vnpu::ascendc::detail::CurrentBlock("SetSysWorkspace").sys_workspace = workspace;
}
inline GM_ADDR GetSysWorkspacePtr() { return vnpu::ascendc::detail::CurrentBlock("GetSysWorkSpacePtr").sys_workspace; }
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) {
  return workspace == nullptr ? nullptr : workspace + kSystemWorkspaceBytes;
}

// The C library's printf itself, so that `printf` in a kernel that uses namespace
// AscendC is not ambiguous between the two.
using ::printf;

// Prints the first `count` elements of a local tensor under a description number.
template <typename T>
inline void DumpTensor(const LocalTensor<T>& tensor, uint32_t desc, uint32_t count) {
  std::printf("DumpTensor: desc=%u, block %lld, %s\n", desc, static_cast<long long>(block_idx),
              vnpu::ascendc::detail::PositionName(tensor.Position()));
  tensor.Print(count);
}

}  // namespace AscendC

// CANN's spelling with a capital S, used unqualified by Matmul kernels.
inline GM_ADDR GetSysWorkSpacePtr() { return AscendC::GetSysWorkspacePtr(); }
using AscendC::GetUserWorkspace;
using AscendC::SetSysWorkspace;

namespace vnpu {
namespace ascendc {
namespace detail {

inline void SetKernelType(KernelMetaType type) {
  BlockContext& ctx = CurrentBlock("KERNEL_TASK_TYPE_DEFAULT");
  switch (type) {
    case KERNEL_TYPE_AIV_ONLY:
    case KERNEL_TYPE_MIX_AIV_1_0:
      ctx.core = CoreType::kAiv;
      return;
    case KERNEL_TYPE_AIC_ONLY:
    case KERNEL_TYPE_MIX_AIC_1_0:
      ctx.core = CoreType::kAic;
      if (ctx.block_num > ctx.env->cube_core_num) {
        Fail(Str("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY): a Cube kernel runs on AIC cores, but it was "
                 "launched with blockDim ",
                 ctx.block_num, " > ", ctx.env->cube_core_num, " AIC cores of ", ctx.env->soc_version));
      }
      return;
    default:
      Fail("KERNEL_TASK_TYPE_DEFAULT: mixed AIC+AIV kernels (KERNEL_TYPE_MIX_AIC_1_1/1_2) are not modelled by vNPU; "
           "split the Cube and Vector parts into two kernels");
  }
}

// Records that the block uses the Cube unit (Matmul, Mmad): a kernel launched without a
// known kind gets the vector limit at launch, but Cube work runs on AIC cores.
inline void NoteCubeUse(const char* api) {
  BlockContext& ctx = CurrentBlock(api);
  if (ctx.uses_cube) return;
  ctx.uses_cube = true;
  if (ctx.block_num > ctx.env->cube_core_num) {
    Fail(Str(api, ": the kernel uses the Cube unit, which runs on AIC cores, but it was launched with blockDim ",
             ctx.block_num, " > ", ctx.env->cube_core_num, " AIC cores of ", ctx.env->soc_version));
  }
}

// Formats an assert failure: "<cond>" [: message] at file:line.
inline std::string AssertMessage(const char* cond, const char* file, int line, const char* fmt = nullptr, ...) {
  std::string msg = Str("assertion failed: ", cond);
  if (fmt != nullptr) {
    char buf[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    msg += Str(": ", buf);
  }
  return Str(msg, " (", file, ":", line, ")");
}

[[noreturn]] inline void AssertFailed(const std::string& message) {
  if (tls_block != nullptr) Fail(message);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::abort();
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

#define KERNEL_TASK_TYPE_DEFAULT(type) ::vnpu::ascendc::detail::SetKernelType(type)
#define KERNEL_TASK_TYPE(key, type) ((void)(key), ::vnpu::ascendc::detail::SetKernelType(type))
#define ASCEND_IS_AIV \
  (::vnpu::ascendc::detail::CurrentBlock("ASCEND_IS_AIV").core == ::vnpu::ascendc::detail::CoreType::kAiv)
#define ASCEND_IS_AIC \
  (::vnpu::ascendc::detail::CurrentBlock("ASCEND_IS_AIC").core == ::vnpu::ascendc::detail::CoreType::kAic)
#define ASCEND_IS_NOT_AIV (!ASCEND_IS_AIV)
#define ASCEND_IS_NOT_AIC (!ASCEND_IS_AIC)

#ifndef PRINTF
#define PRINTF AscendC::printf
#endif

#ifndef ASSERT
#define ASSERT(cond) \
  ((cond) ? (void)0 : ::vnpu::ascendc::detail::AssertFailed(::vnpu::ascendc::detail::AssertMessage(#cond, __FILE__, __LINE__)))
#endif

// Ascend C's assert takes an optional printf-style message after the condition.
// (A later #include <cassert> restores the standard one-argument assert.)
#undef assert
#define assert(cond, ...)                                                                                   \
  ((cond) ? (void)0                                                                                         \
          : ::vnpu::ascendc::detail::AssertFailed(                                                          \
                ::vnpu::ascendc::detail::AssertMessage(#cond, __FILE__, __LINE__, ##__VA_ARGS__)))

#endif  // VNPU_ASCENDC_SYSTEM_H
