// at_npu::native::OpCommand (OpCommand.h): RunOpApi queues an extension's
// work as one kernel task on the current stream; the operator builder has
// no CANN operator library to run on and says so.
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include <vnpu/stream.h>

namespace at_npu {
namespace native {

OpCommand& OpCommand::Name(const string& name) {
  name_ = name;
  return *this;
}

OpCommand& OpCommand::SetCustomHandler(PROC_FUNC func) {
  custom_handler_ = std::move(func);
  return *this;
}

// What only an aclop's compilation reads: nothing on vNPU runs it.
OpCommand& OpCommand::DynamicInputReg(DynamicInputRegFunc func, DyNumAndIndex num_and_index) { return *this; }
OpCommand& OpCommand::Expect(UnifiedResult unified_result) { return *this; }

OpCommand& OpCommand::Input() {
  inputs_.emplace_back();
  return *this;
}

OpCommand& OpCommand::Input(const at::Tensor& input, const string& descName,
                            const c10::optional<aclFormat>& sensitive_format, const string& realData) {
  inputs_.push_back(input);
  return *this;
}

OpCommand& OpCommand::InputWithoutContiguous(const at::Tensor& input, const string& descName,
                                             const string& realData) {
  inputs_.push_back(input);
  return *this;
}

at::Tensor OpCommand::HostTensor(const void* data, size_t count, at::ScalarType type, at::IntArrayRef shape,
                                 at::ScalarType to_type) {
  // A copy: the caller's array need not outlive the command.
  at::Tensor values = at::empty({static_cast<int64_t>(count)}, at::TensorOptions().dtype(type));
  if (count > 0) std::memcpy(values.data_ptr(), data, count * values.element_size());
  return values.reshape(shape).to(to_type);
}

OpCommand& OpCommand::AddHostInput(at::Tensor host_tensor) {
  inputs_.push_back(std::move(host_tensor));
  return *this;
}

OpCommand& OpCommand::Input(const c10::IntArrayRef& dimListRef, at::ScalarType toType, CompileType compileType,
                            const string& realDtype, const string& descName) {
  return AddHostInput(HostTensor(dimListRef.data(), dimListRef.size(), at::kLong,
                                 {static_cast<int64_t>(dimListRef.size())}, toType));
}

OpCommand& OpCommand::Input(const c10::ArrayRef<double>& dimListRef, at::IntArrayRef realShape,
                            at::ScalarType toType, CompileType compileType, const string& realDtype) {
  return AddHostInput(HostTensor(dimListRef.data(), dimListRef.size(), at::kDouble, realShape, toType));
}

OpCommand& OpCommand::Input(const c10::Scalar& input, const at::ScalarType type, CompileType compileType) {
  return AddHostInput(at::scalar_tensor(input, at::TensorOptions().dtype(type)));
}

OpCommand& OpCommand::Inputs(const at::TensorList& inputs) {
  inputs_.insert(inputs_.end(), inputs.begin(), inputs.end());
  return *this;
}

OpCommand& OpCommand::InputScalarToNPUTensor(const c10::Scalar& input, const at::ScalarType type) {
  inputs_.push_back(at::scalar_tensor(input, at::TensorOptions().dtype(type))
                        .to(c10::Device(c10::DeviceType::PrivateUse1, torch_npu::current_device())));
  return *this;
}

OpCommand& OpCommand::Output(at::Tensor& output, const string& descName,
                             const c10::optional<aclFormat>& sensitive_format, const string& realType) {
  outputs_.push_back(output);
  return *this;
}

OpCommand& OpCommand::Sync(c10::SmallVector<int64_t, N>& sync_index) {
  sync_ = true;
  return *this;
}

OpCommand& OpCommand::Sync() {
  sync_ = true;
  return *this;
}

void OpCommand::Run() {
  if (custom_handler_) {
    RunOpApi(name_.empty() ? std::string("CustomHandler") : name_, custom_handler_, sync_);
    return;
  }
  TORCH_CHECK(false, "OpCommand::Run(", name_.empty() ? std::string("<unnamed>") : name_,
              "): running CANN operators by name (aclopCompileAndExecute) is not supported on vNPU, which has no "
              "CANN operator library; implement the operator with ATen calls or OpCommand::RunOpApi",
              torch_npu::error_suffix(torch_npu::SubModule::kOPS, torch_npu::ErrCode::kNotSupport));
}

void OpCommand::RunOpApi(const std::string& op_name, PROC_FUNC func, bool sync) {
  TORCH_CHECK(func, "OpCommand::RunOpApi(", op_name, "): the function is empty",
              torch_npu::error_suffix(torch_npu::SubModule::kOPS, torch_npu::ErrCode::kParam));
  const c10::DeviceIndex device = torch_npu::current_device();
  vnpu::Stream& stream = torch_npu::current_runtime_stream(device);
  // The task names itself in traces and errors by this string, which must
  // outlive it: keep one copy per distinct name.
  static std::mutex names_mutex;
  static auto* names = new std::set<std::string>();
  const char* name;
  {
    std::lock_guard<std::mutex> lock(names_mutex);
    name = names->insert(op_name).first->c_str();
  }
  torch_npu::with_torch_errors([&] {
    stream.enqueue(vnpu::TaskKind::kKernel, name, [func = std::move(func), name] {
      const int status = func();
      if (status != 0) {
        throw vnpu::Error(vnpu::ErrorCode::kKernelFailed,
                          std::string(name) + " failed: its function returned " + std::to_string(status));
      }
    });
  });
  if (sync) torch_npu::synchronize_stream(torch_npu::current_stream(device));
}

void OpCommand::RunOpApiV2(const std::string& op_name, const PROC_FUNC& func, bool sync) {
  RunOpApi(op_name, func, sync);
}

}  // namespace native
}  // namespace at_npu
