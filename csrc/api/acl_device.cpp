// The ACL runtime's device functions (acl.h, acl_rt.h) over vNPU's devices.
// The current device is torch's: aclrtSetDevice(1) is torch.npu.set_device(1)
// for the calling thread.
#include <string>

#include "csrc/api/acl_status.h"
#include "csrc/core/npu_device.h"
#include "third_party/acl/inc/acl/acl.h"
#include <vnpu/runtime.h>

namespace torch_npu {
namespace acl {
namespace {

aclError check_device(const char* api, int32_t device) {
  const int count = device_count();
  if (device < 0 || device >= count) {
    return fail(ACL_ERROR_RT_INVALID_DEVICEID, std::string(api) + ": invalid device id " + std::to_string(device) +
                                                   ", the virtual NPU has devices 0 to " +
                                                   std::to_string(count - 1));
  }
  return ACL_SUCCESS;
}

// One context per device: vNPU has only the primary contexts, so a context
// is its device. Handles point into this table.
char g_contexts[kMaxDevices];

}  // namespace
}  // namespace acl
}  // namespace torch_npu

using torch_npu::acl::acl_call;
using torch_npu::acl::fail;

extern "C" {

aclError aclInit(const char* configPath) { return ACL_SUCCESS; }

aclError aclFinalize(void) { return ACL_SUCCESS; }

aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion) {
  if (majorVersion == nullptr || minorVersion == nullptr || patchVersion == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: a version pointer is NULL");
  }
  *majorVersion = 1;
  *minorVersion = 0;
  *patchVersion = 0;
  return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
  return acl_call("aclrtSetDevice", [&] {
    const aclError status = torch_npu::acl::check_device("aclrtSetDevice", deviceId);
    if (status != ACL_SUCCESS) return status;
    torch_npu::set_current_device(static_cast<c10::DeviceIndex>(deviceId));
    return ACL_SUCCESS;
  });
}

aclError aclrtResetDevice(int32_t deviceId) {
  return acl_call("aclrtResetDevice", [&] {
    const aclError status = torch_npu::acl::check_device("aclrtResetDevice", deviceId);
    if (status != ACL_SUCCESS) return status;
    // Releases nothing torch still uses: only waits for the device's work.
    torch_npu::runtime_device(static_cast<c10::DeviceIndex>(deviceId)).synchronize();
    return ACL_SUCCESS;
  });
}

aclError aclrtGetDevice(int32_t* deviceId) {
  if (deviceId == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
  return acl_call("aclrtGetDevice", [&] {
    *deviceId = torch_npu::current_device();
    return ACL_SUCCESS;
  });
}

aclError aclrtGetDeviceCount(uint32_t* count) {
  if (count == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
  *count = static_cast<uint32_t>(torch_npu::device_count());
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) {
  return acl_call("aclrtSynchronizeDevice", [&] {
    torch_npu::runtime_device(torch_npu::current_device()).synchronize();
    return ACL_SUCCESS;
  });
}

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  if (runMode == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
  *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

const char* aclrtGetSocName(void) {
  static thread_local std::string name;
  const aclError status = acl_call("aclrtGetSocName", [&] {
    name = torch_npu::device_properties(torch_npu::current_device()).name;
    return ACL_SUCCESS;
  });
  return status == ACL_SUCCESS ? name.c_str() : nullptr;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  if (context == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
  return acl_call("aclrtGetCurrentContext", [&] {
    *context = &torch_npu::acl::g_contexts[torch_npu::current_device()];
    return ACL_SUCCESS;
  });
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  char* c = static_cast<char*>(context);
  char* first = torch_npu::acl::g_contexts;
  if (c < first || c >= first + torch_npu::device_count()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtSetCurrentContext: not a context of the virtual NPU (it has only each device's primary "
                "context, from aclrtGetCurrentContext)");
  }
  return aclrtSetDevice(static_cast<int32_t>(c - first));
}

}  // extern "C"
