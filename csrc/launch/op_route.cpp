#include "csrc/launch/op_route.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>

#include "csrc/launch/strict_mode.h"

namespace torch_npu {
namespace {

// Routes noted by the registration sites, by full name ("aten::add.Tensor").
// Function-local: the generated kernels note theirs during static
// initialisation, in whatever order the linker chose.
struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string, OpRoute> routes;  // guarded by mutex
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: used until the process ends
  return *r;
}

std::string full_name(const std::string& op) {
  return op.find("::") == std::string::npos ? "aten::" + op : op;
}

c10::OperatorName parse_name(const std::string& op) {
  const std::string full = full_name(op);
  const auto dot = full.find('.', full.find("::"));
  if (dot == std::string::npos) return c10::OperatorName(full, "");
  return c10::OperatorName(full.substr(0, dot), full.substr(dot + 1));
}

OpRouteAnswer describe(OpRoute route) {
  switch (route) {
    case OpRoute::kStructured:
      return {"structured",
              "generated from ATen's structured kernel (csrc/codegen): its meta function checks the arguments and "
              "sizes the outputs on the host, then ATen's CPU kernel runs as one task on the current stream"};
    case OpRoute::kHandWritten:
      return {"hand_written", "a kernel written for npu in csrc/ (registered by a TORCH_LIBRARY_IMPL block there)"};
    case OpRoute::kPolicyTable:
      return {"policy_table",
              "the boxed asynchronous kernel: a row of csrc/launch/op_policy.cpp's table says how its outputs are "
              "shaped, so the host allocates them and ATen's CPU kernel runs as a task on the current stream"};
    case OpRoute::kSyncNative:
      return {"sync_native",
              "no npu kernel of its own and outputs whose shape needs the input values: ATen's CPU kernel runs on "
              "the npu memory after the current stream drains (the call waits, as a device-to-host sync would)"};
    case OpRoute::kPythonComposite:
      return {"python_composite",
              "an npu fused op defined in torch_npu/op_plugin as ATen ops (CompositeImplicitAutograd): each of "
              "those takes its own route, and autograd differentiates through them"};
    case OpRoute::kAscendSemantics:
      return {"ascend_semantics",
              "its behaviour on Ascend differs from CPU's, so torch_npu/_ascend_semantics.py registers its npu "
              "kernel in Python"};
  }
  return {"unknown", ""};
}

}  // namespace

void note_op_route(const std::string& op, OpRoute route) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.routes[full_name(op)] = route;
}

void note_hand_written_routes() {
  auto& dispatcher = c10::Dispatcher::singleton();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    auto handle = dispatcher.findOp(name);
    if (!handle.has_value() || !handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    r.routes.emplace(c10::toString(name), OpRoute::kHandWritten);  // keeps a route already noted
  }
}

OpRouteAnswer op_route(const std::string& op) {
  const c10::OperatorName name = parse_name(op);
  auto handle = c10::Dispatcher::singleton().findOp(name);
  TORCH_CHECK_VALUE(handle.has_value(), "unknown operator '", op, "': give it as 'namespace::name' or ",
                    "'namespace::name.overload', e.g. 'aten::add.Tensor' (torch.ops.aten.add.Tensor)");
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.routes.find(c10::toString(name));
    if (it != r.routes.end()) return describe(it->second);
  }
  const bool wrapped = strict_mode_wraps(*handle);
  if (handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) && !wrapped) {
    return {"registered_later",
            "its npu (PrivateUse1) kernel was registered after torch_npu was imported (torch.library or a C++ "
            "extension)"};
  }
  const std::string strict =
      wrapped ? " Strict mode wraps it: real torch_npu has a kernel of its own, so the ops it decomposes into are "
                "not reported as falling back."
              : "";
  if (handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
    return {"composite",
            "ATen decomposes it (CompositeImplicitAutograd) into other ops, each taking its own route." + strict};
  }
  if (handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
      handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
    return {"composite",
            "ATen's backend-generic kernel (CompositeExplicitAutograd) runs on npu tensors, calling other ops, "
            "each taking its own route." + strict};
  }
  if (handle->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
    return {"cpu_fallback",
            "no npu kernel: the CPU fallback copies the inputs to the host, runs ATen's CPU kernel and copies the "
            "results back, waiting for the stream (torch.npu.set_option('enable_debug', True) reports each call)"};
  }
  return {"none", "no kernel for npu or for CPU: calling it on npu tensors raises NotImplementedError"};
}

}  // namespace torch_npu
