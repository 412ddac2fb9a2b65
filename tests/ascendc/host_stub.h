// A stub of the Ascend C host interface for the C++ tests: no torch, no vNPU runtime.
//
// It implements torch_npu/include/ascendc/vnpu_ascendc/host_interface.h the simplest
// way that keeps the contract: a "910B1" device (192 KiB UB, 48 AIV / 24 AIC cores),
// blocks on std::threads, and a "stream" that runs each task at once on the caller's
// thread (so the task's result is known when the launch returns). GM regions are the
// buffers the test registers. The controls below let a test change the device and
// read what the last task reported.
// Thread-safety: the controls are meant to be called from the test's main thread
// between launches.
#ifndef VNPU_TESTS_ASCENDC_HOST_STUB_H
#define VNPU_TESTS_ASCENDC_HOST_STUB_H

#include <cstddef>
#include <string>

#include "vnpu_ascendc/host_interface.h"

namespace host_stub {

// Device settings the next launches see (defaults: strict 0, bounds_check 1).
void SetStrict(bool strict);
void SetBoundsCheck(bool on);
void SetDeviceUsable(bool usable);
// The next launch is refused with `reason`.
void RefuseNextLaunch(const std::string& reason);

// Makes [p, p + size) a GM allocation for bounds checks (until UnregisterGm(p)).
void RegisterGm(const void* p, size_t size);
void UnregisterGm(const void* p);

// The failure message of the last task (empty if it succeeded) and how many tasks ran.
std::string LastTaskError();
int TasksRun();
// How many times destroy was called (each task exactly once).
int TasksDestroyed();

}  // namespace host_stub

#endif  // VNPU_TESTS_ASCENDC_HOST_STUB_H
