#include "csrc/core/npu_op_hooks.h"

#include <atomic>

namespace torch_npu {
namespace {

std::atomic<OpHookBeginFn> g_begin{nullptr};
std::atomic<OpHookEndFn> g_end{nullptr};
std::atomic<OpHookTensorFn> g_pre{nullptr};
std::atomic<OpHookTensorFn> g_post{nullptr};
std::atomic<bool> g_enabled{false};

}  // namespace

void set_op_hook_begin(OpHookBeginFn fn) { g_begin.store(fn); }
void set_op_hook_end(OpHookEndFn fn) { g_end.store(fn); }
void set_op_hook_pre(OpHookTensorFn fn) { g_pre.store(fn); }
void set_op_hook_post(OpHookTensorFn fn) { g_post.store(fn); }

bool op_hooks_enabled() { return g_enabled.load(std::memory_order_relaxed); }
void set_op_hooks_flag(bool enabled) { g_enabled.store(enabled); }

void op_hook_begin(const std::string& op_name) {
  if (auto fn = g_begin.load()) fn(op_name);
}
void op_hook_end() {
  if (auto fn = g_end.load()) fn();
}
void op_hook_pre(const at::Tensor& tensor) {
  if (auto fn = g_pre.load()) fn(tensor);
}
void op_hook_post(const at::Tensor& tensor) {
  if (auto fn = g_post.load()) fn(tensor);
}

}  // namespace torch_npu
