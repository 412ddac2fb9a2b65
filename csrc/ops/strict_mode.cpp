#include "csrc/ops/strict_mode.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>

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

struct Config {
  std::unordered_set<std::string> native;  // "aten::name.overload" and "aten::name"
  std::unordered_map<std::string, std::pair<uint64_t, std::string>> rules;  // by "aten::name": rejected mask, list
  std::string chip;
};

std::mutex g_mutex;
std::shared_ptr<const Config> g_config;           // guarded by g_mutex
std::map<std::string, StrictFinding> g_findings;  // guarded by g_mutex; key: op + kind
std::atomic<uint64_t> g_generation{0};            // bumped at each set_strict_mode
thread_local std::optional<at::CallbackHandle> t_callback;

// What one operator needs checking for, decided once per operator.
struct Decision {
  bool native_composite = false;  // real torch_npu's kernel; a composite here
  bool fallback = false;          // real torch_npu has no npu kernel
  uint64_t rejected = 0;          // 1 << ScalarType of the dtypes the chip refuses
  const std::string* supported = nullptr;
  std::string full_name;
};

// The aten ops this thread is inside (innermost last), and the outermost
// native composite among them.
thread_local std::vector<const Decision*> t_ops;
thread_local const Decision* t_composite = nullptr;
thread_local size_t t_composite_depth = 0;  // t_ops.size() when it began

// The current config, cached per thread: no lock per op.
const Config* config() {
  thread_local uint64_t generation = ~uint64_t{0};
  thread_local std::shared_ptr<const Config> cached;
  const uint64_t now = g_generation.load(std::memory_order_acquire);
  if (generation != now) {
    std::lock_guard<std::mutex> lock(g_mutex);
    cached = g_config;
    generation = now;
  }
  return cached.get();
}

bool has_npu_kernel(const c10::OperatorName& name) {
  auto handle = c10::Dispatcher::singleton().findOp(name);
  return handle.has_value() && handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

const Decision* decide(const at::RecordFunction& fn, const Config& cfg) {
  thread_local std::unordered_map<const void*, Decision> cache;
  thread_local uint64_t cached_for = ~uint64_t{0};
  const uint64_t generation = g_generation.load(std::memory_order_relaxed);
  if (cached_for != generation) {
    cache.clear();
    cached_for = generation;
  }
  auto it = cache.find(fn.name());
  if (it != cache.end()) return &it->second;
  Decision d;
  if (auto name = fn.operator_name()) {
    d.full_name = name->overload_name.empty() ? name->name : name->name + "." + name->overload_name;
    if (name->name.rfind("aten::", 0) == 0) {
      const bool native = cfg.native.count(d.full_name) > 0 || cfg.native.count(name->name) > 0;
      if (has_npu_kernel(*name)) {
        d.fallback = !native;
      } else {
        d.native_composite = native;
      }
    }
    auto rule = cfg.rules.find(name->name);
    if (rule != cfg.rules.end()) {
      d.rejected = rule->second.first;
      d.supported = &rule->second.second;
    }
  }
  return &cache.emplace(fn.name(), std::move(d)).first->second;
}

std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  const Config* cfg = config();
  const Decision* d = cfg != nullptr ? decide(fn, *cfg) : nullptr;
  t_ops.push_back(d);
  if (d != nullptr && d->native_composite && t_composite == nullptr) {
    t_composite = d;
    t_composite_depth = t_ops.size();
  }
  return nullptr;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext*) {
  if (t_ops.empty()) return;  // began before strict mode was turned on
  if (t_composite != nullptr && t_ops.size() == t_composite_depth) t_composite = nullptr;
  t_ops.pop_back();
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

void strict_check_launch(uint64_t npu_dtypes) {
  if (t_ops.empty()) return;
  const Decision* d = t_composite != nullptr ? t_composite : t_ops.back();
  if (d == nullptr) return;
  const Config* cfg = config();
  if (cfg == nullptr) return;
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

void set_strict_mode(bool enabled, const std::vector<std::string>& native_ops, const std::vector<StrictRule>& rules,
                     const std::string& chip) {
  if (t_callback.has_value()) {
    at::removeCallback(*t_callback);
    t_callback.reset();
  }
  t_ops.clear();
  t_composite = nullptr;
  if (!enabled) {
    g_strict_any = false;
    return;
  }
  auto cfg = std::make_shared<Config>();
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
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_config = std::move(cfg);
  }
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  t_callback = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_op, &on_op_end).scopes({at::RecordScope::FUNCTION}));
  g_strict_any = true;
}

bool strict_mode_enabled() { return g_strict_any.load(); }

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
