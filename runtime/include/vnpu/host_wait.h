// Hooks around a host thread's blocking waits on the device.
//
// A host thread that must wait for a stream (synchronize, an event, a full
// launch ring) first spins briefly, then blocks. Just before it blocks it
// calls enter(), and leave(token) once it woke up. The adaptor uses this to
// release Python's GIL while blocked: a thread holding the GIL must never
// sleep on work that might need the GIL to finish (Note [Host waits and the
// GIL] in csrc/core/npu_gil.cpp).
//
// Contract: the runtime calls the hooks only on threads that are not stream
// workers, and never while it holds one of its own locks, so leave() may
// block (re-acquiring the GIL) without deadlocking the runtime.
//
// Thread-safety: set_host_wait_hooks() is meant to be called once, before
// the first wait (at module initialisation); the hooks are read with
// acquire semantics, so a late call is safe but may miss a wait in flight.
#pragma once

namespace vnpu {

struct HostWaitHooks {
  void* (*enter)() = nullptr;     // returns a token for leave()
  void (*leave)(void* token) = nullptr;
};

void set_host_wait_hooks(HostWaitHooks hooks);

// RAII: enter() on construction, leave() on destruction (no-op without hooks
// and on stream worker threads); counts the thread as blocked meanwhile.
class HostWaitScope {
 public:
  HostWaitScope();
  ~HostWaitScope();
  HostWaitScope(const HostWaitScope&) = delete;
  HostWaitScope& operator=(const HostWaitScope&) = delete;

 private:
  void (*leave_)(void*) = nullptr;
  void* token_ = nullptr;
  bool counted_ = false;
};

// How many host threads are blocked in a HostWaitScope right now. While one
// is, a stream worker may use every core for a kernel; while none is, every
// host thread may be busy issuing work (Note [Device threads beside the
// host] in csrc/launch/launch.cpp). A relaxed snapshot: a hint, not a guarantee.
int blocked_host_threads();

// Marks the calling thread as a stream worker (hooks are skipped there).
void mark_stream_worker_thread();
bool is_stream_worker_thread();

}  // namespace vnpu
