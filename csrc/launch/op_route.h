#pragma once

// Which route an operator takes on npu, and why: the one place that answers.
//
// An op reaches the virtual device by one of these routes:
//   structured        generated from ATen's structured kernels (codegen/): meta
//                     function on the host, ATen's CPU kernel on the stream
//   hand_written      a kernel in csrc/ops/ (views, copies, factories, ...)
//   policy_table      the boxed async kernel, its outputs described by a row
//                     of op_policy.cpp's table
//   sync_native       a CPU kernel run in stream order after the stream
//                     drains: results whose shape depends on values (nonzero)
//   python_composite  an npu:: fused op of torch_npu/op_plugin, defined as
//                     ATen ops (CompositeImplicitAutograd)
//   ascend_semantics  an aten:: op whose Ascend behaviour differs from CPU's,
//                     kernel in torch_npu/_ascend_semantics.py
//   composite         ATen's own decomposition (CompositeImplicitAutograd, or
//                     a backend-generic CompositeExplicitAutograd kernel)
//   cpu_fallback      no npu kernel: the boxed fallback copies to CPU and back
//   registered_later  a PrivateUse1 kernel registered after torch_npu's import
//                     (torch.library, a C++ extension)
//   none              no kernel for npu or CPU: calling it raises
//
// The registration sites note their route here as they register; what was
// registered by TORCH_LIBRARY_IMPL blocks of csrc/ is hand_written, taken as
// a snapshot when the module initialises.

#include <string>

namespace torch_npu {

enum class OpRoute {
  kStructured,
  kHandWritten,
  kPolicyTable,
  kSyncNative,
  kPythonComposite,
  kAscendSemantics,
};

// Records that `op` ("aten::add.Tensor", or "add.Tensor" for aten) takes `route`.
void note_op_route(const std::string& op, OpRoute route);

// Notes every op that has a PrivateUse1 kernel and no route yet as
// hand-written. Called once, after static initialisation registered the C++
// kernels and before any runtime registration (sync-native, Python).
void note_hand_written_routes();

struct OpRouteAnswer {
  std::string route;   // one of the names above
  std::string reason;  // a sentence: why, and what that means for a call
};

// The route of `op` ("ns::name" or "ns::name.overload"); throws c10::Error
// (ValueError in Python) for an operator the dispatcher does not know.
OpRouteAnswer op_route(const std::string& op);

}  // namespace torch_npu
