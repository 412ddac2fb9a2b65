// at_npu::native::OpCommand (OpCommand.h): RunOpApi queues an extension's
// work as one kernel task on the current stream; the operator builder has
// no CANN operator library to run on and says so.
#include <mutex>
#include <set>
#include <string>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_stream.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include <vnpu/stream.h>

namespace at_npu {
namespace native {

void OpCommand::Run() {
  if (custom_handler_) {
    RunOpApi(name_.empty() ? std::string("CustomHandler") : name_, custom_handler_);
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
