// The hooks of torch.npu.memory.NPUPluggableAllocator whose C signatures use
// types of torch_npu's public headers (record_stream_fn and erase_stream_fn
// take a c10_npu::NPUStream by value): the address of the user's function,
// as Python's ctypes hands it over, made callable with core's types.
#pragma once

#include <cstdint>
#include <functional>

#include <c10/core/Stream.h>

namespace torch_npu {

// `fn_address`: void (*)(void* ptr, c10_npu::NPUStream stream).
std::function<void(void*, c10::Stream)> npu_stream_hook(uint64_t fn_address);

}  // namespace torch_npu
