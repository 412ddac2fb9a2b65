// NpuGenerator: the random number generator of an npu device.
//
// State is (seed, offset), like torch_npu's Philox-based generator: each
// random op takes the next offset and derives from (seed, offset) the seed
// of a CPU generator that its stage-2 kernel uses. So the same seed gives the
// same numbers run to run, whatever the stream timing, and get/set_state is
// 16 bytes.
//
// Thread-safety: as every c10 generator, callers hold mutex_ while drawing.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_npu {

class NpuGenerator final : public c10::GeneratorImpl {
 public:
  explicit NpuGenerator(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // The state as a generator object (what graph-safe RNG code, e.g.
  // MindSpeed's, saves and restores): a copy of (seed, offset).
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) override;
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Seed for the next random op's CPU generator; advances the offset.
  uint64_t next_op_seed();

 private:
  NpuGenerator* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// A new generator for `device` (-1: current device); checks the index.
at::Generator new_generator(c10::DeviceIndex device);

// Default generator of `device` (-1: current device).
const at::Generator& default_generator(c10::DeviceIndex device);

// Takes the generator an op was given (or the device default) and returns
// the seed its stage-2 CPU generator must use.
uint64_t draw_op_seed(const std::optional<at::Generator>& generator, c10::DeviceIndex device);

// A fresh CPU generator seeded for one op (stage 2).
at::Generator cpu_generator_for(uint64_t seed);

}  // namespace torch_npu
