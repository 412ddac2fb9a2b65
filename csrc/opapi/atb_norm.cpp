// ATB's RMS normalisation on the virtual NPU: infer::RmsNormParam (NORM)
// and train::RmsNormBackwardParam, as MindSpeed's ATB rms_norm op drives
// them. The normalised dims are the last gamma.dim() dims of x; float32
// math, outputs in their own dtypes.
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sum.h>
#include <c10/util/Exception.h>

#include "atb/infer_op_params.h"
#include "atb/train_op_params.h"
#include "csrc/opapi/atb_operation.h"

namespace atb {
namespace vnpu {
namespace {

// The trailing dims of x that gamma covers, after checking it does.
std::vector<int64_t> norm_dims(const at::Tensor& x, const at::Tensor& gamma) {
  TORCH_CHECK(gamma.dim() >= 1 && gamma.dim() <= x.dim(), "gamma ", gamma.sizes(),
              " must have 1 to x's ", x.dim(), " dims.");
  const int64_t lead = x.dim() - gamma.dim();
  TORCH_CHECK(x.sizes().slice(lead) == gamma.sizes(), "gamma ", gamma.sizes(), " must equal the last dims of x ",
              x.sizes(), ".");
  std::vector<int64_t> dims;
  for (int64_t i = lead; i < x.dim(); ++i) dims.push_back(i);
  return dims;
}

// rstd's shape: x's leading dims, then 1 for each normalised dim.
std::vector<int64_t> rstd_shape(const at::Tensor& x, const at::Tensor& gamma) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  for (int64_t i = x.dim() - gamma.dim(); i < x.dim(); ++i) shape[i] = 1;
  return shape;
}

void check_floating(const char* what, const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16,
              what, " must be float32, float16 or bfloat16, got ", t.scalar_type(), ".");
}

class RmsNormOperation : public EmulatedOperation {
 public:
  explicit RmsNormOperation(const infer::RmsNormParam& param) : EmulatedOperation("RmsNormOperation"), param_(param) {}

  uint32_t GetInputNum() const override { return 2; }
  uint32_t GetOutputNum() const override { return param_.normParam.rstd ? 2 : 1; }

  Status InferShape(const SVector<TensorDesc>& in, SVector<TensorDesc>& out) const override {
    if (in.size() != GetInputNum()) return ERROR_INVALID_TENSOR_NUM;
    const Dims& x = in[0].shape;
    const Dims& gamma = in[1].shape;
    if (gamma.dimNum < 1 || gamma.dimNum > x.dimNum) return ERROR_INVALID_TENSOR_DIM;
    out.clear();
    out.push_back(in[0]);
    if (param_.normParam.rstd) {
      TensorDesc rstd = in[0];
      rstd.dtype = ACL_FLOAT;
      for (uint64_t i = x.dimNum - gamma.dimNum; i < x.dimNum; ++i) rstd.shape.dims[i] = 1;
      out.push_back(rstd);
    }
    return NO_ERROR;
  }

 protected:
  std::function<void()> prepare(const VariantPack& pack) const override {
    using P = infer::RmsNormParam;
    TORCH_CHECK(param_.layerType == P::RMS_NORM_NORM, "layerType ", static_cast<int>(param_.layerType),
                " is not supported on vNPU: it has RMS_NORM_NORM (1) only (the residual-adding PRENORM and POSTNORM "
                "are torch_npu.npu_add_rms_norm).");
    TORCH_CHECK(param_.normParam.quantType == infer::QUANT_UNDEFINED &&
                    param_.normParam.dynamicQuantType == infer::DYNAMIC_QUANT_UNDEFINED,
                "quantised RmsNorm is not supported on vNPU (normParam.quantType and dynamicQuantType must be "
                "undefined).");
    TORCH_CHECK(!(param_.normParam.rstd && param_.normParam.modelType == P::GEMMA_MODEL),
                "normParam.rstd cannot be set together with modelType GEMMA_MODEL.");
    check_counts(pack, "x, gamma");
    at::Tensor x = host_view("x", pack.inTensors[0]), gamma = host_view("gamma", pack.inTensors[1]);
    check_floating("x", x);
    check_floating("gamma", gamma);
    const std::vector<int64_t> dims = norm_dims(x, gamma);
    at::Tensor y = host_view("y", pack.outTensors[0]);
    TORCH_CHECK(y.sizes() == x.sizes(), "y must have x's shape ", x.sizes(), ", got ", y.sizes(), ".");
    at::Tensor rstd;
    if (param_.normParam.rstd) {
      rstd = host_view("rstd", pack.outTensors[1]);
      TORCH_CHECK(rstd.sizes() == at::IntArrayRef(rstd_shape(x, gamma)) && rstd.scalar_type() == at::kFloat,
                  "rstd must be float32 of shape ", at::IntArrayRef(rstd_shape(x, gamma)), ", got ",
                  rstd.scalar_type(), " ", rstd.sizes(), ".");
    }
    const double eps = param_.normParam.epsilon;
    const bool gemma_model = param_.normParam.modelType == P::GEMMA_MODEL;
    return [x, gamma, y, rstd, dims, eps, gemma_model]() mutable {
      at::Tensor xf = x.to(at::kFloat);
      at::Tensor r = at::rsqrt(at::mean(xf * xf, dims, /*keepdim=*/true) + eps);
      at::Tensor g = gamma.to(at::kFloat);
      y.copy_(xf * r * (gemma_model ? g + 1 : g));
      if (rstd.defined()) rstd.copy_(r);
    };
  }

