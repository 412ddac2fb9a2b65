#include "csrc/launch/cpu_fallback.h"

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_copy_from_and_resize.h>
#include <torch/library.h>

#include <atomic>
#include <iostream>
#include <mutex>

#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "csrc/launch/boxed_call.h"
#include "csrc/launch/strict_mode.h"
#include <vnpu/environment.h>

namespace torch_npu {
namespace {

std::mutex g_fallback_mutex;
std::map<std::string, int64_t> g_fallback_counts;
std::atomic<bool> g_debug{false};

// True when an argument the op writes is also passed as another argument
// (sparse `add_` runs as add.out(self, self, other)).
bool has_aliased_mutable_argument(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& arguments = op.schema().arguments();
  const auto args = torch::jit::last(stack, arguments.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* info = arguments[i].alias_info();
    if (info == nullptr || !info->isWrite() || !args[i].isTensor()) continue;
    for (size_t j = 0; j < args.size(); ++j) {
      if (j != i && args[j].isTensor() && args[j].toTensor().is_same(args[i].toTensor())) return true;
    }
  }
  return false;
}

// at::native::cpu_fallback copies each argument to the host separately, so
// `out` and `self` become two tensors and the CPU kernel no longer sees the
// in-place call it was given; for sparse tensors that changes the result's
// layout (ATen's in-place sparse add concatenates, its out-of-place one
// merges). This fallback keeps one host copy per npu tensor.
void aliased_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;
  std::vector<at::Tensor> originals(num_args);
  std::vector<std::pair<c10::TensorImpl*, at::Tensor>> host_copies;
  c10::Device device(c10::DeviceType::PrivateUse1);
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& value = (*stack)[first + i];
    if (!value.isTensor() || !value.toTensor().defined() || value.toTensor().is_cpu()) continue;
    originals[i] = value.toTensor();
    device = originals[i].device();
    at::Tensor host;
    for (const auto& [impl, copy] : host_copies) {
      if (impl == originals[i].unsafeGetTensorImpl()) host = copy;
    }
    if (!host.defined()) {
      host = originals[i].cpu();
      host_copies.emplace_back(originals[i].unsafeGetTensorImpl(), host);
    }
    value = host;
  }
  std::vector<at::Tensor> hosts(num_args);
  for (size_t i = 0; i < num_args; ++i) {
    if (originals[i].defined()) hosts[i] = (*stack)[first + i].toTensor();
  }
  op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);
  for (size_t i = 0; i < num_args; ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (info != nullptr && info->isWrite() && originals[i].defined()) at::_copy_from_and_resize(hosts[i], originals[i]);
  }
  const size_t num_returns = schema.returns().size();
  const size_t returns_first = stack->size() - num_returns;
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& value = (*stack)[returns_first + r];
    if (!value.isTensor()) continue;
    const auto* info = schema.returns()[r].alias_info();
    bool aliased = false;
    for (size_t i = 0; info != nullptr && i < num_args && !aliased; ++i) {
      const auto* arg_info = schema.arguments()[i].alias_info();
      if (arg_info != nullptr && originals[i].defined() && arg_info->beforeSets() == info->beforeSets()) {
        value = originals[i];  // the caller's tensor, as for in-place and out= ops
        aliased = true;
      }
    }
    if (!aliased && value.toTensor().defined()) value = value.toTensor().to(device);
  }
}

}  // namespace

void npu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  normalize_optional_tensor_lists(op, stack);
  check_strict_mode(op, npu_dtypes_of(torch::jit::last(*stack, op.schema().arguments().size())));
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
    std::lock_guard<std::mutex> lock(g_fallback_mutex);
    first = (g_fallback_counts[name]++ == 0);
  }
  if (first) {
    TORCH_WARN("CAUTION: The operator '", name,
               "' is not currently supported on the NPU backend and will fall back to run on the CPU. "
               "This may have performance implications.");
  } else if (g_debug.load(std::memory_order_relaxed)) {
    std::cerr << "[torch_npu] operator '" << name << "' falls back to the CPU\n";
  }
  if (cpu_key != c10::DispatchKey::CPU && has_aliased_mutable_argument(op, *stack)) {
    aliased_cpu_fallback(op, stack, cpu_key);
    return;
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);
}

namespace {

void dense_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  npu_cpu_fallback(op, stack, c10::DispatchKey::CPU);
}

}  // namespace

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  return g_fallback_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  g_fallback_counts.clear();
}

void set_fallback_debug(bool enabled) { g_debug.store(enabled); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&dense_cpu_fallback>());
}

}  // namespace torch_npu
