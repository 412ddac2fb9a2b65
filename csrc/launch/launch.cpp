#include "csrc/launch/launch.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/launch/float_status.h"
#include "csrc/core/npu_stream.h"
#include "csrc/launch/intra_op_thread_count.h"
#include "csrc/launch/strict_mode.h"
#include <vnpu/environment.h>
#include <vnpu/host_wait.h>
#include <vnpu/intra_op_threads.h>
#include <vnpu/stream.h>
#include <vnpu/trace.h>

namespace torch_npu {
namespace {

std::atomic<int> g_deterministic_level{0};

thread_local int t_stage_max_threads = 0;
thread_local int64_t t_stage_work = -1;

// Runs stage 2 of one op with the intra-op threads intra_op_threads() gives,
// for ATen's OpenMP loops and for MKL's GEMMs alike.
class IntraOpThreads {
 public:
  // at::get_num_threads(), not omp_get_max_threads(): it also runs ATen's
  // once-per-thread set-up of the thread's OpenMP count (to the process's,
  // torch.set_num_threads), which would otherwise run inside the first
  // parallel loop on a new stream worker and undo the count chosen here for
  // that one kernel, whose bits then followed the process's count
  // (Note [Deterministic team sizes]).
  explicit IntraOpThreads(int64_t work, int process_threads = at::get_num_threads())
      : saved_max_(std::exchange(t_stage_max_threads, intra_op_max_threads(process_threads))),
        saved_work_(std::exchange(t_stage_work, work)),
        scope_(reported(kernel_intra_op_threads(work, t_stage_max_threads)), process_threads) {}
  // The team, as the profile's Block Num (vnpu/trace.h).
  static int reported(int threads) {
    vnpu::set_running_task_block_dim(threads);
    return threads;
  }

  ~IntraOpThreads() {
    t_stage_max_threads = saved_max_;
    t_stage_work = saved_work_;
  }

 private:
  int saved_max_;
  int64_t saved_work_;
  ScopedIntraOpThreads scope_;
};

}  // namespace

bool host_blocked_for_intra_op_threads() {
  // Note [Deterministic team sizes] (intra_op_thread_count.h)
  return !at::globalContext().deterministicAlgorithms() && vnpu::blocked_host_threads() > 0;
}

void set_deterministic_level(int64_t level) {
  TORCH_CHECK_VALUE(level >= 0 && level <= 3, "'torch_npu.npu.set_deterministic_level' supports configuring 0/1/2/3.");
  TORCH_CHECK(level != 3,
              "'torch_npu.npu.set_deterministic_level(3)' (batch consistency) is not supported on vNPU: its kernels "
              "(ATen's CPU kernels and MKL's GEMMs, which pick their blocking by shape) do not promise results "
              "independent of the batch size. Use level 2 for results independent of the machine's core count.");
  g_deterministic_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

int deterministic_level() { return g_deterministic_level.load(std::memory_order_relaxed); }

int kernel_intra_op_threads(int64_t work, int max_threads) {
  // Note [Deterministic level 2]
  if (C10_UNLIKELY(g_deterministic_level.load(std::memory_order_relaxed) >= 2) &&
      at::globalContext().deterministicAlgorithms()) {
    return 1;
  }
  // The rule and its reasons: runtime/include/vnpu/intra_op_threads.h.
  return vnpu::intra_op_threads(work, max_threads, host_blocked_for_intra_op_threads());
}

int intra_op_max_threads(int process_threads) {
  static const int host_cores = vnpu::environment().host_cores;  // VNPU_HOST_CORES
  return host_cores > 0 ? host_cores : process_threads;
}

int calling_thread_intra_op_max_threads() { return intra_op_max_threads(at::get_num_threads()); }

int stage_max_threads() { return t_stage_max_threads > 0 ? t_stage_max_threads : omp_get_max_threads(); }
int64_t stage_work() { return t_stage_work; }

namespace {

uint64_t validation_key(const char* op, uint64_t signature) {
  return mix_launch_signature(signature, reinterpret_cast<uintptr_t>(op));
}

// Signatures that passed on this thread. Per thread, so lookups take no
// lock; a program has a bounded set of (op, signature) pairs.
thread_local std::unordered_set<uint64_t> t_validated;

}  // namespace

void submit_kernel(c10::DeviceIndex device, const LaunchSnapshot& snap, KernelTaskBase& task,
                   const vnpu::ErasedCallable& callable) {
  check_strict_mode(task.op, snap.npu_dtypes());
  check_not_forked();
  vnpu::Stream& stream = current_runtime_stream(device);
  const uint64_t key = validation_key(task.op, snap.signature());
  with_torch_errors([&] {
    // While capturing nothing may run: a first launch is captured unchecked
    // (its errors surface at replay, as the stream's error).
    // Nor while queued work may wait for this thread (npu_stream.h).
    if (t_validated.count(key) == 0 && !stream.capturing() && !host_dependent_work_pending()) {
      // Note [Argument errors raise at the call] (launch.h).
      task.mode = StageTwoMode::kOnCaller;
      stream.run_on_caller(task.op, [&] { callable.run(callable.object); });
      t_validated.insert(key);
      return;
    }
    stream.enqueue_erased(vnpu::TaskKind::kKernel, task.op, callable);
  });
}

void submit_queued_kernel(c10::DeviceIndex device, KernelTaskBase& task, const vnpu::ErasedCallable& callable) {
  // Collectives only (no aten op, nothing strict mode checks).
  check_not_forked();
  vnpu::Stream& stream = current_runtime_stream(device);
  with_torch_errors([&] { stream.enqueue_erased(vnpu::TaskKind::kKernel, task.op, callable); });
}

void run_stage_two(const char* op, int64_t work, StageTwoMode mode, const KernelOutputs* outputs,
                   void (*body)(void*), void* callable) {
  // Views of device memory are plain CPU tensors: skip autograd and
  // ADInplaceOrView, the caller's autograd already recorded this op.
  at::AutoDispatchBelowADInplaceOrView no_autograd;
  IntraOpThreads threads(work);
  // Queued: errors become the stream's pending error, and the outputs are
  // poisoned so nothing reads stale memory as this kernel's result. On the
  // caller (a first launch, ASCEND_LAUNCH_BLOCKING=1, TASK_QUEUE_ENABLE=0):
  // the caller gets ATen's own error, of its own type.
  auto queued = [&] { return mode == StageTwoMode::kQueued && !vnpu::environment().synchronous_launch(); };
  try {
    body(callable);
    if (outputs != nullptr && saturation_mode()) note_kernel_outputs(op, *outputs);
  } catch (c10::Error& e) {
    if (!queued()) {
      // With launch blocking the error also names the npu op it came from.
      if (vnpu::environment().synchronous_launch()) {
        e.add_context(std::string("while running ") + op + " on the NPU");
      }
      throw;
    }
    if (outputs != nullptr) outputs->poison();
    throw std::runtime_error(e.what_without_backtrace());
  } catch (...) {
    if (queued() && outputs != nullptr) outputs->poison();
    throw;
  }
}

}  // namespace torch_npu
