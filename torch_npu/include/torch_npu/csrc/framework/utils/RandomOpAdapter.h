// What torch_npu's random operators include: the generator, events and the
// caching allocator (real torch_npu's RandomOpAdapter.h bundles the same;
// its SecondaryStreamGuard is not provided on vNPU).
#pragma once

#include "torch_npu/csrc/aten/NPUGeneratorImpl.h"
#include "torch_npu/csrc/core/npu/NPUCachingAllocator.h"
#include "torch_npu/csrc/core/npu/NPUEvent.h"
