#include "csrc/graph/host_kernel_launch.h"

#include <exception>
#include <string>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/runtime.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace {

// Owns the packed arguments until the kernel ran (or never will).
struct PackedCall {
  void (*run)(void*);
  void (*discard)(void*);
  void* args;
  PackedCall(void (*r)(void*), void (*d)(void*), void* a) : run(r), discard(d), args(a) {}
  PackedCall(PackedCall&& other) noexcept : run(other.run), discard(other.discard), args(other.args) {
    other.args = nullptr;
  }
  PackedCall(const PackedCall&) = delete;
  ~PackedCall() {
    if (args != nullptr) discard(args);
  }
  void operator()() { run(args); }
};

}  // namespace

extern "C" const char* torch_npu_launch_host_kernel(void (*run)(void*), void (*discard)(void*), void* args,
                                                    const void* const* buffers, size_t count) noexcept {
  thread_local std::string error;
  PackedCall call(run, discard, args);
  try {
    int device = -1;
    bool touches_host_memory = false;
    for (size_t i = 0; i < count; ++i) {
      if (buffers[i] == nullptr) continue;
      const int owner = vnpu::Runtime::instance().device_of_pointer(buffers[i]);
      if (owner < 0) {
        touches_host_memory = true;
      } else if (device < 0) {
        device = owner;
      }
    }
    if (device < 0) device = current_device();
    vnpu::Stream& stream = current_runtime_stream(static_cast<c10::DeviceIndex>(device));
    if (!touches_host_memory) {
      stream.enqueue(vnpu::TaskKind::kKernel, "inductor_kernel", std::move(call));
      return nullptr;
    }
    // As a CPU kernel: synchronously, after the npu work it may read.
    stream.synchronize();
    call();
    return nullptr;
  } catch (const std::exception& e) {
    error = e.what();
    return error.c_str();
  }
}

uintptr_t host_kernel_launcher_address() { return reinterpret_cast<uintptr_t>(&torch_npu_launch_host_kernel); }

}  // namespace torch_npu
