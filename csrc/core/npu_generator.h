// NpuGenerator: the random number generator of an npu device.
//
// State is (seed, offset), like torch_npu's Philox-based generator: each
// random op takes the next offset and derives from (seed, offset) the seed
// of a CPU generator that its stage-2 kernel uses. So the same seed gives the
// same numbers run to run, whatever the stream timing, and get/set_state is
// 16 bytes.
//
// Inside an NPU graph capture a random op does not advance the generator:
// it takes the next offset *within the graph* (Note [Random ops in NPU
// graphs]), and each replay reads the generator's (seed, offset) of that
// moment and advances it by the graph's draws, as CUDA graphs' philox
// bookkeeping does. So replays draw fresh numbers, the same ones the
// captured ops would have drawn eagerly at that point.
//
// Thread-safety: as every c10 generator, callers hold mutex_ while drawing.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include "torch_npu/csrc/aten/NPUGeneratorImpl.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace torch_npu {

// The seed of one random op's stage-2 CPU generator, known at stage 1 for
// an eager op, at replay time for a captured one.
struct OpSeed {
  uint64_t seed = 0;    // eager: the generator's seed
  uint64_t offset = 0;  // eager: the generator's offset; captured: the offset within the graph
  int32_t graph_slot = -1;  // captured: which of the graph's generators (CaptureRng's slot)
  // Stage 2: the seed (inside a replay, from the state its ReplayRngScope set).
  uint64_t value() const;
};

// The npu generator is torch_npu's public at_npu::NPUGeneratorImpl
// (torch_npu/csrc/aten/NPUGeneratorImpl.h), defined in npu_generator.cpp.
using NpuGenerator = at_npu::NPUGeneratorImpl;

// Seed for the next random op's CPU generator; advances the offset by one.
// The caller holds the generator's mutex.
OpSeed next_op_seed(NpuGenerator& generator);

// A new generator for `device` (-1: current device); checks the index.
at::Generator new_generator(c10::DeviceIndex device);

// Default generator of `device` (-1: current device).
const at::Generator& default_generator(c10::DeviceIndex device);

// Takes the generator an op was given (or the device default) and returns
// the seed its stage-2 CPU generator must use.
OpSeed draw_op_seed(const std::optional<at::Generator>& generator, c10::DeviceIndex device);

// A fresh CPU generator seeded for one op (stage 2).
at::Generator cpu_generator_for(const OpSeed& seed);

// The generators an NPU graph's capture drew from, and how often each.
class CaptureRng {
 public:
  // The slot of `generator` in this capture, counting one more draw.
  OpSeed draw(const at::Generator& generator);
  // get_rng_state / set_rng_state during the capture (as CUDA's intragraph
  // offset): how many draws of `generator` the capture has made so far, and
  // rewinding or advancing that count. A replay advances the generator by
  // the count at the capture's end.
  uint64_t draws_of(const at::Generator& generator);
  void set_draws_of(const at::Generator& generator, uint64_t draws);
  // At replay (host side): each generator's (seed, offset) now, then advances
  // its offset by the capture's draws.
  std::vector<std::pair<uint64_t, uint64_t>> take_replay_state();

 private:
  struct Slot {
    at::Generator generator;
    uint64_t draws = 0;
  };
  Slot& slot_of(const at::Generator& generator);  // mutex_ held

  std::mutex mutex_;          // any thread may launch on the capturing stream
  std::vector<Slot> slots_;   // few: one per generator the captured ops used
};

// Makes a replay's generator states visible to the captured tasks it runs
// on this thread (OpSeed::value()).
class ReplayRngScope {
 public:
  explicit ReplayRngScope(const std::vector<std::pair<uint64_t, uint64_t>>* state);
  ~ReplayRngScope();
  ReplayRngScope(const ReplayRngScope&) = delete;
  ReplayRngScope& operator=(const ReplayRngScope&) = delete;

 private:
  const std::vector<std::pair<uint64_t, uint64_t>>* previous_;
};

}  // namespace torch_npu
