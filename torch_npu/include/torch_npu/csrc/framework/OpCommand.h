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
// The builder (Name/Input/Output/Attr/Run) compiles and runs CANN operators
// by name through ACL's operator library, which vNPU does not have: Run()
// raises "not supported on vNPU" naming the operator. With a custom handler
// (SetCustomHandler, how EXEC_NPU_CMD-style code queues its aclnn calls),
// Run() queues the handler as RunOpApi(name, handler) does.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace at_npu {
namespace native {

using PROC_FUNC = std::function<int()>;

class TORCH_NPU_API OpCommand {
 public:
  OpCommand() = default;

  OpCommand& Name(const std::string& name) {
    name_ = name;
    return *this;
  }
  OpCommand& Input() { return *this; }
  OpCommand& Input(const at::Tensor& input, const std::string& descName = "", const std::string& realData = "") {
    inputs_.push_back(input);
    return *this;
  }
  OpCommand& Input(const c10::Scalar& input, const at::ScalarType type) { return *this; }
  OpCommand& Output(at::Tensor& output, const std::string& descName = "", const std::string& realType = "") {
    outputs_.push_back(output);
    return *this;
  }
  template <typename T>
  OpCommand& Attr(const std::string& name, T value) {
    return *this;
  }
  template <typename T>
  OpCommand& Attr(const std::string& name, T value, bool cond) {
    return *this;
  }
  OpCommand& SetCustomHandler(PROC_FUNC func) {
    custom_handler_ = std::move(func);
    return *this;
  }
  // Queues the custom handler; without one, raises: CANN's operator library
  // does not exist on vNPU.
  void Run();

  static void RunOpApi(const std::string& op_name, PROC_FUNC func, bool sync = false);
  static void RunOpApiV2(const std::string& op_name, const PROC_FUNC& func, bool sync = false);

 private:
  std::string name_;
  std::vector<at::Tensor> inputs_;
  std::vector<at::Tensor> outputs_;
  PROC_FUNC custom_handler_;
};

}  // namespace native
}  // namespace at_npu
