#include "csrc/launch/strict_mode.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "csrc/core/npu_error.h"
#include <vnpu/environment.h>

namespace torch_npu {

std::atomic<bool> g_strict_any{false};

namespace {

// The kernels an op real torch_npu implements ran under before strict mode
// wrapped it (its ATen composite, or the CPU fallback), per dispatch key.
struct WrappedKernels {
  std::optional<c10::SafeKernelFunction> autograd;  // at AutogradPrivateUse1
  std::optional<c10::SafeKernelFunction> backend;   // at PrivateUse1
};

struct Config {
  std::unordered_set<std::string> native;  // "aten::name.overload" and "aten::name"
  std::unordered_map<std::string, std::pair<uint64_t, std::string>> rules;  // by "aten::name": rejected mask, list
  std::string chip;
};

std::mutex g_mutex;
std::shared_ptr<const Config> g_config;           // guarded by g_mutex
std::map<std::string, StrictFinding> g_findings;  // guarded by g_mutex; key: op + kind
std::atomic<uint64_t> g_generation{0};            // bumped at each set_strict_mode

// Wrapped ops, by their OperatorName (the dispatcher's own, so the address is
// stable). Entries are added, never removed, so a pointer into the map stays
// valid without the lock. Guarded by g_mutex.
std::unordered_map<const c10::OperatorName*, WrappedKernels> g_wrapped;
std::unique_ptr<torch::Library> g_wrapper_library;  // while strict mode is on; guarded by g_mutex

// What one operator needs checking for, decided once per operator.
struct Decision {
  bool native_composite = false;  // real torch_npu's kernel; a composite here
  bool fallback = false;          // real torch_npu has no npu kernel
  uint64_t rejected = 0;          // 1 << ScalarType of the dtypes the chip refuses
  const std::string* supported = nullptr;
  const WrappedKernels* wrapped = nullptr;  // its wrapper's kernels, if strict mode wrapped it
  std::string full_name;
};

// One thread's view: one thread_local, so one TLS lookup per check.
struct ThreadState {
  const c10::OperatorHandle* boxed_op = nullptr;  // the StrictOpScope's op
  const Decision* composite = nullptr;            // the outermost wrapped op this thread is inside
  uint64_t generation = ~uint64_t{0};
  std::shared_ptr<const Config> config;           // g_config as of `generation`
  std::unordered_map<const void*, const Decision*> by_name;               // hand-written launch names
  std::unordered_map<const c10::OperatorName*, Decision> by_op;
};

ThreadState& state() {
  thread_local ThreadState t;
  return t;
}

// The current config, cached per thread: no lock per op. Null when off.
const Config* config(ThreadState& t) {
  const uint64_t now = g_generation.load(std::memory_order_acquire);
  if (t.generation != now) {
    std::lock_guard<std::mutex> lock(g_mutex);
    t.config = g_config;
    t.generation = now;
    t.by_name.clear();
    t.by_op.clear();
  }
  return t.config.get();
}

// Whether real torch_npu implements `name` ("aten::add" with `full`, "aten::add.Tensor").
bool is_native(const Config& cfg, const c10::OperatorName& name, const std::string& full) {
  return cfg.native.count(full) > 0 || cfg.native.count(name.name) > 0;
}

const Decision& decide(ThreadState& t, const Config& cfg, const c10::OperatorName& name) {
  auto it = t.by_op.find(&name);
  if (it != t.by_op.end()) return it->second;
  Decision d;
  d.full_name = c10::toString(name);
  if (name.name.rfind("aten::", 0) == 0) {
    const bool native = is_native(cfg, name, d.full_name);
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      auto wrapped = g_wrapped.find(&name);
      if (wrapped != g_wrapped.end()) d.wrapped = &wrapped->second;
    }
    auto handle = c10::Dispatcher::singleton().findOp(name);
    const bool npu_kernel = d.wrapped == nullptr && handle.has_value() &&
                            handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
    if (npu_kernel) {
      d.fallback = !native;
    } else {
      d.native_composite = native;
    }
  }
  auto rule = cfg.rules.find(name.name);
  if (rule != cfg.rules.end()) {
    d.rejected = rule->second.first;
    d.supported = &rule->second.second;
  }
  return t.by_op.emplace(&name, std::move(d)).first->second;
}

// A hand-written kernel's launch name ("relu", "add.Tensor", a string
// literal, so its address names it) as the aten op it is.
const Decision* decide(ThreadState& t, const Config& cfg, const char* launch_name) {
  auto it = t.by_name.find(launch_name);
  if (it != t.by_name.end()) return it->second;
  const Decision* d = nullptr;
  std::string name = launch_name;
  if (name.find("::") == std::string::npos) name = "aten::" + name;
  const size_t dot = name.find('.');
  c10::OperatorName op_name(name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1));
  if (auto handle = c10::Dispatcher::singleton().findOp(op_name)) d = &decide(t, cfg, handle->operator_name());
  t.by_name.emplace(launch_name, d);
  return d;
}

