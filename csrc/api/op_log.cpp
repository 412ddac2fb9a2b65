#include "csrc/api/op_log.h"
#include "csrc/api/record_function_inputs.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

namespace torch_npu {
namespace {

constexpr int kDebug = 10;
constexpr int kInfo = 20;

// TORCH_NPU_LOGS_FILTER: "-word" drops lines holding it (first), then, if
// any "+word" is given, only lines holding one of those are kept. Words are
// matched as case-sensitive substrings of the whole line, as torch_npu does.
struct LogFilter {
  std::vector<std::string> keep;
  std::vector<std::string> drop;

  static LogFilter parse(const std::string& text) {
    LogFilter filter;
    std::stringstream items(text);
    std::string item;
    while (std::getline(items, item, ',')) {
      const auto begin = item.find_first_not_of(" \t");
      if (begin == std::string::npos) continue;
      item = item.substr(begin, item.find_last_not_of(" \t") - begin + 1);
      if (item.size() < 2) continue;
      if (item[0] == '+') filter.keep.push_back(item.substr(1));
      if (item[0] == '-') filter.drop.push_back(item.substr(1));
    }
    return filter;
  }

  bool passes(const std::string& line) const {
    for (const std::string& word : drop) {
      if (line.find(word) != std::string::npos) return false;
    }
    if (keep.empty()) return true;
    for (const std::string& word : keep) {
      if (line.find(word) != std::string::npos) return true;
    }
    return false;
  }
};

struct LogState {
  int level = kInfo;
  LogFilter filter;
};

std::mutex g_log_mutex;
std::optional<at::CallbackHandle> g_log_handle;  // guarded by g_log_mutex
std::shared_ptr<const LogState> g_state;         // guarded by g_log_mutex; read through a copy

// Only the operator the user called is logged, not the ATen calls its
// kernels make: op-plugin logs the one aclnn launch an operator makes.
thread_local int t_log_depth = 0;

std::shared_ptr<const LogState> current_state() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return g_state;
}

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

// torch_npu's log line: "I1204 22:55:01.123456 4242] [rank:0] message".
std::string log_line(char level_char, const std::string& message) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local{};
  localtime_r(&ts.tv_sec, &local);
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "%c%02d%02d %02d:%02d:%02d.%06ld %d] ", level_char, local.tm_mon + 1,
                local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, ts.tv_nsec / 1000, static_cast<int>(getpid()));
  std::string line = prefix;
  if (const char* rank = std::getenv("RANK")) line += std::string("[rank:") + rank + "] ";
  return line + message + "\n";
}

void emit(const LogState& state, char level_char, const std::string& message) {
  const std::string line = log_line(level_char, message);
  if (!state.filter.passes(line)) return;
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
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
  const std::shared_ptr<const LogState> state = current_state();
  if (!state) return nullptr;

  const std::string aclnn = aclnn_name_of(std::string(name));
  std::ostringstream message;
  message << aclnn << " EXEC_NPU_CMD with task_queue = true";
  const auto& arguments = handle->schema().arguments();
  for (std::size_t i = 0; i < inputs.size() && i < arguments.size(); ++i) {
    message << (i == 0 ? ", " : "; ") << arguments[i].name() << " = " << describe(inputs[i]);
  }
  emit(*state, 'I', message.str());
  if (state->level <= kDebug) emit(*state, 'V', aclnn + " " + handle->schema().operator_name().name +
                                                    (op_name->overload_name.empty() ? "" : "." + op_name->overload_name));
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

void set_op_plugin_log(int level, const std::string& filter) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  const bool on = level > 0 && level <= kInfo;
  if (on) {
    auto state = std::make_shared<LogState>();
    state->level = level;
    state->filter = LogFilter::parse(filter);
    g_state = std::move(state);
  } else {
    g_state.reset();
  }
  if (on && !g_log_handle) {
    g_log_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(on_log_enter, on_log_exit).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  } else if (!on && g_log_handle) {
    at::removeCallback(*g_log_handle);
    g_log_handle.reset();
  }
}

}  // namespace torch_npu
