#include "csrc/ops/cpu_fallback.h"

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <iostream>
#include <mutex>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/ops/boxed_call.h"
#include "csrc/ops/strict_mode.h"
#include <vnpu/environment.h>

namespace torch_npu {
namespace {

std::mutex g_mutex;
std::map<std::string, int64_t> g_counts;
std::atomic<bool> g_debug{false};

}  // namespace

void npu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  normalize_optional_tensor_lists(op, stack);
  check_strict_mode(npu_dtypes_of(torch::jit::last(*stack, op.schema().arguments().size())));
  const std::string name = c10::toString(op.operator_name());
  NPU_CHECK_WITH(NotImplementedError, ErrCode::kNotSupport, !vnpu::environment().fallback_cpu_disable,
                 "The operator '", name, "' is not currently supported on the NPU backend, and the CPU "
                 "fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1. Unset it to run this operator "
                 "on the CPU, or replace the operator.");
  for (const c10::IValue& arg : torch::jit::last(*stack, op.schema().arguments().size())) {
    if (arg.isTensor() && arg.toTensor().defined() && arg.toTensor().device().type() == c10::DeviceType::PrivateUse1) {
      const std::string what = "'" + name + "', which falls back to the CPU";
      check_not_capturing(arg.toTensor().device().index(), what.c_str());
      break;
    }
  }
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    first = (g_counts[name]++ == 0);
  }
  if (first) {
    TORCH_WARN("CAUTION: The operator '", name,
               "' is not currently supported on the NPU backend and will fall back to run on the CPU. "
               "This may have performance implications.");
  } else if (g_debug.load(std::memory_order_relaxed)) {
    std::cerr << "[torch_npu] operator '" << name << "' falls back to the CPU\n";
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);
}

namespace {

void dense_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  npu_cpu_fallback(op, stack, c10::DispatchKey::CPU);
}

}  // namespace

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counts.clear();
}

void set_fallback_debug(bool enabled) { g_debug.store(enabled); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&dense_cpu_fallback>());
}

}  // namespace torch_npu
