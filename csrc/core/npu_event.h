// NPU events as c10 sees them: opaque `void*` handles owned by torch.Event.
//
// Handles are runtime vnpu::Event objects. Every live handle is registered,
// so that a handle that comes back from Python as an integer (Event.event_id)
// is looked up, never cast blindly into a pointer: an unknown or destroyed
// id raises instead of crashing the process.
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <cstdint>

namespace vnpu {
class Event;
}

namespace torch_npu {

// A new registered event (DeviceGuardImplInterface::record's lazy creation).
vnpu::Event* create_event(bool enable_timing);
// Unregisters and deletes; nullptr is ignored. Never throws.
void destroy_event(void* event) noexcept;
// True for a handle create_event returned and destroy_event has not taken
// (the ACL runtime API checks the handles users pass before using them).
bool is_live_event(const void* event);

// Milliseconds between two events given by their Python ids (event_id);
// raises a ValueError for ids that are not live npu events.
double elapsed_time_between(uintptr_t start_id, uintptr_t end_id);

// Event.recorded_time: nanoseconds of the host's monotonic clock at which the
// event's marker ran, after waiting for it (the event needs enable_timing).
uint64_t recorded_time_of(uintptr_t event_id);

}  // namespace torch_npu
