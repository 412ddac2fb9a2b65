// Synchronisation points: where the host waits for an npu stream because it
// needs a result now (.item(), copies to the host, data-dependent shapes).
#pragma once

#include <c10/core/Device.h>

namespace torch_npu {

// Waits for the device's current stream and reports its pending error.
void sync_current_stream(c10::DeviceIndex device);

// Waits for the device's current stream and reports its pending error, as
// a step of an operation that is itself synchronous (a blocking copy to the
// device): never reported by set_sync_debug_mode.
void wait_for_current_stream(c10::DeviceIndex device);

// torch.npu.set_sync_debug_mode: 0 silent, 1 warn, 2 error at every
// sync_current_stream (implicit synchronisation).
void set_sync_debug_mode(int mode);
int sync_debug_mode();
// What the mode says to do at a synchronisation point: warn, raise, or
// nothing (c10_npu::warn_or_error_on_sync).
void report_sync_point();

}  // namespace torch_npu