bool record(const std::string& op, const char* kind, const std::string& detail) {
  std::lock_guard<std::mutex> lock(g_mutex);
  StrictFinding& f = g_findings[op + "|" + kind];
  if (f.count++ == 0) {
    f.op = op;
    f.kind = kind;
    f.detail = detail;
    return true;
  }
  return false;
}

std::string dt_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "DT_FLOAT";
    case c10::kHalf: return "DT_FLOAT16";
    case c10::kBFloat16: return "DT_BFLOAT16";
    case c10::kDouble: return "DT_DOUBLE";
    case c10::kComplexFloat: return "DT_COMPLEX64";
    case c10::kComplexDouble: return "DT_COMPLEX128";
    case c10::kUInt64: return "DT_UINT64";
    case c10::kUInt32: return "DT_UINT32";
    case c10::kUInt16: return "DT_UINT16";
    case c10::kLong: return "DT_INT64";
    case c10::kInt: return "DT_INT32";
    case c10::kShort: return "DT_INT16";
    case c10::kChar: return "DT_INT8";
    case c10::kByte: return "DT_UINT8";
    case c10::kBool: return "DT_BOOL";
    default: return std::string("DT_") + c10::toString(t);
  }
}

}  // namespace

uint64_t npu_dtypes_of(c10::ArrayRef<c10::IValue> args) {
  uint64_t mask = 0;
  auto note = [&](const at::Tensor& t) {
    if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
      mask |= uint64_t{1} << (static_cast<unsigned>(t.scalar_type()) & 63);
    }
  };
  for (const c10::IValue& value : args) {
    if (value.isTensor()) {
      note(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) note(t);
    }
  }
  return mask;
}

namespace {

void check_launch(const Decision* d, const Config* cfg, uint64_t npu_dtypes) {
  if (d == nullptr || cfg == nullptr) return;
  if (const uint64_t bad = d->rejected & npu_dtypes) {
    const auto dtype = static_cast<c10::ScalarType>(__builtin_ctzll(bad));
    std::string kernel = d->full_name.substr(6, d->full_name.find('.') == std::string::npos
                                                    ? std::string::npos : d->full_name.find('.') - 6);
    if (!kernel.empty()) kernel[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kernel[0])));
    const std::string message = "call aclnn" + kernel + " failed, detail:EZ1001: " + d->full_name +
                                ": Tensor of dtype " + dt_name(dtype) + " not implemented on " + cfg->chip +
                                ", should be in dtype support list [" + *d->supported +
                                "]. (vNPU strict mode: torch.npu.set_check_mode(True))";
    record(d->full_name, "dtype", message);
    NPU_CHECK_WITH(Error, ErrCode::kNotSupport, false, message);
  }
  if (d->fallback) {
    const std::string message = "CAUTION: The operator '" + d->full_name +
                                "' is not currently supported on the NPU backend and will fall back to run on the "
                                "CPU. This may have performance implications. (vNPU strict mode: real torch_npu on " +
                                cfg->chip + " has no npu kernel for it)";
    const bool first = record(d->full_name, "cpu_fallback", message);
    NPU_CHECK_WITH(NotImplementedError, ErrCode::kNotSupport, !vnpu::environment().fallback_cpu_disable,
                   "The operator '", d->full_name, "' is not currently supported on the NPU backend, and the CPU "
                   "fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1. Unset it to run this operator on the "
                   "CPU, or replace the operator. (vNPU strict mode: real torch_npu on ", cfg->chip,
                   " has no npu kernel for it)");
    if (first) TORCH_WARN(message);
  }
}

}  // namespace

void strict_check_launch(const char* op_name, uint64_t npu_dtypes) {
  ThreadState& t = state();
  const Config* cfg = config(t);
  if (cfg == nullptr) return;
  const Decision* d = t.composite;
  if (d == nullptr) {
    d = t.boxed_op != nullptr ? &decide(t, *cfg, t.boxed_op->operator_name()) : decide(t, *cfg, op_name);
  }
  check_launch(d, cfg, npu_dtypes);
}

void strict_check_op(const c10::OperatorHandle& op, uint64_t npu_dtypes) {
  ThreadState& t = state();
  const Config* cfg = config(t);
  if (cfg == nullptr) return;
  check_launch(t.composite != nullptr ? t.composite : &decide(t, *cfg, op.operator_name()), cfg, npu_dtypes);
}

void StrictOpScope::enter(const c10::OperatorHandle& op) {
  ThreadState& t = state();
  previous_ = t.boxed_op;
  t.boxed_op = &op;
  entered_ = true;
}

