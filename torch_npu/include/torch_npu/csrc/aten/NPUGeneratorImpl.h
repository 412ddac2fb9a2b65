// The default npu random generators, as torch_npu's C++ API hands them out.
// vNPU's generator draws on the host (a Philox-like counter per device);
// extensions use it through at::Generator (seed, state, its mutex).
#pragma once

#include <cstdint>
#include <utility>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/GeneratorImpl.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {

// torch_npu's npu generator type: every npu generator is one, so extensions
// can take it from an at::Generator with at::check_generator<NPUGeneratorImpl>.
struct TORCH_NPU_API NPUGeneratorImpl : public c10::GeneratorImpl {
  using c10::GeneratorImpl::GeneratorImpl;
  ~NPUGeneratorImpl() override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // (seed, offset) for a kernel that draws `increment` random values per
  // element, and the offset moved past them (torch_npu's Philox contract;
  // MindSpeed's dropout masks take their seed and offset from it). Take the
  // generator's mutex around it, as CUDA's callers do.
  virtual std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t increment) = 0;
};

namespace detail {

// The default generator of `device_index` (-1: the current device).
TORCH_NPU_API const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index = -1);
// A new generator on `device_index` (-1: the current device).
TORCH_NPU_API at::Generator createNPUGenerator(c10::DeviceIndex device_index = -1);

}  // namespace detail
}  // namespace at_npu
