// Note [Host waits and the GIL]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A deadlock needs two things: a host thread that holds the GIL while it
// waits for a stream, and a stream worker that needs the GIL to finish a
// task. Either one alone is harmless; we rule out both:
//
//  1. Workers never run Python code or Python object destructors. A queued
//     task owns no Python-visible tensor: device tensors are captured as raw
//     TensorRef snapshots, host data is either a private clone or pinned
//     memory whose use is recorded with the pinned allocator, which keeps the
//     block alive after its tensor died (host_allocator.h). (Dropping the last
//     reference of a tensor whose PyObject Python already released would
//     decref that PyObject, which needs the GIL.)
//  2. A host thread that blocks on the device (after a short spin) releases
//     the GIL for the duration: the runtime calls these hooks around every
//     blocking host wait, never with one of its locks held, so re-acquiring
//     the GIL afterwards cannot deadlock with another thread that holds the
//     GIL and wants a runtime lock. Most ATen calls from Python already run
//     without the GIL; this covers the ones that do not (torch.Event.record
//     on a full ring, Stream.wait_stream, storage indexing, torch.npu._sleep).
#include "csrc/core/npu_gil.h"

#include <Python.h>

#include <vnpu/host_wait.h>

#include <chrono>
#include <thread>

namespace torch_npu {
namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

void* release_gil() {
  if (!Py_IsInitialized() || interpreter_finalizing() || !PyGILState_Check()) return nullptr;
  return PyEval_SaveThread();
}

// The thread that imported torch_npu (Python's main thread, in practice).
std::thread::id g_main_thread;

void reacquire_gil(void* state) {
  if (state == nullptr) return;
  // A thread other than the main one that comes back for the GIL while the
  // interpreter finalizes is ended by Python with pthread_exit. Its forced
  // unwinding through this hook's caller (a destructor, noexcept) would
  // std::terminate the whole process at exit. Park it instead: the process
  // is about to end (Python 3.14 parks such threads itself).
  if (interpreter_finalizing() && std::this_thread::get_id() != g_main_thread) {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  PyEval_RestoreThread(static_cast<PyThreadState*>(state));
}

}  // namespace

void install_gil_release_on_host_waits() {
  g_main_thread = std::this_thread::get_id();
  vnpu::set_host_wait_hooks({&release_gil, &reacquire_gil});
}

}  // namespace torch_npu
