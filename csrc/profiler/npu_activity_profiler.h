// torch.profiler's device activity for npu: a Kineto activity profiler for
// PrivateUse1 (registered with REGISTER_PRIVATEUSE1_PROFILER, the supported
// way), fed by the runtime's trace hook (runtime/include/vnpu/trace.h).
//
// While a session records, every task a stream worker runs (kernels, copies,
// collectives, event waits, graph replays) becomes one Kineto activity on
// the track of its device and stream, with the task's real start and end
// times, linked to the host op that launched it: Kineto pushes each host
// op's correlation id into the session on the launching thread, the runtime
// stamps it into the tasks enqueued meanwhile, and processTrace links each
// activity to that op (flow arrows in the chrome trace; "Self NPU" / "NPU
// total" in key_averages()).
//
// When no session records, the trace hook is off: each task pays one relaxed
// atomic load.
#pragma once

#include <cstdint>
#include <vector>

#include <vnpu/trace.h>

namespace torch_npu::profiler {

// The tasks recorded since tracing was turned on (tests, torch_npu.profiler).
std::vector<vnpu::TaskRecord> take_recorded_tasks();
// Whether a session records now.
bool tracing();

// Unix-epoch nanoseconds (the profiler's clock) of a steady-clock time.
int64_t to_unix_ns(int64_t steady_ns);

}  // namespace torch_npu::profiler
