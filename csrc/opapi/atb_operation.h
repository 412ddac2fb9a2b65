// What vNPU's ATB operations share (docs/aclnn.md, "NNAL's ATB"): a CPU
// view of an atb::Tensor's device memory, and EmulatedOperation, which runs
// an operation like an aclnn operator (aclnn_executor.h): Setup checks the
// variant pack, Execute runs the closure `prepare` returns in stream order
// on the context's stream, inline when called from a task of a stream
// (MindSpeed's RunAtbCmd custom handler), else queued on it.
#pragma once

#include <functional>
#include <string>

#include <ATen/core/Tensor.h>

#include "atb/operation.h"

namespace atb {
namespace vnpu {

// A CPU tensor viewing an ATB tensor's device memory (contiguous, ND).
// `what` names the tensor in errors (c10::Error).
at::Tensor host_view(const char* what, const Tensor& tensor);

// The ScalarType of an ATB tensor.
c10::ScalarType scalar_type(const Tensor& tensor);

class EmulatedOperation : public Operation {
 public:
  std::string GetName() const override { return name_; }
  Status Setup(const VariantPack& pack, uint64_t& workspaceSize, Context* context) override;
  Status Execute(const VariantPack& pack, uint8_t* workspace, uint64_t workspaceSize, Context* context) override;

 protected:
  explicit EmulatedOperation(const char* name) : name_(name) {}
  // Checks the pack (TORCH_CHECK, whose message Setup and Execute report)
  // and returns the closure that computes the outputs.
  virtual std::function<void()> prepare(const VariantPack& pack) const = 0;
  // Checks the pack's tensor counts against GetInputNum / GetOutputNum;
  // `inputs` lists their names for the message.
  void check_counts(const VariantPack& pack, const char* inputs) const;
  // ATB reports through its log, not a status message: an error line on
  // stderr (ASCEND_GLOBAL_LOG_LEVEL <= 3, the default).
  void report(const std::string& message) const;

  const char* name_;
};

// The body of each CreateOperation specialization: a new `Emulated` for
// `param`.
template <typename Emulated, typename Param>
Status create(const Param& param, Operation** operation) {
  if (operation == nullptr) return ERROR_INVALID_PARAM;
  *operation = new Emulated(param);
  return NO_ERROR;
}

}  // namespace vnpu
}  // namespace atb
