// NNAL's Ascend Transformer Boost (ATB) C++ API on the virtual NPU: the
// context, Utils, and what every operation shares (atb_operation.h). The
// operations themselves are in atb_linear.cpp, atb_norm.cpp and
// atb_activation.cpp.
#include <string>

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include "atb/context.h"
#include "atb/utils.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"
#include "csrc/opapi/atb_operation.h"

namespace atb {
namespace {

class StreamContext : public Context {
 public:
  Status SetExecuteStream(aclrtStream stream) override {
    stream_ = stream;
    return NO_ERROR;
  }
  aclrtStream GetExecuteStream() const override { return stream_; }

 private:
  aclrtStream stream_ = nullptr;  // NULL: the current device's default stream
};

int64_t numel_of(const TensorDesc& desc) {
  int64_t n = 1;
  for (uint64_t i = 0; i < desc.shape.dimNum && i < MAX_DIM; ++i) n *= desc.shape.dims[i];
  return n;
}

}  // namespace

namespace vnpu {

c10::ScalarType scalar_type(const Tensor& tensor) { return torch_npu::aclnn::scalar_type_of(tensor.desc.dtype); }

at::Tensor host_view(const char* what, const Tensor& tensor) {
  TORCH_CHECK(tensor.desc.shape.dimNum <= MAX_DIM, what, " has ", tensor.desc.shape.dimNum, " dims, more than ",
              MAX_DIM, ".");
  const c10::ScalarType type = scalar_type(tensor);
  std::vector<int64_t> sizes(tensor.desc.shape.dims, tensor.desc.shape.dims + tensor.desc.shape.dimNum);
  const int64_t numel = numel_of(tensor.desc);
  TORCH_CHECK(numel == 0 || tensor.deviceData != nullptr, what, " has no deviceData.");
  TORCH_CHECK(tensor.dataSize == 0 || tensor.dataSize >= static_cast<uint64_t>(numel) * c10::elementSize(type), what,
              ": dataSize ", tensor.dataSize, " is smaller than its ", numel, " elements.");
  return at::from_blob(tensor.deviceData, sizes, at::TensorOptions().dtype(type));
}

Status EmulatedOperation::Setup(const VariantPack& pack, uint64_t& workspaceSize, Context* context) {
  workspaceSize = 0;
  try {
    prepare(pack);
    return NO_ERROR;
  } catch (const c10::Error& e) {
    report(std::string("Setup failed: ") + e.what_without_backtrace());
    return ERROR_INVALID_PARAM;
  }
}

Status EmulatedOperation::Execute(const VariantPack& pack, uint8_t* workspace, uint64_t workspaceSize,
                                  Context* context) {
  std::function<void()> run;
  try {
    run = prepare(pack);
  } catch (const c10::Error& e) {
    report(std::string("Execute failed: ") + e.what_without_backtrace());
    return ERROR_INVALID_PARAM;
  }
  auto* executor = new aclOpExecutor{name_, std::move(run)};
  const aclnnStatus status =
      torch_npu::aclnn::launch(name_, executor, context == nullptr ? nullptr : context->GetExecuteStream());
  return status == ACLNN_SUCCESS ? NO_ERROR : ERROR_RT_FAIL;
}

void EmulatedOperation::check_counts(const VariantPack& pack, const char* inputs) const {
  TORCH_CHECK(pack.inTensors.size() == GetInputNum(), "expected ", GetInputNum(), " inputs (", inputs, "), got ",
              pack.inTensors.size(), ".");
  TORCH_CHECK(pack.outTensors.size() == GetOutputNum(), "expected ", GetOutputNum(), " output",
              GetOutputNum() == 1 ? "" : "s", ", got ", pack.outTensors.size(), ".");
}

void EmulatedOperation::report(const std::string& message) const {
  aclAppLog(ACL_ERROR, name_, "atb_context.cpp", __LINE__, "[ATB] %s %s", name_, message.c_str());
}

}  // namespace vnpu

Status CreateContext(Context** context) {
  if (context == nullptr) return ERROR_INVALID_PARAM;
  *context = new StreamContext();
  return NO_ERROR;
}

Status DestroyContext(Context* context) {
  delete context;
  return NO_ERROR;
}

Status DestroyOperation(Operation* operation) {
  delete operation;
  return NO_ERROR;
}

uint64_t Utils::GetTensorSize(const Tensor& tensor) { return GetTensorSize(tensor.desc); }

uint64_t Utils::GetTensorSize(const TensorDesc& desc) {
  if (desc.dtype == ACL_DT_UNDEFINED) return 0;
  try {
    return static_cast<uint64_t>(numel_of(desc)) * c10::elementSize(torch_npu::aclnn::scalar_type_of(desc.dtype));
  } catch (const c10::Error&) {
    return 0;
  }
}

int64_t Utils::GetTensorNumel(const Tensor& tensor) { return numel_of(tensor.desc); }
int64_t Utils::GetTensorNumel(const TensorDesc& desc) { return numel_of(desc); }

}  // namespace atb
