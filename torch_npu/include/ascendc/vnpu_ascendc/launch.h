// Ascend C on the virtual NPU: launching a kernel.
//
// Models: the two ways host code starts a kernel --
//   name<<<blockDim, l2ctrl, stream>>>(args...)   (rewritten by
//       torch_npu/utils/_ascendc_source.py into vnpu::ascendc::LaunchKernel<kind>(...)),
//   ACLRT_LAUNCH_KERNEL(name)(blockDim, stream, args...)   (a macro, no generated header)
// -- and what happens then:
//  1. The launch checks blockDim against the device (vnpuGetKernelEnv): 0, more than
//     the AIV cores for a vector kernel, or more than the AIC cores for a Cube or mixed
//     kernel, throws std::invalid_argument naming the kernel, the value and the limit.
//  2. It copies the arguments into a heap task (like the device's argument buffer: the
//     caller may reuse its variables at once) and hands the task to the stream with
//     vnpuLaunchKernelTask; the return value is 0, or the nonzero code of a refused
//     launch (reason in aclGetRecentErrMsg()).
//  3. When the stream runs the task, every block runs the kernel function on its own
//     thread (vnpuParallelBlocks) with its own core state: block index, and UB / L1 /
//     L0A / L0B / L0C memories of the device's sizes (block_context.h). The first
//     exception a block throws fails the task with "<kernel> block <i>: <what>"; the
//     other blocks still run to the end, and the process stays usable.
// The kernel kind comes from the rewriter, which reads it from the kernel's definition
// (__cube__, KERNEL_TYPE_AIC_ONLY, REGIST_MATMUL_OBJ...); when it is unknown (kAuto:
// ACLRT_LAUNCH_KERNEL, or a kernel defined in another file) the vector limit applies at
// launch and a kernel that then uses the Cube unit is checked against the AIC count.
// Does not model: launch latency, the l2ctrl argument (ignored), and mixed AIC+AIV
// kernels (a KernelError when one runs).
//
// Thread-safety: a launch may be made from any thread. It does not wait for the kernel
// (the stream runs the task; synchronize the stream to see its result). Ownership: the
// task owns copies of the arguments, never the GM buffers they point to -- those must
// stay allocated until the stream has run the task.
#ifndef VNPU_ASCENDC_LAUNCH_H
#define VNPU_ASCENDC_LAUNCH_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>
#include <type_traits>
#include <utility>

#include "block_context.h"
#include "host_interface.h"
#include "system.h"

namespace vnpu {
namespace ascendc {
namespace detail {

// One kernel launch: what every block needs, and the first failure among them.
class LaunchTaskBase {
 public:
  LaunchTaskBase(const char* name, const VnpuKernelEnv& env, uint32_t block_dim, KernelKind kind)
      : name_(name), env_(env), block_dim_(block_dim), kind_(kind) {}
  virtual ~LaunchTaskBase() = default;

  // Runs the kernel function with the launch's arguments on the calling thread.
  virtual void Invoke() = 0;

  const std::string& name() const { return name_; }
  const VnpuKernelEnv& env() const { return env_; }
  const std::vector<GmLaunchRegion>& regions() const { return regions_; }

 protected:
  // Records the allocation a pointer argument lies in (bounds checking on):
  // looked up now, while the caller still owns what it passes.
  template <typename T>
  void NoteArgument(const T& arg) {
    if constexpr (std::is_pointer_v<T>) {
      const void* p = static_cast<const void*>(arg);
      if (!env_.bounds_check || p == nullptr) return;
      const void* base = nullptr;
      size_t size = 0;
      if (vnpuGmRegionOf(p, &base, &size) == 0) regions_.push_back({static_cast<const uint8_t*>(base), size});
    }
  }

 public:
  uint32_t block_dim() const { return block_dim_; }
  KernelKind kind() const { return kind_; }

  // Keeps the first failure (in time) of any block.
  void RecordFailure(uint32_t block, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return;
    failed_ = true;
    failed_block_ = block;
    failure_ = what;
  }
  bool Failed(uint32_t* block, std::string* what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) {
      *block = failed_block_;
      *what = failure_;
    }
    return failed_;
  }

