#include "csrc/api/pluggable_allocator_hooks.h"

#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace torch_npu {

std::function<void(void*, c10::Stream)> npu_stream_hook(uint64_t fn_address) {
  using Fn = void (*)(void*, c10_npu::NPUStream);
  auto fn = reinterpret_cast<Fn>(static_cast<uintptr_t>(fn_address));
  return [fn](void* ptr, c10::Stream stream) { fn(ptr, c10_npu::NPUStream(stream)); };
}

}  // namespace torch_npu
