#include "csrc/core/npu_event.h"

#include <mutex>
#include <unordered_set>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_trace.h"
#include <vnpu/event.h>

namespace torch_npu {
namespace {

std::mutex g_events_mutex;
std::unordered_set<const void*> g_live_events;  // guarded by g_events_mutex

}  // namespace

vnpu::Event* create_event(bool enable_timing) {
  auto* event = new vnpu::Event(enable_timing);
  std::lock_guard<std::mutex> lock(g_events_mutex);
  g_live_events.insert(event);
  trace_event(TraceKind::kEventCreation, event);
  return event;
}

void destroy_event(void* event) noexcept {
  if (event == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_events_mutex);
    g_live_events.erase(event);
  }
  trace_event(TraceKind::kEventDeletion, event);
  delete static_cast<vnpu::Event*>(event);
}

bool is_live_event(const void* event) {
  std::lock_guard<std::mutex> lock(g_events_mutex);
  return g_live_events.count(event) != 0;
}

double elapsed_time_between(uintptr_t start_id, uintptr_t end_id) {
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, start_id != 0 && end_id != 0,
                 "Both events must be recorded before calculating elapsed time.");
  // Held while measuring: neither event can be destroyed meanwhile.
  std::lock_guard<std::mutex> lock(g_events_mutex);
  const auto* start = reinterpret_cast<const void*>(start_id);
  const auto* end = reinterpret_cast<const void*>(end_id);
  NPU_CHECK_WITH(ValueError, ErrCode::kPtr, g_live_events.count(start) && g_live_events.count(end),
                 "elapsed_time: both events must be npu events recorded on an npu stream");
  return with_torch_errors(
      [&] { return static_cast<const vnpu::Event*>(start)->elapsed_ms(*static_cast<const vnpu::Event*>(end)); });
}

uint64_t recorded_time_of(uintptr_t event_id) {
  NPU_CHECK_WITH(Error, ErrCode::kInternal, event_id != 0,
                 "Event must be recorded before getting recorded timestamp.");
  std::lock_guard<std::mutex> lock(g_events_mutex);  // the event cannot be destroyed meanwhile
  const auto* event = reinterpret_cast<const void*>(event_id);
  NPU_CHECK_WITH(ValueError, ErrCode::kPtr, g_live_events.count(event),
                 "recorded_time: the event is not an npu event recorded on an npu stream");
  return with_torch_errors([&] { return static_cast<const vnpu::Event*>(event)->recorded_time_ns(); });
}

}  // namespace torch_npu
