// An extension that drives NNAL's ATB operations the way MindSpeed's ATB
// adapter does (tests/test_atb.py): describe the tensors, CreateOperation
// from a parameter struct, Setup on the caller, then Execute inside an
// OpCommand custom handler on the current stream (MindSpeed's RunAtbCmd),
// or directly from the host thread (queued on the context's stream).
#include <string>
#include <vector>

#include <ATen/ops/empty.h>
#include <torch/extension.h>

#include "atb/context.h"
#include "atb/infer_op_params.h"
#include "atb/operation.h"
#include "atb/train_op_params.h"
#include "atb/utils.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"

namespace {

aclDataType acl_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ACL_FLOAT;
    case at::kHalf: return ACL_FLOAT16;
    case at::kBFloat16: return ACL_BF16;
    case at::kInt: return ACL_INT32;
    case at::kLong: return ACL_INT64;
    default: TORCH_CHECK(false, "no aclDataType for ", type);
  }
}

atb::Tensor atb_tensor(const at::Tensor& t) {
  atb::Tensor tensor;
  tensor.desc.dtype = acl_dtype(t.scalar_type());
  tensor.desc.format = ACL_FORMAT_ND;
  tensor.desc.shape.dimNum = t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) tensor.desc.shape.dims[i] = t.size(i);
  tensor.deviceData = t.data_ptr();
  tensor.dataSize = atb::Utils::GetTensorSize(tensor);
  return tensor;
}

// Sets `op` up over the tensors and executes it; raises (naming `name` and
// the status) when Setup or Execute fails. Takes ownership of `op`.
void run(atb::Operation* op, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
         bool in_handler) {
  TORCH_CHECK(op != nullptr, "CreateOperation gave no operation");
  const std::string name = op->GetName();
  atb::VariantPack pack;
  for (const at::Tensor& t : inputs) pack.inTensors.push_back(atb_tensor(t));
  for (const at::Tensor& t : outputs) pack.outTensors.push_back(atb_tensor(t));
  atb::Context* context = nullptr;
  TORCH_CHECK(atb::CreateContext(&context) == atb::NO_ERROR, "CreateContext failed");
  context->SetExecuteStream(c10_npu::getCurrentNPUStream().stream(false));
  uint64_t workspace = 0;
  const atb::Status setup = op->Setup(pack, workspace, context);
  if (setup != atb::NO_ERROR) {
    atb::DestroyOperation(op);
    atb::DestroyContext(context);
    TORCH_CHECK(false, name, " Setup returned ", setup);
  }
  if (in_handler) {
    at_npu::native::OpCommand cmd;
    cmd.Name(name);
    cmd.SetCustomHandler([op, pack, context]() -> int {
      const atb::Status status = op->Execute(pack, nullptr, 0, context);
      atb::DestroyOperation(op);
      atb::DestroyContext(context);
      return status;
    });
    cmd.Run();
  } else {
    const atb::Status status = op->Execute(pack, nullptr, 0, context);
    atb::DestroyOperation(op);
    atb::DestroyContext(context);
    TORCH_CHECK(status == atb::NO_ERROR, name, " Execute returned ", status);
  }
}

template <typename Param>
atb::Operation* create(const Param& param) {
  atb::Operation* op = nullptr;
  TORCH_CHECK(atb::CreateOperation(param, &op) == atb::NO_ERROR && op != nullptr, "CreateOperation failed");
  return op;
}

// out = op(x) @ op(w) [+ bias] [+ accum, in place].
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                  const std::optional<at::Tensor>& accum, bool transpose_a, bool transpose_b, bool in_handler) {
  atb::infer::LinearParam param;
  param.transposeA = transpose_a;
  param.transposeB = transpose_b;
  param.hasBias = bias.has_value();
  param.enAccum = accum.has_value();
  std::vector<at::Tensor> inputs{x, w};
  if (bias) inputs.push_back(*bias);
  const int64_t m = transpose_a ? x.size(1) : x.size(0), n = transpose_b ? w.size(0) : w.size(1);
  at::Tensor out = accum ? *accum : at::empty({m, n}, x.options());
  if (accum) inputs.push_back(*accum);
  run(create(param), inputs, {out}, in_handler);
  return out;
}

// MindSpeed's ATB rms_norm: (y, rstd) forward, (dx, dgamma) backward.
std::vector<at::Tensor> rms_norm(const at::Tensor& x, const at::Tensor& gamma, double eps, int64_t layer_type,
                                 bool gemma, bool with_rstd, bool in_handler) {
  atb::infer::RmsNormParam param;
  param.layerType = static_cast<atb::infer::RmsNormParam::RmsNormType>(layer_type);
  param.normParam.epsilon = static_cast<float>(eps);
  param.normParam.rstd = with_rstd;
  if (gemma) param.normParam.modelType = atb::infer::RmsNormParam::GEMMA_MODEL;
  std::vector<int64_t> rstd_shape(x.sizes().begin(), x.sizes().end());
  for (int64_t i = x.dim() - gamma.dim(); i < x.dim(); ++i) rstd_shape[i] = 1;
  std::vector<at::Tensor> outputs{at::empty(x.sizes(), x.options())};
  if (with_rstd) outputs.push_back(at::empty(rstd_shape, x.options().dtype(at::kFloat)));
  run(create(param), {x, gamma}, outputs, in_handler);
  return outputs;
}

