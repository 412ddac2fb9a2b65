// Ascend C on the virtual NPU: the state of the AI core a block runs on.
//
// Models: what one AI core carries while it runs one block of a kernel -- its block
// index, its own Unified Buffer / L1 / L0A / L0B / L0C / bias-table memories, the
// vector mask register, the atomic mode of its DMA engine, its event flags and the
// TPipe that owns its buffers -- and the two kinds of kernel-side failure: errors
// (KernelError, which fail the kernel task with a message) and warnings printed once
// per kernel name.
// Does not model: several blocks sharing one core over time (each block gets a fresh
// core state; memories start zeroed, not with the previous block's leftovers).
//
// Every block runs on its own thread, and the thread-local CurrentBlock() is how the
// free functions of the Ascend C API (GetBlockIdx, DataCopy, ...) reach the core they
// run on; Ascend C passes no core handle through its API, so neither can we.
#ifndef VNPU_ASCENDC_BLOCK_CONTEXT_H
#define VNPU_ASCENDC_BLOCK_CONTEXT_H

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "events.h"
#include "host_interface.h"
#include "keywords.h"
#include "positions.h"

namespace vnpu {
namespace ascendc {

// A failure a kernel causes (bad arguments, queue misuse, out-of-bounds access,
// capacity exceeded). The launch turns the first one of a task into the task's
// failure message, prefixed with "<kernel> block <i>: ".
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a block's kernel was launched: the kind decides the blockDim limit.
enum class KernelKind : uint8_t {
  kAuto,    // unknown at the launch site: vector limit, cube use re-checked when it happens
  kVector,  // AIV-only kernel: blockDim <= vector_core_num
  kCube,    // AIC-only kernel: blockDim <= cube_core_num
  kMix,     // mixed AIC+AIV kernel: blockDim counts AIC cores, <= cube_core_num
};

namespace detail {

enum class AtomicOp : uint8_t { kNone, kAdd, kMax, kMin };
enum class CoreType : uint8_t { kAiv, kAic };

// The memories of one AI core, in bytes. Owned by the launch (launch.h).
struct CoreMemories {
  uint8_t* ub = nullptr;
  uint8_t* l1 = nullptr;
  uint8_t* l0a = nullptr;
  uint8_t* l0b = nullptr;
  uint8_t* l0c = nullptr;
  uint8_t* bias = nullptr;
  uint8_t* fixbuf = nullptr;
};

// 910B's bias table and fixpipe buffer (not part of VnpuKernelEnv: fixed by the chip).
constexpr uint32_t kBiasTableBytes = 1024;
constexpr uint32_t kFixbufBytes = 4096;

// An allocation one of a launch's pointer arguments lies in: [base, base + size).
struct GmLaunchRegion {
  const uint8_t* base;
  size_t size;
};

struct BlockContext {
  const char* kernel_name = "";
  const VnpuKernelEnv* env = nullptr;
  uint32_t block_idx = 0;
  uint32_t block_num = 1;
  KernelKind launch_kind = KernelKind::kAuto;
  CoreType core = CoreType::kAiv;
  CoreMemories mem;

  // Vector mask register (SetVectorMask / SetMaskCount / SetMaskNorm).
  bool mask_counter_mode = false;
  uint64_t mask_bits[2] = {~0ull, ~0ull};

  // DMA atomic mode (SetAtomicAdd<T> / SetAtomicNone): the op and sizeof/type tag of T.
  AtomicOp atomic_op = AtomicOp::kNone;
  const char* atomic_type = "";

  // SetFlag/WaitFlag balance per event kind and id.
  int32_t events[kHardEventCount][kEventIdsPerKind] = {};

  // The device allocations the launch's pointer arguments lay in, looked up when
  // the kernel was launched (launch.h): the kernel runs later, in stream order,
  // when the caller may have freed them (legal: the allocator is stream-ordered).
  const GmLaunchRegion* launch_regions = nullptr;
  size_t launch_region_count = 0;

  void* tpipe = nullptr;              // the live TPipe of this block (one at a time)
  uint8_t* sys_workspace = nullptr;   // SetSysWorkspace / GetSysWorkSpacePtr
  bool uses_cube = false;             // the block used the Cube unit (Matmul, Mmad)

  uint8_t* MemoryOf(AscendC::Hardware h) const {
    switch (h) {
      case AscendC::Hardware::UB: return mem.ub;
      case AscendC::Hardware::L1: return mem.l1;
      case AscendC::Hardware::L0A: return mem.l0a;
      case AscendC::Hardware::L0B: return mem.l0b;
      case AscendC::Hardware::L0C: return mem.l0c;
      case AscendC::Hardware::BIAS: return mem.bias;
      case AscendC::Hardware::FIXBUF: return mem.fixbuf;
      default: return nullptr;
    }
  }
  uint32_t CapacityOf(AscendC::Hardware h) const {
    switch (h) {
      case AscendC::Hardware::UB: return env->ub_bytes;
      case AscendC::Hardware::L1: return env->l1_bytes;
      case AscendC::Hardware::L0A: return env->l0a_bytes;
      case AscendC::Hardware::L0B: return env->l0b_bytes;
      case AscendC::Hardware::L0C: return env->l0c_bytes;
      case AscendC::Hardware::BIAS: return kBiasTableBytes;
      case AscendC::Hardware::FIXBUF: return kFixbufBytes;
      default: return 0;
    }
  }
};

// The block the calling thread is running, or nullptr outside a kernel.
inline thread_local BlockContext* tls_block = nullptr;

// Streams its arguments into one string (error messages).
template <typename... Args>
inline std::string Str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

[[noreturn]] inline void Fail(const std::string& message) { throw KernelError(message); }

// The block the calling thread runs; `api` names the caller for the error when there is none.
inline BlockContext& CurrentBlock(const char* api) {
  if (tls_block == nullptr) {
    throw std::logic_error(Str("AscendC::", api,
                               " was called outside a kernel: Ascend C device APIs only work inside a kernel "
                               "launched with <<<...>>> or ACLRT_LAUNCH_KERNEL"));
  }
  return *tls_block;
}

// Prints `message` to stderr once per kernel name and warning kind; later ones of the
// same kind for that kernel are dropped (a misaligned copy in a loop would flood the log).
inline void WarnOnce(const std::string& kernel, const char* kind, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(kernel + '\0' + kind).second) return;
  }
  std::fprintf(stderr, "[vNPU] warning: kernel %s: %s (shown once per kernel)\n", kernel.c_str(), message.c_str());
}

// A rule the device enforces only by misbehaving (alignment): an error in strict
// mode, otherwise a warning once per kernel, after which the caller goes on the
// way the device would.
inline void StrictOrWarn(const char* kind, const std::string& message) {
  BlockContext& ctx = CurrentBlock(kind);
  if (ctx.env->strict) {
    Fail(message + " [strict mode]");
  }
  WarnOnce(ctx.kernel_name, kind, message + "; set strict mode to make this an error");
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

#endif  // VNPU_ASCENDC_BLOCK_CONTEXT_H