 private:
  std::string name_;
  VnpuKernelEnv env_;
  uint32_t block_dim_;
  KernelKind kind_;
  std::vector<GmLaunchRegion> regions_;
  std::mutex mu_;
  bool failed_ = false;
  uint32_t failed_block_ = 0;
  std::string failure_;
};

template <typename... P>
class LaunchTask final : public LaunchTaskBase {
 public:
  template <typename... A>
  LaunchTask(void (*kernel)(P...), const char* name, const VnpuKernelEnv& env, uint32_t block_dim, KernelKind kind,
             A&&... args)
      : LaunchTaskBase(name, env, block_dim, kind), kernel_(kernel), args_(std::forward<A>(args)...) {
    std::apply([this](const auto&... a) { (NoteArgument(a), ...); }, args_);
  }
  void Invoke() override { std::apply(kernel_, args_); }

 private:
  void (*kernel_)(P...);
  std::tuple<std::decay_t<P>...> args_;
};

// The local memories of one AI core, zero-filled, 64-byte aligned.
class CoreMemoryArena {
 public:
  explicit CoreMemoryArena(const VnpuKernelEnv& env) {
    const uint64_t sizes[] = {env.ub_bytes, env.l1_bytes, env.l0a_bytes, env.l0b_bytes, env.l0c_bytes,
                              kBiasTableBytes, kFixbufBytes};
    uint64_t total = 0;
    for (uint64_t s : sizes) total += (s + 63) / 64 * 64;
    raw_ = static_cast<uint8_t*>(std::calloc(1, total + 64));
    if (raw_ == nullptr) throw std::bad_alloc();
    uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_) + 63) / 64 * 64);
    uint8_t** slots[] = {&mem_.ub, &mem_.l1, &mem_.l0a, &mem_.l0b, &mem_.l0c, &mem_.bias, &mem_.fixbuf};
    for (int i = 0; i < 7; ++i) {
      *slots[i] = p;
      p += (sizes[i] + 63) / 64 * 64;
    }
  }
  ~CoreMemoryArena() { std::free(raw_); }
  CoreMemoryArena(const CoreMemoryArena&) = delete;
  CoreMemoryArena& operator=(const CoreMemoryArena&) = delete;
  const CoreMemories& memories() const { return mem_; }

 private:
  uint8_t* raw_ = nullptr;
  CoreMemories mem_;
};

// Makes `ctx` the calling thread's current block for the scope's lifetime.
class BlockScope {
 public:
  explicit BlockScope(BlockContext* ctx) : saved_(tls_block), saved_idx_(::block_idx), saved_num_(::block_num) {
    tls_block = ctx;
    ::block_idx = ctx->block_idx;
    ::block_num = ctx->block_num;
  }
  ~BlockScope() {
    tls_block = saved_;
    ::block_idx = saved_idx_;
    ::block_num = saved_num_;
  }
  BlockScope(const BlockScope&) = delete;
  BlockScope& operator=(const BlockScope&) = delete;

 private:
  BlockContext* saved_;
  int64_t saved_idx_;
  int64_t saved_num_;
};

// vnpuParallelBlocks callback: one block of a task. Never throws.
inline void RunBlock(void* user_data, uint32_t block) {
  auto* task = static_cast<LaunchTaskBase*>(user_data);
  try {
    CoreMemoryArena arena(task->env());
    BlockContext ctx;
    ctx.kernel_name = task->name().c_str();
    ctx.env = &task->env();
    ctx.block_idx = block;
    ctx.block_num = task->block_dim();
    ctx.launch_kind = task->kind();
    ctx.core = task->kind() == KernelKind::kCube ? CoreType::kAic : CoreType::kAiv;
    ctx.mem = arena.memories();
    ctx.launch_regions = task->regions().data();
    ctx.launch_region_count = task->regions().size();
    BlockScope scope(&ctx);
    if (task->kind() == KernelKind::kMix) {
      Fail("mixed AIC+AIV kernels are not modelled by vNPU; split the Cube and Vector parts into two kernels");
    }
    task->Invoke();
  } catch (const std::exception& e) {
    task->RecordFailure(block, e.what());
  } catch (...) {
    task->RecordFailure(block, "a non-standard exception was thrown");
  }
}

// VnpuKernelRun: runs every block, reports the first failure.
inline int RunTask(void* user_data, char* message, size_t message_size) {
  auto* task = static_cast<LaunchTaskBase*>(user_data);
  vnpuParallelBlocks(task->block_dim(), &RunBlock, task);
  uint32_t block = 0;
  std::string what;
  if (!task->Failed(&block, &what)) return 0;
  if (message != nullptr && message_size > 0) {
    std::snprintf(message, message_size, "%s block %u: %s", task->name().c_str(), block, what.c_str());
  }
  return 1;
}