 private:
  infer::RmsNormParam param_;
};

// dx = rstd * (dy*gamma - xhat * mean(dy*gamma*xhat)), dgamma = sum(dy * xhat)
// over x's leading dims, where xhat = x * rstd.
class RmsNormBackwardOperation : public EmulatedOperation {
 public:
  explicit RmsNormBackwardOperation(const train::RmsNormBackwardParam&)
      : EmulatedOperation("RmsNormBackwardOperation") {}

  uint32_t GetInputNum() const override { return 4; }
  uint32_t GetOutputNum() const override { return 2; }

  Status InferShape(const SVector<TensorDesc>& in, SVector<TensorDesc>& out) const override {
    if (in.size() != GetInputNum()) return ERROR_INVALID_TENSOR_NUM;
    TensorDesc dgamma = in[3];
    dgamma.dtype = ACL_FLOAT;
    out.clear();
    out.push_back(in[1]);
    out.push_back(dgamma);
    return NO_ERROR;
  }

 protected:
  std::function<void()> prepare(const VariantPack& pack) const override {
    check_counts(pack, "dy, x, rstd, gamma");
    at::Tensor dy = host_view("dy", pack.inTensors[0]), x = host_view("x", pack.inTensors[1]);
    at::Tensor rstd = host_view("rstd", pack.inTensors[2]), gamma = host_view("gamma", pack.inTensors[3]);
    check_floating("dy", dy);
    check_floating("x", x);
    TORCH_CHECK(dy.sizes() == x.sizes(), "dy ", dy.sizes(), " must have x's shape ", x.sizes(), ".");
    const std::vector<int64_t> dims = norm_dims(x, gamma);
    TORCH_CHECK(rstd.sizes() == at::IntArrayRef(rstd_shape(x, gamma)) && rstd.scalar_type() == at::kFloat,
                "rstd must be the forward's float32 rstd of shape ", at::IntArrayRef(rstd_shape(x, gamma)),
                ", got ", rstd.scalar_type(), " ", rstd.sizes(), ".");
    at::Tensor dx = host_view("dx", pack.outTensors[0]), dgamma = host_view("dgamma", pack.outTensors[1]);
    TORCH_CHECK(dx.sizes() == x.sizes(), "dx must have x's shape ", x.sizes(), ", got ", dx.sizes(), ".");
    TORCH_CHECK(dgamma.sizes() == gamma.sizes(), "dgamma must have gamma's shape ", gamma.sizes(), ", got ",
                dgamma.sizes(), ".");
    std::vector<int64_t> lead;
    for (int64_t i = 0; i < x.dim() - gamma.dim(); ++i) lead.push_back(i);
    return [dy, x, rstd, gamma, dx, dgamma, dims, lead]() mutable {
      at::Tensor r = rstd;
      at::Tensor xhat = x.to(at::kFloat) * r;
      at::Tensor dyf = dy.to(at::kFloat);
      at::Tensor g = dyf * gamma.to(at::kFloat);
      dx.copy_(r * (g - xhat * at::mean(g * xhat, dims, /*keepdim=*/true)));
      at::Tensor dgamma_full = dyf * xhat;
      dgamma.copy_(lead.empty() ? dgamma_full : at::sum(dgamma_full, lead));
    };
  }
};

}  // namespace
}  // namespace vnpu

template <>
__attribute__((visibility("default"))) Status CreateOperation(const infer::RmsNormParam& opParam,
                                                               Operation** operation) {
  return vnpu::create<vnpu::RmsNormOperation>(opParam, operation);
}

template <>
__attribute__((visibility("default"))) Status CreateOperation(const train::RmsNormBackwardParam& opParam,
                                                               Operation** operation) {
  return vnpu::create<vnpu::RmsNormBackwardOperation>(opParam, operation);
}

}  // namespace atb
