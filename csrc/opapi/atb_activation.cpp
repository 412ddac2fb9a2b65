// ATB's activations on the virtual NPU: infer::ActivationParam, including
// the SwiGLU forward and backward of MindSpeed's ATB swiglu op, with the
// math of torch_npu.npu_swiglu (silu of x's first half times its second).
// Computed in float32, written in the output's dtype.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/log.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <c10/util/Exception.h>

#include "atb/infer_op_params.h"
#include "csrc/opapi/atb_operation.h"

namespace atb {
namespace vnpu {
namespace {

using infer::ActivationType;

const char* activation_name(ActivationType type) {
  switch (type) {
    case infer::ACTIVATION_RELU: return "RELU";
    case infer::ACTIVATION_GELU: return "GELU";
    case infer::ACTIVATION_FAST_GELU: return "FAST_GELU";
    case infer::ACTIVATION_SWISH: return "SWISH";
    case infer::ACTIVATION_LOG: return "LOG";
    case infer::ACTIVATION_SWIGLU_FORWARD: return "SWIGLU_FORWARD";
    case infer::ACTIVATION_SWIGLU_BACKWARD: return "SWIGLU_BACKWARD";
    case infer::ACTIVATION_SIGMOID: return "SIGMOID";
    case infer::ACTIVATION_FASTER_GELU_FORWARD: return "FASTER_GELU_FORWARD";
    default: return nullptr;
  }
}

class ActivationOperation : public EmulatedOperation {
 public:
  explicit ActivationOperation(const infer::ActivationParam& param)
      : EmulatedOperation("ActivationOperation"), param_(param) {}

  uint32_t GetInputNum() const override { return backward() ? 2 : 1; }
  uint32_t GetOutputNum() const override { return 1; }

  Status InferShape(const SVector<TensorDesc>& in, SVector<TensorDesc>& out) const override {
    if (in.size() != GetInputNum()) return ERROR_INVALID_TENSOR_NUM;
    TensorDesc result = backward() ? in[1] : in[0];
    if (param_.activationType == infer::ACTIVATION_SWIGLU_FORWARD) {
      const int64_t rank = static_cast<int64_t>(result.shape.dimNum);
      const int64_t dim = param_.dim < 0 ? param_.dim + rank : param_.dim;
      if (dim < 0 || dim >= rank) return ERROR_INVALID_PARAM;
      result.shape.dims[dim] /= 2;
    }
    out.clear();
    out.push_back(result);
    return NO_ERROR;
  }

 protected:
  std::function<void()> prepare(const VariantPack& pack) const override {
    const ActivationType type = param_.activationType;
    TORCH_CHECK(activation_name(type) != nullptr, "activationType ", static_cast<int>(type),
                " is not an activation (ACTIVATION_RELU .. ACTIVATION_FASTER_GELU_FORWARD).");
    check_counts(pack, backward() ? "dy, x" : "x");
    at::Tensor x = host_view("x", pack.inTensors[backward() ? 1 : 0]);
    TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16,
                "x must be float32, float16 or bfloat16, got ", x.scalar_type(), ".");
    at::Tensor out = host_view("out", pack.outTensors[0]);
    at::Tensor dy = backward() ? host_view("dy", pack.inTensors[0]) : at::Tensor();
    if (type == infer::ACTIVATION_SWIGLU_FORWARD || type == infer::ACTIVATION_SWIGLU_BACKWARD) {
      TORCH_CHECK(x.dim() >= 1, "x must have at least 1 dim.");
      const int64_t dim = param_.dim < 0 ? param_.dim + x.dim() : param_.dim;
      TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim ", param_.dim, " is out of range for x of ", x.dim(), " dims.");
      TORCH_CHECK(x.size(dim) % 2 == 0, "x's size ", x.size(dim), " along dim ", param_.dim,
                  " must be even (SwiGLU splits it in halves).");
      std::vector<int64_t> half(x.sizes().begin(), x.sizes().end());
      half[dim] /= 2;
      if (type == infer::ACTIVATION_SWIGLU_FORWARD) {
        TORCH_CHECK(out.sizes() == at::IntArrayRef(half), "out must be ", at::IntArrayRef(half), ", got ",
                    out.sizes(), ".");
        return [x, out, dim]() mutable {
          at::Tensor xf = x.to(at::kFloat);
          const int64_t h = xf.size(dim) / 2;
          out.copy_(at::silu(xf.narrow(dim, 0, h)) * xf.narrow(dim, h, h));
        };
      }
      TORCH_CHECK(dy.sizes() == at::IntArrayRef(half), "dy must be ", at::IntArrayRef(half), ", got ", dy.sizes(),
                  ".");
      TORCH_CHECK(out.sizes() == x.sizes(), "out must have x's shape ", x.sizes(), ", got ", out.sizes(), ".");
      return [dy, x, out, dim]() mutable {
        at::Tensor xf = x.to(at::kFloat), g = dy.to(at::kFloat);
        const int64_t h = xf.size(dim) / 2;
        at::Tensor a = xf.narrow(dim, 0, h), b = xf.narrow(dim, h, h);
        at::Tensor s = at::sigmoid(a);
        // d silu(a) / da = s * (1 + a * (1 - s)).
        out.copy_(at::cat({g * b * s * (1 + a * (1 - s)), g * a * s}, dim));
      };
    }
    TORCH_CHECK(out.sizes() == x.sizes(), "out must have x's shape ", x.sizes(), ", got ", out.sizes(), ".");
    const float scale = param_.scale;
    const bool tanh_gelu = param_.geluMode == infer::ActivationParam::TANH_MODE;
    return [x, out, type, scale, tanh_gelu]() mutable {
      at::Tensor xf = x.to(at::kFloat);
      switch (type) {
        case infer::ACTIVATION_RELU: out.copy_(at::relu(xf)); break;
        case infer::ACTIVATION_GELU: out.copy_(at::gelu(xf, tanh_gelu ? "tanh" : "none")); break;
        case infer::ACTIVATION_FAST_GELU:
        case infer::ACTIVATION_FASTER_GELU_FORWARD: out.copy_(xf * at::sigmoid(1.702 * xf)); break;
        case infer::ACTIVATION_SWISH: out.copy_(xf * at::sigmoid(scale * xf)); break;
        case infer::ACTIVATION_LOG: out.copy_(at::log(xf)); break;
        case infer::ACTIVATION_SIGMOID: out.copy_(at::sigmoid(xf)); break;
        default: TORCH_CHECK(false, "unreachable activation type ", static_cast<int>(type));
      }
    };
  }

 private:
  bool backward() const { return param_.activationType == infer::ACTIVATION_SWIGLU_BACKWARD; }

  infer::ActivationParam param_;
};

}  // namespace
}  // namespace vnpu

template <>
__attribute__((visibility("default"))) Status CreateOperation(const infer::ActivationParam& opParam,
                                                               Operation** operation) {
  return vnpu::create<vnpu::ActivationOperation>(opParam, operation);
}

}  // namespace atb