std::vector<at::Tensor> rms_norm_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& rstd,
                                          const at::Tensor& gamma, bool in_handler) {
  std::vector<at::Tensor> outputs{at::empty(x.sizes(), x.options()),
                                  at::empty(gamma.sizes(), gamma.options().dtype(at::kFloat))};
  run(create(atb::train::RmsNormBackwardParam{}), {dy, x, rstd, gamma}, outputs, in_handler);
  return outputs;
}

// ActivationParam: `type` is an atb::infer::ActivationType; SWIGLU_BACKWARD
// takes dy as `grad`.
at::Tensor activation(int64_t type, const at::Tensor& x, const std::optional<at::Tensor>& grad, int64_t dim,
                      double scale, int64_t gelu_mode, bool in_handler) {
  atb::infer::ActivationParam param;
  param.activationType = static_cast<atb::infer::ActivationType>(type);
  param.dim = static_cast<int32_t>(dim);
  param.scale = static_cast<float>(scale);
  param.geluMode = static_cast<atb::infer::ActivationParam::GeLUMode>(gelu_mode);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (type == atb::infer::ACTIVATION_SWIGLU_FORWARD) shape[dim < 0 ? dim + x.dim() : dim] /= 2;
  at::Tensor out = at::empty(shape, x.options());
  std::vector<at::Tensor> inputs;
  if (grad) inputs.push_back(*grad);
  inputs.push_back(x);
  run(create(param), inputs, {out}, in_handler);
  return out;
}

// MindSpeed's npu_groupmatmul_add_fp32: grad[e] += x[rows]^T @ dy[rows].
void grouped_matmul_add(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& group_list, at::Tensor& grad,
                        bool transpose_a, bool in_handler) {
  atb::infer::GroupedMatmulInplaceAddParam param;
  param.transposeA = transpose_a;
  param.transposeB = false;
  run(create(param), {x, dy, group_list, grad}, {grad}, in_handler);
}

// MindSpeed's lcal coc ops: out = x @ op(w) [+ residual] with a collective
// over communication domain `domain` (type: LinearParallelParam's).
std::vector<at::Tensor> linear_parallel(const at::Tensor& x, const at::Tensor& w,
                                        const std::optional<at::Tensor>& residual, int64_t type, int64_t rank,
                                        int64_t rank_size, bool keep_intermediate, bool in_handler,
                                        const std::string& domain) {
  atb::infer::LinearParallelParam param;
  param.transWeight = x.size(1) != w.size(0);
  param.rank = static_cast<int>(rank);
  param.rankSize = static_cast<int>(rank_size);
  param.hasResidual = residual.has_value();
  param.backend = "lcoc";
  param.type = static_cast<atb::infer::LinearParallelParam::ParallelType>(type);
  param.keepIntermediate = keep_intermediate;
  param.commDomain = domain;
  std::vector<at::Tensor> inputs{x, w};
  if (residual) inputs.push_back(*residual);
  int64_t rows = x.size(0);
  if (type == atb::infer::LinearParallelParam::ALL_GATHER_LINEAR) rows *= rank_size;
  if (type == atb::infer::LinearParallelParam::LINEAR_REDUCE_SCATTER) rows /= rank_size;
  std::vector<at::Tensor> outputs{at::empty({rows, param.transWeight ? w.size(0) : w.size(1)}, x.options())};
  if (keep_intermediate) outputs.push_back(at::empty({x.size(0) * rank_size, x.size(1)}, x.options()));
  run(create(param), inputs, outputs, in_handler);
  return outputs;
}

// MindSpeed's 2-D tensor-parallel coc op (all_gather_matmul_reduce_scatter):
// x gathered over this rank's ag_dim ranks, @ op(w), summed over its rs_dim
// ranks, this rank's block of rows.
at::Tensor linear_parallel_2d(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                              int64_t rank, int64_t ag_dim, int64_t rs_dim, bool inner_dim_is_ag,
                              const std::string& domain) {
  atb::infer::LinearParallelParam param;
  param.transWeight = x.size(1) != w.size(0);
  param.rank = static_cast<int>(rank);
  param.rankSize = static_cast<int>(ag_dim * rs_dim);
  param.twoDimTPInfo.agDim = static_cast<uint16_t>(ag_dim);
  param.twoDimTPInfo.rsDim = static_cast<uint16_t>(rs_dim);
  param.twoDimTPInfo.innerDimIsAg = inner_dim_is_ag;
  param.hasResidual = bias.has_value();
  param.backend = "lcoc";
  param.type = atb::infer::LinearParallelParam::ALL_GATHER_LINEAR_REDUCE_SCATTER;
  param.commDomain = domain;
  std::vector<at::Tensor> inputs{x, w};
  if (bias) inputs.push_back(*bias);
  const int64_t rows = x.size(0) * ag_dim / rs_dim;
  std::vector<at::Tensor> outputs{at::empty({rows, param.transWeight ? w.size(0) : w.size(1)}, x.options())};
  run(create(param), inputs, outputs, true);
  return outputs[0];
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear", &linear);
  m.def("rms_norm", &rms_norm);
  m.def("rms_norm_backward", &rms_norm_backward);
  m.def("activation", &activation);
  m.def("grouped_matmul_add", &grouped_matmul_add);
  m.def("linear_parallel", &linear_parallel);
  m.def("linear_parallel_2d", &linear_parallel_2d);
}
