// Allocating npu tensors for an op's outputs (stage 1).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/ArrayRef.h>

namespace at {
class Tensor;
}

namespace torch_npu {

// A new npu tensor on `device`. Empty `strides` means contiguous in the
// options' memory format.
at::Tensor empty_npu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                     const c10::TensorOptions& options, c10::DeviceIndex device);

// The allocator that places blocks on `device` (current stream of that
// device), whatever the thread's current device is.
c10::Allocator* device_allocator(c10::DeviceIndex device);

// Grows or shrinks the bytes of an npu storage (Storage.resize_, resize_):
// a new block, old contents copied over in stream order.
void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes);

}  // namespace torch_npu
