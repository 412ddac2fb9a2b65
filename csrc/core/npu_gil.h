// Releasing Python's GIL while a host thread blocks on the device.
#pragma once

namespace torch_npu {

// Installs the runtime's host-wait hooks (vnpu/host_wait.h) that release
// the GIL around blocking waits. Called once at module initialisation.
void install_gil_release_on_host_waits();

}  // namespace torch_npu