void StrictOpScope::leave() { state().boxed_op = previous_; }

namespace {

// The wrapper of an op real torch_npu implements and vNPU decomposes: the
// thread is inside it while its composite (or the CPU fallback) runs.
template <bool kAutograd>
void wrapped_op_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  ThreadState& t = state();
  const Config* cfg = config(t);
  const Decision* d = cfg != nullptr ? &decide(t, *cfg, op.operator_name()) : nullptr;
  const WrappedKernels* kernels = d != nullptr ? d->wrapped : nullptr;
  if (kernels == nullptr) {  // strict mode is being turned off on another thread
    std::lock_guard<std::mutex> lock(g_mutex);
    kernels = &g_wrapped.at(&op.operator_name());
  }
  const c10::SafeKernelFunction& kernel = kAutograd ? *kernels->autograd : *kernels->backend;
  if (d == nullptr || t.composite != nullptr) {
    kernel.callBoxed(op, keys, stack);
    return;
  }
  t.composite = d;
  struct Leave {
    ThreadState& t;
    ~Leave() { t.composite = nullptr; }
  } leave{t};
  kernel.callBoxed(op, keys, stack);
}

// Wraps every aten op real torch_npu implements that has no npu kernel here.
// Composites that autograd sees through (CompositeImplicitAutograd) are
// wrapped above autograd too, so that the whole op, forward and the parts
// autograd records, runs inside the wrapper. Called with g_mutex held.
std::unique_ptr<torch::Library> wrap_native_composites(const Config& cfg) {
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", std::nullopt, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& listed : dispatcher.getAllOpNames()) {
    if (listed.name.rfind("aten::", 0) != 0) continue;
    const std::string full = c10::toString(listed);
    if (!is_native(cfg, listed, full)) continue;
    auto handle = dispatcher.findOp(listed);
    if (!handle.has_value() || !handle->hasSchema()) continue;
    const c10::OperatorName* name = &handle->operator_name();
    if (g_wrapped.count(name) == 0) {
      if (handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
          handle->hasKernelForDispatchKey(c10::DispatchKey::AutogradPrivateUse1) ||
          !handle->hasComputedKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
        continue;  // an npu kernel (not a composite), or nothing to run
      }
      WrappedKernels kernels;
      kernels.backend = handle->getComputedKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
      if (handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
        kernels.autograd = handle->getComputedKernelForDispatchKey(c10::DispatchKey::AutogradPrivateUse1);
      }
      g_wrapped.emplace(name, std::move(kernels));
    }
    const WrappedKernels& kernels = g_wrapped.at(name);
    const char* schema_name = full.c_str() + 6;  // drop "aten::"
    library->impl(schema_name, torch::dispatch(c10::DispatchKey::PrivateUse1,
                                               torch::CppFunction::makeFromBoxedFunction<&wrapped_op_kernel<false>>()));
    if (kernels.autograd.has_value()) {
      library->impl(schema_name, torch::dispatch(c10::DispatchKey::AutogradPrivateUse1,
                                                 torch::CppFunction::makeFromBoxedFunction<&wrapped_op_kernel<true>>()));
    }
  }
  return library;
}

}  // namespace

void set_strict_mode(bool enabled, const std::vector<std::string>& native_ops, const std::vector<StrictRule>& rules,
                     const std::string& chip) {
  std::shared_ptr<Config> cfg;
  if (enabled) {
    cfg = std::make_shared<Config>();
    for (const std::string& op : native_ops) cfg->native.insert(op.rfind("aten::", 0) == 0 ? op : "aten::" + op);
    for (const StrictRule& r : rules) {
      uint64_t mask = 0;
      for (const std::string& name : r.dtypes) {
        for (int t = 0; t < static_cast<int>(c10::ScalarType::NumOptions) && t < 64; ++t) {
          if (name == c10::toString(static_cast<c10::ScalarType>(t))) mask |= uint64_t{1} << t;
        }
      }
      cfg->rules[r.op] = {mask, r.supported};
    }
    cfg->chip = chip;
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_wrapper_library.reset();  // unregisters the wrappers (re-registered below for the new list)
    if (cfg) g_wrapper_library = wrap_native_composites(*cfg);
    g_config = cfg;
  }
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  g_strict_any = enabled;
}

bool strict_mode_enabled() { return g_strict_any.load(); }

bool strict_mode_wraps(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const c10::OperatorName& name = op.operator_name();
  return g_wrapper_library != nullptr && g_config != nullptr && g_wrapped.count(&name) != 0 &&
         is_native(*g_config, name, c10::toString(name));
}

std::vector<StrictFinding> strict_findings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<StrictFinding> out;
  for (const auto& [key, f] : g_findings) out.push_back(f);
  return out;
}

void clear_strict_findings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_findings.clear();
}

}  // namespace torch_npu
