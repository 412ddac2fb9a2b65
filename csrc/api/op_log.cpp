#include "csrc/api/op_log.h"
#include "csrc/api/record_function_inputs.h"

#include <vnpu/log.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <cctype>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>

namespace torch_npu {
namespace {

constexpr int kDebug = 10;
constexpr int kInfo = 20;

constexpr const char* kLogger = "torch_npu.op_plugin";

std::mutex g_log_mutex;
std::optional<at::CallbackHandle> g_log_handle;  // guarded by g_log_mutex

// Only the operator the user called is logged, not the ATen calls its
// kernels make: op-plugin logs the one aclnn launch an operator makes.
thread_local int t_log_depth = 0;

// Views and metadata changes launch no kernel on the device.
bool launches_a_kernel(const c10::FunctionSchema& schema) {
  for (const c10::Argument& ret : schema.returns()) {
    const c10::AliasInfo* alias = ret.alias_info();
    if (alias != nullptr && !alias->isWrite()) return false;
  }
  return true;
}

std::string describe(const c10::IValue& value) {
  std::ostringstream out;
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!t.defined()) return "None";
    out << "Tensor(" << t.sizes() << ", " << c10::toString(t.scalar_type()) << ", " << t.device() << ")";
  } else if (value.isTensorList()) {
    out << "TensorList[" << value.toTensorVector().size() << "]";
  } else if (value.isNone()) {
    out << "None";
  } else if (value.isScalar() || value.isBool() || value.isString() || value.isIntList()) {
    out << value;
  } else {
    out << value.tagKind();
  }
  return out.str();
}

std::unique_ptr<at::ObserverContext> on_log_enter(const at::RecordFunction& fn) {
  if (t_log_depth++ > 0) return nullptr;
  const std::string_view name(fn.name());
  if (name.rfind("aten::", 0) != 0) return nullptr;
  const auto inputs = fn.inputs();
  if (!has_npu_tensor_input(inputs)) return nullptr;
  const std::optional<c10::OperatorName> op_name = fn.operator_name();
  if (!op_name) return nullptr;
  const auto handle = c10::Dispatcher::singleton().findOp(*op_name);
  if (!handle || !handle->hasSchema() || !launches_a_kernel(handle->schema())) return nullptr;
  const int level = vnpu::log::level_of(kLogger);
  if (level > kInfo) return nullptr;

  const std::string aclnn = aclnn_name_of(std::string(name));
  std::ostringstream message;
  message << aclnn << " EXEC_NPU_CMD with task_queue = true";
  const auto& arguments = handle->schema().arguments();
  for (std::size_t i = 0; i < inputs.size() && i < arguments.size(); ++i) {
    message << (i == 0 ? ", " : "; ") << arguments[i].name() << " = " << describe(inputs[i]);
  }
  vnpu::log::write(kLogger, vnpu::log::Level::kInfo, nullptr, message.str());
  if (level <= kDebug) {
    vnpu::log::write(kLogger, vnpu::log::Level::kDebug, nullptr,
                     aclnn + " " + handle->schema().operator_name().name +
                         (op_name->overload_name.empty() ? "" : "." + op_name->overload_name));
  }
  return nullptr;
}

void on_log_exit(const at::RecordFunction&, at::ObserverContext*) { --t_log_depth; }

}  // namespace

std::string aclnn_name_of(const std::string& aten_name) {
  std::string base = aten_name.rfind("aten::", 0) == 0 ? aten_name.substr(6) : aten_name;
  bool in_place = false;
  if (!base.empty() && base.back() == '_') {
    in_place = true;
    base.pop_back();
  }
  std::string name = in_place ? "aclnnInplace" : "aclnn";
  bool upper = true;
  for (char c : base) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name;
}

void refresh_op_plugin_log() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  const bool on = vnpu::log::level_of(kLogger) <= kInfo;
  if (on && !g_log_handle) {
    g_log_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(on_log_enter, on_log_exit).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  } else if (!on && g_log_handle) {
    at::removeCallback(*g_log_handle);
    g_log_handle.reset();
  }
}

}  // namespace torch_npu
