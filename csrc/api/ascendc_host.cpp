// The host side of Ascend C kernels on the virtual NPU: the four services
// the launch in torch_npu/include/ascendc (vnpu_ascendc/host_interface.h)
// asks of the runtime. A launch becomes one kernel task on its stream,
// ordered with torch's kernels there; its blocks (AI cores) run in parallel
// on ATen's intra-op threads; a failing block fails the task like any kernel
// (reported at the next synchronizing call, the stream stays usable).
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <ATen/Parallel.h>

#include "csrc/api/acl_memory.h"
#include "csrc/api/acl_status.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_stream.h"
#include "csrc/launch/strict_mode.h"
#include "third_party/acl/inc/acl/acl_base.h"
#include "vnpu_ascendc/host_interface.h"
#include <vnpu/runtime.h>
#include <vnpu/stream.h>

#define VNPU_HOST_API __attribute__((visibility("default")))

namespace torch_npu {
namespace ascendc {
namespace {

// Owns a launch's user data: destroy() runs once, after the task ran or when
// the task is dropped without running (the stream was aborted).
struct LaunchState {
  VnpuKernelRun run;
  VnpuKernelDestroy destroy;
  void* user_data;
  LaunchState(VnpuKernelRun r, VnpuKernelDestroy d, void* u) : run(r), destroy(d), user_data(u) {}
  ~LaunchState() {
    if (destroy != nullptr) destroy(user_data);
  }
};

// Task names must outlive their tasks: one interned copy per kernel name.
const char* interned(const char* name) {
  static std::mutex mutex;
  static auto* names = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name == nullptr ? "ascendc_kernel" : name).first->c_str();
}

}  // namespace
}  // namespace ascendc
}  // namespace torch_npu

extern "C" {

VNPU_HOST_API int vnpuGetKernelEnv(VnpuKernelEnv* env) {
  if (env == nullptr) return ACL_ERROR_INVALID_PARAM;
  return torch_npu::acl::acl_call("vnpuGetKernelEnv", [&] {
    const c10::DeviceIndex device = torch_npu::current_device();
    const vnpu::ChipProfile& chip = torch_npu::runtime_device(device).profile();
    std::memset(env, 0, sizeof(*env));
    env->ub_bytes = chip.ub_bytes;
    env->l1_bytes = chip.l1_bytes;
    env->l0a_bytes = chip.l0a_bytes;
    env->l0b_bytes = chip.l0b_bytes;
    env->l0c_bytes = chip.l0c_bytes;
    // Chips without separate vector cores (910A) run vector code on the AI cores.
    env->vector_core_num = static_cast<uint32_t>(chip.vector_core_num > 0 ? chip.vector_core_num : chip.cube_core_num);
    env->cube_core_num = static_cast<uint32_t>(chip.cube_core_num);
    env->strict = torch_npu::strict_mode_enabled() ? 1 : 0;
    env->bounds_check = 1;
    std::strncpy(env->soc_version, chip.name.c_str(), sizeof(env->soc_version) - 1);
    return ACL_SUCCESS;
  });
}

VNPU_HOST_API void vnpuParallelBlocks(uint32_t block_num, VnpuBlockFn fn, void* user_data) {
  // One block per grain: blocks are the unit of work, as AI cores are.
  at::parallel_for(0, block_num, 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) fn(user_data, static_cast<uint32_t>(block));
  });
}

VNPU_HOST_API int vnpuLaunchKernelTask(const char* kernel_name, void* stream, VnpuKernelRun run, void* user_data,
                                       VnpuKernelDestroy destroy) {
  // From here on the state owns user_data, also when the launch is refused.
  auto state = std::make_shared<torch_npu::ascendc::LaunchState>(run, destroy, user_data);
  if (run == nullptr) return torch_npu::acl::fail(ACL_ERROR_INVALID_PARAM, "vnpuLaunchKernelTask: run is NULL");
  return torch_npu::acl::acl_call("vnpuLaunchKernelTask", [&] {
    std::optional<c10::Stream> target = stream == nullptr
                                            ? std::optional<c10::Stream>(torch_npu::current_stream(-1))
                                            : torch_npu::stream_of_handle(stream);
    if (!target) {
      return torch_npu::acl::fail(ACL_ERROR_INVALID_PARAM, std::string("launch of ") +
                                                               (kernel_name ? kernel_name : "a kernel") +
                                                               ": the stream is not a stream of the virtual NPU");
    }
    const char* name = torch_npu::ascendc::interned(kernel_name);
    torch_npu::runtime_stream(*target).enqueue(vnpu::TaskKind::kKernel, name, [state, name] {
      char message[2048] = {0};
      const int status = state->run(state->user_data, message, sizeof(message));
      if (status != 0) {
        message[sizeof(message) - 1] = '\0';
        throw vnpu::Error(vnpu::ErrorCode::kKernelFailed,
                          message[0] != '\0' ? std::string(message) : std::string(name) + " failed");
      }
    });
    return ACL_SUCCESS;
  });
}

VNPU_HOST_API int vnpuGmRegionOf(const void* p, const void** base, size_t* size) {
  void* start = nullptr;
  size_t bytes = 0;
  int device = -1;
  if (!torch_npu::acl::npu_allocation_containing(p, &start, &bytes, &device)) return 1;
  *base = start;
  *size = bytes;
  return 0;
}

}  // extern "C"
