// c10_npu::NPUCachingAllocator: torch_npu's caching allocator as extensions
// call it. The functions act on vNPU's caching allocator, the one torch.npu
// memory statistics report; raw_alloc'd memory is counted there too and must
// be returned with raw_delete.
#pragma once

#include <cstddef>
#include <cstdint>

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include "third_party/acl/inc/acl/acl_rt.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {
namespace NPUCachingAllocator {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

// The allocator torch uses for npu tensors.
C10_NPU_API c10::Allocator* get();
// `nbytes` on the current device, for use on its current stream (or `stream`).
C10_NPU_API void* raw_alloc(size_t nbytes);
C10_NPU_API void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream);
// Frees what raw_alloc returned; raises for any other pointer.
C10_NPU_API void raw_delete(void* ptr);
// Returns every cached, unused block to device memory.
C10_NPU_API void emptyCache(bool check_error = true);
C10_NPU_API DeviceStats getDeviceStats(c10::DeviceIndex device);
C10_NPU_API void resetPeakStats(c10::DeviceIndex device);
C10_NPU_API void resetAccumulatedStats(c10::DeviceIndex device);
// Keeps the block of `ptr` from reuse until the work queued on `stream` so far has run.
C10_NPU_API void recordStream(const c10::DataPtr& ptr, NPUStream stream);
C10_NPU_API void setMemoryFraction(double fraction, int device);
C10_NPU_API double getMemoryFraction(int device);

}  // namespace NPUCachingAllocator
}  // namespace c10_npu
