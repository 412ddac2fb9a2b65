#include "csrc/core/npu_generator.h"

#include <ATen/EmptyTensor.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>

#include "csrc/core/npu_capture.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/stream.h>

namespace torch_npu {
namespace {

// splitmix64: mixes (seed, offset) into well-distributed per-op seeds.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

// The capture the current stream of `device` is making into an NPUGraph, or
// nullptr: a generator's state calls during a capture act on it (Note
// [Random ops in NPU graphs]).
std::shared_ptr<CaptureRng> capturing_rng(c10::DeviceIndex device) {
  // No capture before the device is initialised; asking would initialise it
  // (torch.manual_seed reaches here at import).
  if (!is_initialized() || device < 0 || device >= device_count()) return nullptr;
  const vnpu::Stream& stream = current_runtime_stream(device);
  return stream.capturing() ? capture_rng_of(stream) : nullptr;
}

at::Generator handle_of(const NpuGenerator* generator) {
  return at::Generator(c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(const_cast<NpuGenerator*>(generator)));
}

}  // namespace

}  // namespace torch_npu

namespace at_npu {

using torch_npu::CaptureRng;

NPUGeneratorImpl::NPUGeneratorImpl(c10::DeviceIndex device_index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1,
                                     device_index < 0 ? torch_npu::current_device() : device_index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {
  torch_npu::check_device_index(device().index());
}

// The key function: the type's information lives here, in _C, for every
// extension's dynamic_cast.
NPUGeneratorImpl::~NPUGeneratorImpl() = default;

c10::DeviceType NPUGeneratorImpl::device_type() { return c10::DeviceType::PrivateUse1; }

std::shared_ptr<NPUGeneratorImpl> NPUGeneratorImpl::clone() const {
  return std::shared_ptr<NPUGeneratorImpl>(clone_impl());
}

void NPUGeneratorImpl::set_current_seed(uint64_t seed) {
  if (torch_npu::capturing_rng(device().index()) != nullptr) {
    // The graph's draws follow the generator's seed at each replay; a
    // capture cannot give it another one (CUDA's rule, in torch_npu's words).
    TORCH_CHECK(seed == seed_, "NPUGeneratorImpl::set_current_seed can be called during stream capture only if "
                               "new seed is the same as the original seed.");
    return;
  }
  seed_ = seed;
  philox_offset_per_thread_ = 0;
}
void NPUGeneratorImpl::set_offset(uint64_t offset) { philox_offset_per_thread_ = offset; }
uint64_t NPUGeneratorImpl::get_offset() const { return philox_offset_per_thread_; }
uint64_t NPUGeneratorImpl::current_seed() const { return seed_; }
void NPUGeneratorImpl::set_philox_offset_per_thread(uint64_t offset) { philox_offset_per_thread_ = offset; }
uint64_t NPUGeneratorImpl::philox_offset_per_thread() const { return philox_offset_per_thread_; }

uint64_t NPUGeneratorImpl::seed() {
  std::random_device rd;
  const uint64_t s = (static_cast<uint64_t>(rd()) << 32) | rd();
  set_current_seed(s);
  return s;
}

void NPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  // A CPU, strided, contiguous byte tensor, as for CPU generators: a meta or
  // npu tensor has no host bytes to read, a strided one would be misread.
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(new_state.numel() == static_cast<int64_t>(torch_npu::kStateBytes),
              "RNG state is wrong size: expected ", torch_npu::kStateBytes, " bytes, got ", new_state.numel());
  uint64_t values[2];
  std::memcpy(values, new_state.data(), torch_npu::kStateBytes);
  if (std::shared_ptr<CaptureRng> rng = torch_npu::capturing_rng(device().index())) {
    // During a capture the offset is the capture's own draw count (what
    // get_state returned there): checkpointing's recompute replays draws.
    set_current_seed(values[0]);
    rng->set_draws_of(torch_npu::handle_of(this), values[1]);
    return;
  }
  seed_ = values[0];
  philox_offset_per_thread_ = values[1];
}

c10::intrusive_ptr<c10::TensorImpl> NPUGeneratorImpl::get_state() const {
  // A host tensor made without dispatching (as CUDA's generator does):
  // under FakeTensorMode or a tracing mode at::empty would return a tensor
  // without data to copy into.
  auto state = at::detail::empty_cpu({static_cast<int64_t>(torch_npu::kStateBytes)}, c10::ScalarType::Byte,
                                     std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  const std::shared_ptr<CaptureRng> rng = torch_npu::capturing_rng(device().index());
  const uint64_t values[2] = {seed_, rng ? rng->draws_of(torch_npu::handle_of(this)) : philox_offset_per_thread_};
  std::memcpy(state.data_ptr(), values, torch_npu::kStateBytes);
  return state.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> NPUGeneratorImpl::philox_engine_inputs(uint64_t increment) {
  const uint64_t offset = philox_offset_per_thread_;
  philox_offset_per_thread_ += ((increment + 3) / 4) * 4;
  return {seed_, offset};
}

PhiloxNpuState NPUGeneratorImpl::philox_npu_state(uint64_t increment) {
  // Note [Random ops in NPU graphs]: vNPU's own random ops take their draws
  // from the replay's state; an extension kernel given a fixed (seed, offset)
  // at capture would draw the same numbers at every replay.
  NPU_CHECK_WITH(Error, torch_npu::ErrCode::kNotSupport, torch_npu::capturing_rng(device().index()) == nullptr,
                 "NPUGeneratorImpl::philox_npu_state is not supported during an NPU graph capture on vNPU: a "
                 "captured kernel would draw the same numbers at every replay. Draw outside the capture, or use "
                 "torch_npu's random operators, which draw fresh numbers at each replay.");
  const auto [seed, offset] = philox_engine_inputs(increment);
  return PhiloxNpuState(seed, offset);
}

void NPUGeneratorImpl::graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) {
  const auto* other = dynamic_cast<const NPUGeneratorImpl*>(state.get());
  TORCH_CHECK(other != nullptr, "graphsafe_set_state: expected the state of an npu generator (from "
              "graphsafe_get_state), got one of a ", state ? c10::DeviceTypeName(state->device().type()) : "null",
              " generator");
  seed_ = other->seed_;
  philox_offset_per_thread_ = other->philox_offset_per_thread_;
}

c10::intrusive_ptr<c10::GeneratorImpl> NPUGeneratorImpl::graphsafe_get_state() const {
  return c10::intrusive_ptr<c10::GeneratorImpl>::reclaim(clone_impl());
}

NPUGeneratorImpl* NPUGeneratorImpl::clone_impl() const {
  auto* copy = new NPUGeneratorImpl(device().index());
  copy->seed_ = seed_;
  copy->philox_offset_per_thread_ = philox_offset_per_thread_;
  return copy;
}

}  // namespace at_npu

namespace torch_npu {

OpSeed next_op_seed(NpuGenerator& generator) {
  const uint64_t offset = generator.philox_offset_per_thread();
  generator.set_philox_offset_per_thread(offset + 1);
  return OpSeed{generator.current_seed(), offset, -1};
}

// Note [Random ops in NPU graphs]
// An eager random op's stage-2 generator is seeded with mix(seed ^
// mix(offset)) of its generator's state when it was launched. A captured op
// cannot know that state: it is the state at each replay. So during a
// capture the op takes (slot of its generator in the graph, k-th draw of
// that generator in the graph), and the generator is left alone. A replay
// reads each slot's generator (seed, offset) and advances the offset by the
// slot's draws (CaptureRng::take_replay_state, on the host, in replay order),
// and its task publishes those values to the worker thread that runs the
// captured tasks (ReplayRngScope); the k-th op then uses offset + k. A
// replay draws exactly what the captured ops, launched eagerly in its place,
// would have drawn, and the next eager op continues after them.
namespace {
thread_local const std::vector<std::pair<uint64_t, uint64_t>>* t_replay_rng = nullptr;

}  // namespace

uint64_t OpSeed::value() const {
  if (graph_slot < 0) return mix(seed ^ mix(offset));
  // Captured tasks run only inside their graph's replay.
  TORCH_INTERNAL_ASSERT(t_replay_rng != nullptr && graph_slot < static_cast<int32_t>(t_replay_rng->size()),
                        "a random op captured in an NPU graph ran outside its graph's replay");
  const auto& [replay_seed, replay_offset] = (*t_replay_rng)[graph_slot];
  return mix(replay_seed ^ mix(replay_offset + offset));
}

CaptureRng::Slot& CaptureRng::slot_of(const at::Generator& generator) {
  for (Slot& slot : slots_) {
    if (slot.generator.unsafeGetGeneratorImpl() == generator.unsafeGetGeneratorImpl()) return slot;
  }
  slots_.push_back(Slot{generator, 0});
  return slots_.back();
}

OpSeed CaptureRng::draw(const at::Generator& generator) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slot_of(generator);
  return OpSeed{0, slot.draws++, static_cast<int32_t>(&slot - slots_.data())};
}

uint64_t CaptureRng::draws_of(const at::Generator& generator) {
  std::lock_guard<std::mutex> lock(mutex_);
  return slot_of(generator).draws;
}

void CaptureRng::set_draws_of(const at::Generator& generator, uint64_t draws) {
  std::lock_guard<std::mutex> lock(mutex_);
  slot_of(generator).draws = draws;
}

std::vector<std::pair<uint64_t, uint64_t>> CaptureRng::take_replay_state() {
  // The slots are copied first: a generator's lock is never taken while
  // mutex_ is held (get_state takes them in the other order).
  std::vector<Slot> slots;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slots = slots_;
  }
  std::vector<std::pair<uint64_t, uint64_t>> state;
  state.reserve(slots.size());
  for (Slot& slot : slots) {
    std::lock_guard<std::mutex> lock(slot.generator.mutex());
    auto* gen = at::check_generator<NpuGenerator>(slot.generator);
    state.emplace_back(gen->current_seed(), gen->get_offset());
    gen->set_offset(gen->get_offset() + slot.draws);
  }
  return state;
}

