// NNAL's Ascend Transformer Boost (ATB) C++ API on the virtual NPU: the
// context, Utils, and the operations vNPU has (infer::LinearParam). An
// operation runs like an aclnn operator (aclnn_executor.h): Setup checks,
// Execute runs in stream order on the context's stream, inline when called
// from a task of a stream (MindSpeed's RunAtbCmd custom handler), else
// queued. Math by ATen's CPU kernels on views of the device memory.
#include <string>

#include <ATen/TensorOperators.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/matmul.h>
#include <c10/util/Exception.h>

#include "atb/context.h"
#include "atb/infer_op_params.h"
#include "atb/operation.h"
#include "atb/utils.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

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

// A CPU tensor viewing an ATB tensor's device memory (contiguous, ND).
at::Tensor host_view(const char* what, const Tensor& tensor) {
  TORCH_CHECK(tensor.desc.shape.dimNum <= MAX_DIM, what, " has ", tensor.desc.shape.dimNum, " dims, more than ",
              MAX_DIM, ".");
  const c10::ScalarType type = torch_npu::aclnn::scalar_type_of(tensor.desc.dtype);
  std::vector<int64_t> sizes(tensor.desc.shape.dims, tensor.desc.shape.dims + tensor.desc.shape.dimNum);
  const int64_t numel = numel_of(tensor.desc);
  TORCH_CHECK(numel == 0 || tensor.deviceData != nullptr, what, " has no deviceData.");
  TORCH_CHECK(tensor.dataSize == 0 || tensor.dataSize >= static_cast<uint64_t>(numel) * c10::elementSize(type), what,
              ": dataSize ", tensor.dataSize, " is smaller than its ", numel, " elements.");
  return at::from_blob(tensor.deviceData, sizes, at::TensorOptions().dtype(type));
}

// The common part of vNPU's ATB operations: a name, input and output counts,
// and `prepare`, which checks a variant pack and returns the closure to run.
class EmulatedOperation : public Operation {
 public:
  Status Setup(const VariantPack& pack, uint64_t& workspaceSize, Context* context) override {
    workspaceSize = 0;
    try {
      prepare(pack);
      return NO_ERROR;
    } catch (const c10::Error& e) {
      report(std::string("Setup failed: ") + e.what_without_backtrace());
      return ERROR_INVALID_PARAM;
    }
  }

  Status Execute(const VariantPack& pack, uint8_t* workspace, uint64_t workspaceSize, Context* context) override {
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

 protected:
  explicit EmulatedOperation(const char* name) : name_(name) {}
  virtual std::function<void()> prepare(const VariantPack& pack) const = 0;
  // ATB reports through its log, not a status message: an error line on
  // stderr (ASCEND_GLOBAL_LOG_LEVEL <= 3, the default).
  void report(const std::string& message) const {
    aclAppLog(ACL_ERROR, name_, "atb_operations.cpp", __LINE__, "[ATB] %s %s", name_, message.c_str());
  }
  const char* name_;
};

// infer::LinearParam (infer_op_params.h).
class LinearOperation : public EmulatedOperation {
 public:
  explicit LinearOperation(const infer::LinearParam& param) : EmulatedOperation("LinearOperation"), param_(param) {}

  std::string GetName() const override { return name_; }
  uint32_t GetInputNum() const override { return 2 + (param_.hasBias ? 1 : 0) + (param_.enAccum ? 1 : 0); }
  uint32_t GetOutputNum() const override { return 1; }

  Status InferShape(const SVector<TensorDesc>& in, SVector<TensorDesc>& out) const override {
    if (in.size() != GetInputNum()) return ERROR_INVALID_TENSOR_NUM;
    const Dims& a = in[0].shape;
    const Dims& b = in[1].shape;
    if (a.dimNum != 2 || b.dimNum != 2) return ERROR_INVALID_TENSOR_DIM;
    TensorDesc result = param_.enAccum ? in[GetInputNum() - 1] : in[0];
    result.shape.dimNum = 2;
    result.shape.dims[0] = param_.transposeA ? a.dims[1] : a.dims[0];
    result.shape.dims[1] = param_.transposeB ? b.dims[0] : b.dims[1];
    if (param_.outDataType != ACL_DT_UNDEFINED) result.dtype = param_.outDataType;
    out.clear();
    out.push_back(result);
    return NO_ERROR;
  }

 protected:
  std::function<void()> prepare(const VariantPack& pack) const override {
    TORCH_CHECK(pack.inTensors.size() == GetInputNum(), "expected ", GetInputNum(),
                " inputs (x, weight", param_.hasBias ? ", bias" : "", param_.enAccum ? ", accum" : "", "), got ",
                pack.inTensors.size(), ".");
    TORCH_CHECK(pack.outTensors.size() == 1, "expected 1 output, got ", pack.outTensors.size(), ".");
    at::Tensor x = host_view("x", pack.inTensors[0]), w = host_view("weight", pack.inTensors[1]);
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "x and weight must be 2-d, got ", x.dim(), " and ", w.dim(), " dims.");
    at::Tensor a = param_.transposeA ? x.t() : x, b = param_.transposeB ? w.t() : w;
    TORCH_CHECK(a.size(1) == b.size(0), "op(x) ", a.sizes(), " and op(weight) ", b.sizes(), " do not multiply.");
    at::Tensor bias = param_.hasBias ? host_view("bias", pack.inTensors[2]) : at::Tensor();
    at::Tensor accum = param_.enAccum ? host_view("accum", pack.inTensors[GetInputNum() - 1]) : at::Tensor();
    at::Tensor out = host_view("out", pack.outTensors[0]);
    TORCH_CHECK(out.dim() == 2 && out.size(0) == a.size(0) && out.size(1) == b.size(1), "out must be [", a.size(0),
                ", ", b.size(1), "], got ", out.sizes(), ".");
    TORCH_CHECK(!accum.defined() || accum.sizes() == out.sizes(), "accum must have out's shape ", out.sizes(), ".");
    return [a, b, bias, accum, out]() mutable {
      at::Tensor result = at::matmul(a.to(at::kFloat), b.to(at::kFloat));
      if (bias.defined()) result = result + bias.to(at::kFloat);
      if (accum.defined()) result = result + accum.to(at::kFloat);
      out.copy_(result);
    };
  }

 private:
  infer::LinearParam param_;
};

}  // namespace

Status CreateContext(Context** context) {
  if (context == nullptr) return ERROR_INVALID_PARAM;
  *context = new StreamContext();
  return NO_ERROR;
}

Status DestroyContext(Context* context) {
  delete context;
  return NO_ERROR;
}

// Explicit specializations do not take the primary template's visibility.
template <>
__attribute__((visibility("default"))) Status CreateOperation(const infer::LinearParam& opParam,
                                                               Operation** operation) {
  if (operation == nullptr) return ERROR_INVALID_PARAM;
  *operation = new LinearOperation(opParam);
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
