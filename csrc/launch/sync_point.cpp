#include "csrc/launch/sync_point.h"

#include <atomic>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/core/npu_trace.h"
#include <vnpu/runtime.h>

namespace torch_npu {

namespace {
std::atomic<int> g_sync_debug_mode{0};
}  // namespace

void set_sync_debug_mode(int mode) { g_sync_debug_mode.store(mode); }
int sync_debug_mode() { return g_sync_debug_mode.load(); }

void report_sync_point() {
  const int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  if (mode == 1) {
    TORCH_WARN("called a synchronizing NPU operation");
  } else if (mode == 2) {
    TORCH_CHECK(false, "called a synchronizing NPU operation");
  }
}

void sync_current_stream(c10::DeviceIndex device) {
  report_sync_point();
  wait_for_current_stream(device);
}

void wait_for_current_stream(c10::DeviceIndex device) {
  with_torch_errors([&] { current_runtime_stream(device).synchronize(); });
  if (tracing()) trace_stream(TraceKind::kStreamSynchronization, current_stream(device));
}

}  // namespace torch_npu