ReplayRngScope::ReplayRngScope(const std::vector<std::pair<uint64_t, uint64_t>>* state)
    : previous_(t_replay_rng) {
  t_replay_rng = state;
}
ReplayRngScope::~ReplayRngScope() { t_replay_rng = previous_; }

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return at::make_generator<NpuGenerator>(device);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::array<at::Generator, kMaxDevices> generators;
  static std::array<std::once_flag, kMaxDevices> once;
  if (device < 0) device = current_device();
  check_device_index(device);
  std::call_once(once[device], [device] {
    generators[device] = at::make_generator<NpuGenerator>(device);
  });
  return generators[device];
}

OpSeed draw_op_seed(const std::optional<at::Generator>& generator, c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  at::Generator gen = generator.has_value() && generator->defined() ? *generator : default_generator(device);
  TORCH_CHECK(gen.device().type() == c10::DeviceType::PrivateUse1,
              "Expected a 'npu' device type for generator but found '", gen.device().type(), "'");
  const vnpu::Stream& stream = current_runtime_stream(device);
  if (stream.capturing()) {
    // Note [Random ops in NPU graphs]
    std::shared_ptr<CaptureRng> rng = capture_rng_of(stream);
    NPU_CHECK_WITH(Error, ErrCode::kNotSupport, rng != nullptr,
                   "operation not permitted when stream is capturing: random number generation inside a capture "
                   "that is not an NPUGraph's");
    return rng->draw(gen);
  }
  std::lock_guard<std::mutex> lock(gen.mutex());
  return next_op_seed(*at::check_generator<NpuGenerator>(gen));
}

at::Generator cpu_generator_for(const OpSeed& seed) { return at::make_generator<at::CPUGeneratorImpl>(seed.value()); }

}  // namespace torch_npu

