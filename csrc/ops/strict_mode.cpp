#include "csrc/ops/strict_mode.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "csrc/core/npu_error.h"
#include <vnpu/environment.h>

namespace torch_npu {
namespace {

struct Config {
  std::unordered_set<std::string> native;                // "aten::name.overload" and "aten::name"
  std::unordered_map<std::string, StrictRule> rules;     // by "aten::name"
  std::string chip;
};

std::mutex g_mutex;
std::shared_ptr<const Config> g_config;              // guarded by g_mutex
std::map<std::string, StrictFinding> g_findings;     // guarded by g_mutex; key: op + kind
std::atomic<bool> g_enabled{false};
thread_local std::optional<at::CallbackHandle> t_callback;
thread_local std::string t_pending_message;
thread_local bool t_pending_not_implemented = false;
thread_local const at::RecordFunction* t_pending_owner = nullptr;  // the op the mark is for

void mark_pending(const at::RecordFunction& fn, std::string message, bool not_implemented) {
  t_pending_owner = &fn;
  t_pending_message = std::move(message);
  t_pending_not_implemented = not_implemented;
  t_strict_pending = true;
}

// What one operator needs checking for, decided once per operator.
struct Decision {
  bool native_composite = false;   // real torch_npu's kernel; a composite here
  bool fallback = false;           // real torch_npu has no npu kernel
  const StrictRule* rule = nullptr;  // dtypes it rejects
  std::string full_name;
};

std::atomic<uint64_t> g_generation{0};  // bumped at each set_strict_mode

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

// Ops real torch_npu implements itself that vNPU runs as ATen composites
// (scaled_dot_product_attention): what they decompose into here is vNPU's
// business, not the chip's, so nested ops are not checked.
thread_local int t_inside_native_composite = 0;
struct NativeComposite final : at::ObserverContext {};

bool has_npu_kernel(const c10::OperatorName& name) {
  auto handle = c10::Dispatcher::singleton().findOp(name);
  return handle.has_value() && handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

const Decision& decide(const at::RecordFunction& fn, const Config& cfg) {
  thread_local std::unordered_map<const void*, Decision> cache;  // per config: cleared when it changes
  thread_local const Config* cached_for = nullptr;
  if (cached_for != &cfg) {
    cache.clear();
    cached_for = &cfg;
  }
  auto it = cache.find(fn.name());
  if (it != cache.end()) return it->second;
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
    if (rule != cfg.rules.end()) d.rule = &rule->second;
  }
  return cache.emplace(fn.name(), std::move(d)).first->second;
}

void record(const std::string& op, const char* kind, const std::string& detail) {
  std::lock_guard<std::mutex> lock(g_mutex);
  StrictFinding& f = g_findings[op + "|" + kind];
  if (f.count++ == 0) {
    f.op = op;
    f.kind = kind;
    f.detail = detail;
  }
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
    case c10::kBool: return "DT_BOOL";
    default: return std::string("DT_") + c10::toString(t);
  }
}

// For an op real torch_npu implements and vNPU decomposes: its parts are
// not checked until it ends (their launch still raises the op's own mark).
std::unique_ptr<at::ObserverContext> enter_composite(const Decision& d) {
  if (!d.native_composite) return nullptr;
  ++t_inside_native_composite;
  return std::make_unique<NativeComposite>();
}

std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  if (fn.scope() != at::RecordScope::FUNCTION || t_inside_native_composite > 0) return nullptr;
  const Config* cfg = config();
  if (cfg == nullptr) return nullptr;
  const Decision& d = decide(fn, *cfg);
  if (!d.fallback && d.rule == nullptr && !d.native_composite) return nullptr;
  const at::Tensor* npu_input = nullptr;
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1) {
      npu_input = &v.toTensor();
      if (d.rule != nullptr) {
        const std::string dt = c10::toString(v.toTensor().scalar_type());
        for (const std::string& rejected : d.rule->dtypes) {
          if (rejected == dt) {
            std::string kernel = d.rule->op.substr(6);
            if (!kernel.empty()) kernel[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kernel[0])));
            const std::string message = "call aclnn" + kernel + " failed, detail:EZ1001: " + d.full_name +
                                        ": Tensor of dtype " + dt_name(v.toTensor().scalar_type()) +
                                        " not implemented on " + cfg->chip + ", should be in dtype support list [" +
                                        d.rule->supported + "]. (vNPU strict mode: torch.npu.set_check_mode(True))";
            record(d.full_name, "dtype", message);
            mark_pending(fn, message, /*not_implemented=*/false);
            return enter_composite(d);
          }
        }
      }
    }
  }
  if (d.native_composite) return enter_composite(d);
  if (d.fallback && npu_input != nullptr) {
    const std::string message = "CAUTION: The operator '" + d.full_name +
                                "' is not currently supported on the NPU backend and will fall back to run on the "
                                "CPU. This may have performance implications. (vNPU strict mode: real torch_npu on " +
                                cfg->chip + " has no npu kernel for it)";
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      first = g_findings.count(d.full_name + "|cpu_fallback") == 0;
    }
    record(d.full_name, "cpu_fallback", message);
    if (vnpu::environment().fallback_cpu_disable) {
      mark_pending(fn, "The operator '" + d.full_name + "' is not currently supported on the NPU backend, and the CPU "
                   "fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1. Unset it to run this operator on the "
                   "CPU, or replace the operator. (vNPU strict mode: real torch_npu on " + cfg->chip +
                   " has no npu kernel for it)", /*not_implemented=*/true);
    } else if (first) {
      TORCH_WARN(message);
    }
  }
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx != nullptr) --t_inside_native_composite;  // a NativeComposite ends
  // Its op returned without launching (a view, an early exit): the mark must
  // not hit the next op. Ops the kernel itself ran (CPU dry runs) leave it.
  if (&fn == t_pending_owner) {
    t_strict_pending = false;
    t_pending_owner = nullptr;
  }
}

}  // namespace

thread_local bool t_strict_pending = false;

void raise_pending_strict_error() {
  t_strict_pending = false;
  const std::string message = std::move(t_pending_message);
  if (t_pending_not_implemented) NPU_CHECK_WITH(NotImplementedError, ErrCode::kNotSupport, false, message);
  NPU_CHECK_WITH(Error, ErrCode::kNotSupport, false, message);
}

void set_strict_mode(bool enabled, const std::vector<std::string>& native_ops, const std::vector<StrictRule>& rules,
                     const std::string& chip) {
  if (t_callback.has_value()) {
    at::removeCallback(*t_callback);
    t_callback.reset();
  }
  if (!enabled) {
    g_enabled = false;
    return;
  }
  auto cfg = std::make_shared<Config>();
  for (const std::string& op : native_ops) cfg->native.insert(op.rfind("aten::", 0) == 0 ? op : "aten::" + op);
  for (const StrictRule& r : rules) cfg->rules[r.op] = r;
  cfg->chip = chip;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_config = std::move(cfg);
  }
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  t_inside_native_composite = 0;
  t_callback = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_op, &on_op_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  g_enabled = true;
}

bool strict_mode_enabled() { return g_enabled.load(); }

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
