#include "csrc/api/backend_setup.h"

#include <c10/core/DeviceType.h>

#include <exception>
#include <mutex>

#include "csrc/core/npu_gil.h"
#include "csrc/core/npu_hooks.h"
#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/op_route.h"
#include "csrc/launch/sync_kernel.h"

namespace torch_npu {

void register_format_serialization();  // csrc/ops/npu_format.cpp

namespace {

// The backend's name, registered when the library loads, as real
// torch_npu's does: a C++ program's static objects (at::Device("npu:0") at
// namespace scope) are made after its libraries' and can name the device.
// Python's torch.utils.rename_privateuse1_backend("npu") registers the same name again.
// A process whose PrivateUse1 backend already has another name keeps it:
// an exception here would end the process while the library loads, so it is
// left to `import torch_npu` (torch.utils.rename_privateuse1_backend) to
// report, as a Python error.
const bool kNameRegistered = [] {
  try {
    c10::register_privateuse1_backend("npu");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}();

}  // namespace

const std::vector<std::string>& default_non_native_ops() {
  static const std::vector<std::string> ops = {"to_mkldnn", "mkldnn_reorder_conv2d_weight"};
  return ops;
}

const std::vector<std::string>& set_up_backend(const std::vector<std::string>& excluded) {
  static std::once_flag once;
  static std::vector<std::string> sync_native;
  std::call_once(once, [&] {
    register_hooks();
    install_gil_release_on_host_waits();
    register_format_serialization();
    install_device_memory_cpu_allocator();
    // Static initialisation registered the C++ kernels; what comes next
    // (sync-native, Python) notes its own route.
    note_hand_written_routes();
    sync_native = register_sync_native_kernels(excluded);
  });
  return sync_native;
}

}  // namespace torch_npu
