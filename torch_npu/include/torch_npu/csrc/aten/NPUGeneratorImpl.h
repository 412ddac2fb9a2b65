// The npu random generator, as torch_npu's C++ API declares it.
//
// State is (seed, philox offset), torch_npu's Philox contract: a kernel that
// draws n random values per element takes the generator's (seed, offset)
// and moves the offset past them: philox_npu_state / philox_engine_inputs,
// the increment rounded up to a multiple of 4 as CUDA's. vNPU's own random
// operators derive each op's stream of numbers from that pair, so the same
// seed gives the same numbers whatever the stream timing. Every npu
// generator is an NPUGeneratorImpl, so extensions may take one from an
// at::Generator with at::check_generator<at_npu::NPUGeneratorImpl>.
//
// Thread-safety: as every c10 generator, callers hold the generator's mutex_
// while they draw (Note [Acquire lock when using random generators]).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {

// What one kernel is given to draw from (philox_npu_state): the seed and the
// offset of its first value. torch_npu's layout: the payloads are unions so
// that a graph-captured state could carry tensors instead, and
// offset_intragraph_ / captured_ describe such a state. vNPU hands out eager
// states only (captured_ is false; a capture refuses, see philox_npu_state).
struct PhiloxNpuState {
  PhiloxNpuState() = default;
  PhiloxNpuState(const PhiloxNpuState&) = default;
  PhiloxNpuState(uint64_t seed, uint64_t offset) {
    seed_.val = seed;
    offset_.val = offset;
  }

  union Payload {
    uint64_t val;
    at::Tensor* ptr;
  };
  Payload seed_{};
  Payload offset_{};
  uint64_t offset_intragraph_{0};
  bool captured_ = false;
  bool secondary_stream_capture_state_ = false;
};

struct TORCH_NPU_API NPUGeneratorImpl : public c10::GeneratorImpl {
  // device_index -1: the current device.
  NPUGeneratorImpl(c10::DeviceIndex device_index = -1);
  ~NPUGeneratorImpl() override;

  std::shared_ptr<NPUGeneratorImpl> clone() const;
  // A new seed resets the offset.
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  // Seeds from std::random_device and returns the seed.
  uint64_t seed() override;
  // 16 bytes: the seed, then the offset (a CPU uint8 tensor).
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void set_philox_offset_per_thread(uint64_t offset);
  uint64_t philox_offset_per_thread() const;
  // (seed, offset) for a kernel drawing `increment` values per element, and
  // the offset moved past them. Refused while the current stream captures an
  // NPU graph: a captured kernel would replay the same numbers every time.
  PhiloxNpuState philox_npu_state(uint64_t increment);
  // The same as a pair (torch_npu's older call sites).
  std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t increment);
  // The state as a generator object, what graph-safe RNG code saves and
  // restores: a copy of the seed and offset.
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) override;
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override;
  static c10::DeviceType device_type();

 private:
  NPUGeneratorImpl* clone_impl() const override;
  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t philox_offset_per_thread_ = 0;
};

namespace detail {

// The default generator of `device_index` (-1: the current device).
TORCH_NPU_API const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index = -1);
// A new generator on `device_index` (-1: the current device).
TORCH_NPU_API at::Generator createNPUGenerator(c10::DeviceIndex device_index = -1);

}  // namespace detail
}  // namespace at_npu
