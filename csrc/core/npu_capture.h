// The NPU graph captures in progress, as the core layer must know them:
// a capture that forks onto other streams through events, and the capture
// error modes.
//
// Fork and join (CUDA graphs' multi-stream capture): an event recorded on a
// capturing stream marks a point in the capture (vnpu::Event). A stream that
// waits for it joins the capture: its later work is captured into the same
// graph, from the same private pool, drawing random numbers as captured ops
// do. A replay runs the graph's tasks in the order they were captured, which
// respects every wait the host expressed. Before the capture ends, the
// capturing stream must wait for each joined stream's last work (an event
// recorded on it after that work, e.g. `capture_stream.wait_stream(side)`);
// work the capture never waited for is an error, as CUDA's
// cudaErrorStreamCaptureUnjoined.
//
// Capture error modes (torch.cuda.graph's capture_error_mode) say who may
// make calls that would wait for the capturing stream as a side effect (a
// device-wide torch.npu.synchronize):
//   "global"       nobody, on any thread, while the capture is underway;
//   "thread_local" not the capturing thread; others' calls skip the capture;
//   "relaxed"      anybody; such calls skip the capturing streams.
// Waiting on a capturing stream itself is refused in every mode: its
// captured work has not run.
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "csrc/core/npu_generator.h"
#include "csrc/core/npu_mem_pool.h"

namespace vnpu {
class Event;
class Graph;
class Stream;
}  // namespace vnpu

namespace torch_npu {

enum class CaptureErrorMode { kGlobal, kThreadLocal, kRelaxed };

// "global", "thread_local" or "relaxed"; ValueError otherwise.
CaptureErrorMode parse_capture_error_mode(const std::string& mode);

// Starts tracking the capture `origin` has begun into `graph` (its pool
// already routed there), begun by the calling thread; its random ops draw
// from `rng` (capture_rng_of).
void register_capture(vnpu::Stream& origin, std::shared_ptr<vnpu::Graph> graph, MempoolId pool,
                      std::shared_ptr<CaptureRng> rng, CaptureErrorMode mode);

// Stops tracking the capture of `origin`, ending it on every stream it forked
// onto. With `check_joined`, throws the capture error (after ending them all)
// when one of them has work the origin did not wait for.
void unregister_capture(vnpu::Stream& origin, bool check_joined);

// Before `waiter` waits for `event`: a wait for an event of a capture forks
// the capture onto `waiter`, or, on the capturing stream, joins the stream
// the event was recorded on.
void before_event_wait(const vnpu::Event& event, vnpu::Stream& waiter);

// The random generators of the capture `stream` takes part in (as its origin
// or a fork); nullptr when it captures outside an NPUGraph.
std::shared_ptr<CaptureRng> capture_rng_of(const vnpu::Stream& stream);

// Whether a device-wide synchronize on this thread skips capturing streams
// (true) or must refuse them (false), by the error modes of the captures
// underway.
bool device_sync_skips_captures();

// Host constants in captured fused ops. A copy from host to device is not
// captured: a replay would copy the data of capture time, not the data the
// host buffer holds then. The fused operators (torch.ops.npu, torch.ops.atb)
// are the exception: on the device their host-side arguments (sequence
// lengths, index lists) become kernel arguments at capture, and the
// compositions vNPU builds them from turn such arguments into small device
// tensors with host copies. While the calling thread runs one, a host copy
// is captured with its data of capture time (staged in the task), which is
// what the device's kernel would have been given. set_ returns the previous
// setting.
bool set_host_constants_capturable(bool on);
bool host_constants_capturable();

}  // namespace torch_npu
