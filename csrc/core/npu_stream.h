// NPU streams as c10::Stream values.
//
// A c10::Stream's id follows real torch_npu's layout (Note [Stream ids] in
// npu_stream.cpp): 0 is the default stream; torch.npu.Stream() hands out the
// streams of a pool per priority round-robin. Each thread has a current
// stream per device (default: the default stream), as in torch.cuda.
//
// Thread-safety: all functions may be called from any thread. The lookup
// from c10::Stream to vnpu::Stream is lock-free after first use.
#pragma once

#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <optional>

namespace vnpu {
class Stream;  // <vnpu/stream.h>, for the files that use one
}  // namespace vnpu

namespace torch_npu {

// Stream ids with this bit name streams made through the ACL runtime API
// (aclrtCreateStream) and wrapped by c10_npu::getStreamFromExternal: the low
// bits are their runtime stream index (as in torch_npu, bit 30 marks them).
constexpr int64_t kExternalStreamIdBit = int64_t{1} << 30;

// The runtime stream behind a c10::Stream of device type npu.
vnpu::Stream& runtime_stream(const c10::Stream& stream);
// True when every task queued on `stream` has run. Unlike c10::Stream::query
// it reports no synchronization to the NPU Sanitizer (nothing waited).
bool stream_idle(const c10::Stream& stream);

// Runs `fn` on `stream` in stream order, as a host task (aclrtLaunchCallback,
// torch.npu._launch_host_func). An exception from `fn` becomes the stream's
// error, as a kernel's does.
void launch_host_task(const c10::Stream& stream, const char* name, std::function<void()> fn);

// Queued work that waits for something only the host does later (an
// ExternalEvent's wait before its record, directly or in a graph replay).
// While any is pending, a launch does not run on the caller (Note [Argument
// errors raise at the call], launch.h): the caller would first wait for the
// stream's queued work, which may wait for the caller's own later record.
// note_host_dependent_work(+1) when queueing such work, (-1) when it ran.
void note_host_dependent_work(int delta);
bool host_dependent_work_pending();

// The calling thread's current stream on `device` (-1: current device).
c10::Stream current_stream(c10::DeviceIndex device = -1);
// Shortcut used by every kernel launch: the current runtime stream.
vnpu::Stream& current_runtime_stream(c10::DeviceIndex device);
c10::Stream default_stream(c10::DeviceIndex device = -1);
// A pool stream (torch.npu.Stream()).
c10::Stream new_stream(c10::DeviceIndex device, int priority);
// A sync-launch stream (torch.npu.Stream(is_sync_launch=True)): its tasks run
// as they are launched, on the launching thread.
c10::Stream new_sync_launch_stream(c10::DeviceIndex device);
bool is_sync_launch_stream(const c10::Stream& stream);
// The c10 stream id of the runtime stream `index` of a device.
int64_t stream_id_of_index(int index);
// A communication stream of `device` (collectives): a dedicated stream,
// outside the pool's round robin. Each call makes a new one while the device
// has dedicated streams left, then hands the existing ones out in turn.
c10::Stream communication_stream(c10::DeviceIndex device);
// Raises torch_npu's capture error naming `what` when the current stream of
// `device` captures an NPU graph (for work that cannot be captured).
void check_not_capturing(c10::DeviceIndex device, const char* what);
// ACL streams (aclrtCreateStream / aclrtDestroyStream): a new runtime
// stream on `device` (-1: current), outside the pool, synchronized with the
// device until destroyed. destroy_acl_stream returns false for a handle it
// did not make; the stream's queued work still runs.
vnpu::Stream* create_acl_stream(c10::DeviceIndex device, int priority);
bool destroy_acl_stream(void* handle);
bool is_external_stream(const c10::Stream& stream);
// The c10::Stream behind an aclrtStream handle (an ACL stream or one of
// torch's), or nullopt for a handle that is neither. Never dereferences it.
std::optional<c10::Stream> stream_of_handle(const void* handle);

// Makes `stream` current on its device for the calling thread.
void set_current_stream(const c10::Stream& stream);

// Throws a ValueError unless `id` names a stream of `device` (checked).
void check_stream_id(int64_t id, c10::DeviceIndex device);

// torch.npu._sleep: keeps the current stream of the current device busy.
void sleep_on_current_stream(int64_t microseconds);

// Test utility: holds the current stream at a gate until open() (or a
// minute passes, so a failing test cannot hang the process).
class StreamGate {
 public:
  StreamGate();
  ~StreamGate();
  void open();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Waits for every stream of `device` (all devices when -1) and reports the
// first pending kernel error as a torch error.
void synchronize_device(c10::DeviceIndex device);
// Waits for one stream and reports its pending error as a torch error.
void synchronize_stream(const c10::Stream& stream);

}  // namespace torch_npu