inline void DestroyTask(void* user_data) { delete static_cast<LaunchTaskBase*>(user_data); }

// Checks blockDim for a kernel of `kind`; throws std::invalid_argument.
inline void CheckBlockDim(const char* name, uint32_t block_dim, KernelKind kind, const VnpuKernelEnv& env) {
  const bool cube = kind == KernelKind::kCube || kind == KernelKind::kMix;
  const uint32_t limit = cube ? env.cube_core_num : env.vector_core_num;
  const char* cores = cube ? "AIC" : "AIV";
  if (block_dim == 0 || block_dim > limit) {
    throw std::invalid_argument(
        Str("launch of kernel ", name, ": blockDim is ", block_dim, ", which must be in [1, ", limit, "] (the ", limit,
            " ", cores, " cores of ", env.soc_version, "; a ", cube ? "Cube or mixed" : "vector",
            " kernel runs one block per ", cores, " core)"));
  }
}

}  // namespace detail

// Launches `kernel` with blockDim blocks on `stream` (the <<<>>> launch after rewriting).
// Throws std::invalid_argument for a bad blockDim, std::runtime_error when no device is
// usable; returns 0, or the nonzero code of a refused launch.
template <KernelKind kind = KernelKind::kAuto, typename... P, typename... A>
inline int LaunchKernel(void (*kernel)(P...), const char* name, uint32_t blockDim, void* l2ctrl, void* stream,
                        A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "the kernel is launched with a different number of arguments than "
                                              "it declares");
  (void)l2ctrl;
  VnpuKernelEnv env;
  std::memset(&env, 0, sizeof env);
  if (vnpuGetKernelEnv(&env) != 0) {
    throw std::runtime_error(detail::Str("launch of kernel ", name, ": no NPU device is usable (", aclGetRecentErrMsg(),
                                         ")"));
  }
  detail::CheckBlockDim(name, blockDim, kind, env);
  auto* task = new detail::LaunchTask<P...>(kernel, name, env, blockDim, kind, std::forward<A>(args)...);
  return vnpuLaunchKernelTask(name, stream, &detail::RunTask, task, &detail::DestroyTask);
}

namespace detail {
// ACLRT_LAUNCH_KERNEL's generated functions take every GM address as void*: a pointer
// argument converts to the kernel's pointer parameter type.
template <typename Param, typename Arg>
inline decltype(auto) AdaptLaunchArg(Arg&& a) {
  if constexpr (std::is_pointer<std::decay_t<Param>>::value && std::is_pointer<std::decay_t<Arg>>::value) {
    return reinterpret_cast<std::decay_t<Param>>(a);
  } else {
    return std::forward<Arg>(a);
  }
}
}  // namespace detail

// The callable ACLRT_LAUNCH_KERNEL(name) expands to: (blockDim, stream, args...) -> status.
template <typename... P>
class KernelLauncher {
 public:
  KernelLauncher(void (*kernel)(P...), const char* name) : kernel_(kernel), name_(name) {}
  template <typename... A>
  uint32_t operator()(uint32_t blockDim, void* stream, A&&... args) const {
    static_assert(sizeof...(P) == sizeof...(A), "ACLRT_LAUNCH_KERNEL: the kernel is launched with a different "
                                                "number of arguments than it declares");
    return static_cast<uint32_t>(LaunchKernel<KernelKind::kAuto>(kernel_, name_, blockDim, nullptr, stream,
                                                                 detail::AdaptLaunchArg<P>(std::forward<A>(args))...));
  }

 private:
  void (*kernel_)(P...);
  const char* name_;
};

template <typename... P>
inline KernelLauncher<P...> MakeKernelLauncher(void (*kernel)(P...), const char* name) {
  return KernelLauncher<P...>(kernel, name);
}

}  // namespace ascendc
}  // namespace vnpu

// ACLRT_LAUNCH_KERNEL(name)(blockDim, stream, args...): returns 0 on success.
#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) ::vnpu::ascendc::MakeKernelLauncher(&kernel_func, #kernel_func)
#endif

#endif  // VNPU_ASCENDC_LAUNCH_H
