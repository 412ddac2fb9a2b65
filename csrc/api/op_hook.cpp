#include "csrc/api/op_hook.h"
#include "csrc/api/record_function_inputs.h"

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

#include <ATen/record_function.h>

#include "csrc/core/npu_op_hooks.h"
#include "torch_npu/csrc/framework/OpHook.h"

namespace torch_npu {
namespace {

std::mutex g_mutex;
std::optional<at::CallbackHandle> g_handle;  // guarded by g_mutex

// Operators called from inside an operator (its kernels' own ATen calls)
// are not hooked: only what the user called.
thread_local int t_depth = 0;
thread_local bool t_hooked = false;  // the outermost operator had npu tensors

template <typename Fn>
void each_tensor(c10::ArrayRef<c10::IValue> values, Fn fn) {
  for (const c10::IValue& value : values) {
    if (value.isTensor()) {
      fn(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) fn(t);
    }
  }
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (t_depth++ > 0) return nullptr;
  t_hooked = false;
  // Collectives are hooked by the hccl process group (issue, then wait).
  if (std::string_view(fn.name()).rfind("c10d::", 0) == 0) return nullptr;
  const auto inputs = fn.inputs();
  if (!has_npu_tensor_input(inputs)) return nullptr;
  t_hooked = true;
  op_hook_begin(fn.name());
  each_tensor(inputs, [](const at::Tensor& t) { op_hook_pre(t); });
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  if (--t_depth > 0 || !t_hooked) return;
  t_hooked = false;
  each_tensor(fn.outputs(), [](const at::Tensor& t) { op_hook_post(t); });
  op_hook_end();
}

}  // namespace

void set_op_hooks_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(g_mutex);
  set_op_hooks_flag(enabled);
  if (enabled && !g_handle) {
    g_handle = at::addGlobalCallback(at::RecordFunctionCallback(on_enter, on_exit)
                                         .needsInputs(true)
                                         .needsOutputs(true)
                                         .scopes({at::RecordScope::FUNCTION}));
  } else if (!enabled && g_handle) {
    at::removeCallback(*g_handle);
    g_handle.reset();
  }
}

}  // namespace torch_npu

namespace at_npu {
namespace native {

void RegisterOpHookBeginFn(BeginFn fn) { torch_npu::set_op_hook_begin(fn); }
void RegisterOpHookEndFn(EndFn fn) { torch_npu::set_op_hook_end(fn); }
void RegisterOpHookPreFn(PreFn fn) { torch_npu::set_op_hook_pre(fn); }
void RegisterOpHookPostFn(PostFn fn) { torch_npu::set_op_hook_post(fn); }

}  // namespace native
}  // namespace at_npu
