// at_npu::native::OpCommand: how torch_npu's operators reach the device.
//
// RunOpApi(name, fn) is what extensions use to put their own work on the
// device's task queue: vNPU queues fn as one kernel task on the current
// stream of the current device, so it runs after the work queued before it
// and before the work queued after it, asynchronously to the caller
// (sync=true waits for it). fn returns 0 on success; a nonzero status, or an
// exception, is reported like a failing kernel: by the next synchronizing
// call, as "<name> failed ...", and the stream stays usable. Tensors fn uses
// must outlive it: capture them by value in the lambda.
//
// The builder (Name/Input/Output/Attr/Run) describes a CANN operator by name
// for ACL's operator library (aclop), which vNPU does not have: the builder
// records what it is given (the tensors stay alive with the command), and
// Run() raises "not supported on vNPU" naming the operator. With a custom
// handler (SetCustomHandler, how EXEC_NPU_CMD-style code queues its aclnn
// calls), Run() queues the handler as RunOpApi(name, handler) does, and
// waits for it after Sync().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Optional.h>
#include <c10/util/SmallVector.h>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/framework/utils/NPUDefinition.h"
#include "torch_npu/csrc/framework/utils/NpuUtils.h"

namespace at_npu {
namespace native {

using PROC_FUNC = std::function<int()>;

// The dtype and shape the operator's inputs are promoted to (Expect).
struct UnifiedResult {
  c10::optional<at::ScalarType> common_type = c10::nullopt;
  c10::optional<c10::IntArrayRef> common_shape = c10::nullopt;
  bool result_type_defined = false;
};

class TORCH_NPU_API OpCommand {
 public:
  OpCommand() = default;
  ~OpCommand() {}
  OpCommand(const OpCommand& other) = delete;
  OpCommand(OpCommand&& other) = delete;
  OpCommand& operator=(const OpCommand&) = delete;
  OpCommand& operator=(OpCommand&&) = delete;

  OpCommand& Name(const string& name);
  OpCommand& SetCustomHandler(PROC_FUNC func);
  OpCommand& DynamicInputReg(DynamicInputRegFunc func, DyNumAndIndex num_and_index);
  OpCommand& Expect(UnifiedResult unified_result);
  // An omitted optional input.
  OpCommand& Input();
  OpCommand& Input(const at::Tensor& input, const string& descName = "",
                   const c10::optional<aclFormat>& sensitive_format = c10::nullopt, const string& realData = "");
  OpCommand& InputWithoutContiguous(const at::Tensor& input, const string& descName = "", const string& realData = "");
  // Host values as a tensor input of shape realShape, cast to toType.
  template <typename T>
  OpCommand& Input(const c10::ArrayRef<T>& dimListRef, at::IntArrayRef realShape, at::ScalarType toType,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = "",
                   const string& descName = "") {
    return AddHostInput(HostTensor(dimListRef.data(), dimListRef.size(), c10::CppTypeToScalarType<T>::value,
                                   realShape, toType));
  }
  OpCommand& Input(const c10::IntArrayRef& dimListRef, at::ScalarType toType = at::kLong,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = "",
                   const string& descName = "");
  OpCommand& Input(const c10::ArrayRef<double>& dimListRef, at::IntArrayRef realShape,
                   at::ScalarType toType = at::kDouble,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = "");
  OpCommand& Input(const c10::Scalar& input, const at::ScalarType type,
                   CompileType compileType = CompileType::MEMORY_HOST_COMPILE_INDEPENDENT);
  OpCommand& Inputs(const at::TensorList& inputs);
  OpCommand& InputScalarToNPUTensor(const c10::Scalar& input, const at::ScalarType type);
  OpCommand& Output(at::Tensor& output, const string& descName = "",
                    const c10::optional<aclFormat>& sensitive_format = c10::nullopt, const string& realType = "");
  // Operator attributes: recorded by name (an aclop would take them).
  template <typename dataType>
  OpCommand& Attr(const string& name, dataType value) {
    attr_names_.push_back(name);
    return *this;
  }
  template <typename dataType>
  OpCommand& Attr(const string& name, dataType value, bool cond) {
    if (!cond) {
      return *this;
    }
    return Attr(name, value);
  }
  // Queues the custom handler; without one, raises: CANN's operator library
  // does not exist on vNPU.
  void Run();
  // Run() waits for the operator (the outputs at sync_index: all of them).
  OpCommand& Sync(c10::SmallVector<int64_t, N>& sync_index);
  OpCommand& Sync();

  static void RunOpApi(const std::string& op_name, PROC_FUNC func, bool sync = false);
  static void RunOpApiV2(const std::string& op_name, const PROC_FUNC& func, bool sync = false);

 private:
  // A CPU tensor of `count` values of `type` at `data`, shaped `shape`, cast to `to_type`.
  static at::Tensor HostTensor(const void* data, size_t count, at::ScalarType type, at::IntArrayRef shape,
                               at::ScalarType to_type);
  OpCommand& AddHostInput(at::Tensor host_tensor);

  std::string name_;
  std::vector<at::Tensor> inputs_;   // undefined for an omitted input; host inputs on the CPU
  std::vector<at::Tensor> outputs_;
  std::vector<std::string> attr_names_;
  PROC_FUNC custom_handler_;
  bool sync_ = false;
};

}  // namespace native
}  // namespace at_npu
