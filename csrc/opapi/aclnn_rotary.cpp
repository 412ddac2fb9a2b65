// aclnnRotaryPositionEmbedding (+Grad): the rotary position embedding of
// MindSpeed's --use-fused-rotary-pos-emb, with the math of vNPU's
// torch_npu.npu_rotary_mul (torch_npu/op_plugin/rotary.py), computed in
// float32 and written in the output's dtype.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_rotary_position_embedding.h"
#include "aclnnop/aclnn_rotary_position_embedding_grad.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

namespace torch_npu {
namespace aclnn {
namespace {

constexpr int64_t kRotateHalf = 0;
constexpr int64_t kRotateInterleaved = 1;

// rotate(x): mode 0 [-x2, x1] over the halves of the last dim; mode 1
// (-x[2i+1], x[2i]) over its pairs.
at::Tensor rotate(const at::Tensor& x, int64_t mode) {
  const int64_t d = x.size(-1);
  if (mode == kRotateHalf) {
    return at::cat({x.narrow(-1, d / 2, d / 2).neg(), x.narrow(-1, 0, d / 2)}, -1);
  }
  at::Tensor pairs = x.unflatten(-1, {d / 2, 2});
  return at::stack({pairs.select(-1, 1).neg(), pairs.select(-1, 0)}, -1).flatten(-2);
}

// Sums `t` over the dims where `shape` broadcast (size 1) to t's.
at::Tensor reduce_to(const at::Tensor& t, c10::IntArrayRef shape) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (shape[i] == 1 && t.size(i) != 1) dims.push_back(i);
  }
  return dims.empty() ? t : at::sum(t, dims, /*keepdim=*/true);
}

void check_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, int64_t mode) {
  TORCH_CHECK(mode == kRotateHalf || mode == kRotateInterleaved,
              "mode must be 0 (rotate_half) or 1 (rotate_interleaved), but got ", mode, ".");
  TORCH_CHECK(x.dim() == 4, "x must be 4-dimensional, but got ", x.dim(), " dims.");
  TORCH_CHECK(x.size(-1) % 2 == 0, "the last dim of x must be even, but got ", x.size(-1), ".");
  TORCH_CHECK(cos.sizes() == sin.sizes(), "cos ", cos.sizes(), " and sin ", sin.sizes(), " must have one shape.");
  TORCH_CHECK(cos.dim() == 4, "cos and sin must be 4-dimensional, but got ", cos.dim(), " dims.");
  for (int64_t i = 0; i < 4; ++i) {
    TORCH_CHECK(cos.size(i) == x.size(i) || cos.size(i) == 1, "cos and sin ", cos.sizes(),
                " must broadcast to x ", x.sizes(), ".");
  }
  TORCH_CHECK(cos.scalar_type() == x.scalar_type() && sin.scalar_type() == x.scalar_type(),
              "x, cos and sin must have one dtype, but got ", x.scalar_type(), ", ", cos.scalar_type(), " and ",
              sin.scalar_type(), ".");
  TORCH_CHECK(at::isFloatingType(x.scalar_type()) && x.scalar_type() != at::kDouble,
              "x must be float32, float16 or bfloat16, but got ", x.scalar_type(), ".");
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnRotaryPositionEmbeddingGetWorkspaceSize(const aclTensor* x, const aclTensor* cos,
                                                         const aclTensor* sin, int64_t mode, aclTensor* out,
                                                         uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnRotaryPositionEmbedding", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor vx = host_view("x", x), vc = host_view("cos", cos), vs = host_view("sin", sin),
               vo = host_view("out", out);
    torch_npu::aclnn::check_rope(vx, vc, vs, mode);
    TORCH_CHECK(vo.sizes() == vx.sizes() && vo.scalar_type() == vx.scalar_type(),
                "out must have x's shape and dtype.");
    return [vx, vc, vs, vo, mode]() mutable {
      at::Tensor xf = vx.to(at::kFloat);
      vo.copy_(xf * vc.to(at::kFloat) + torch_npu::aclnn::rotate(xf, mode) * vs.to(at::kFloat));
    };
  });
}

aclnnStatus aclnnRotaryPositionEmbedding(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream stream) {
  return launch("aclnnRotaryPositionEmbedding", executor, stream);
}

aclnnStatus aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* cos,
                                                             const aclTensor* sin, const aclTensor* xOptional,
                                                             int64_t mode, aclTensor* dxOut, aclTensor* dcosOut,
                                                             aclTensor* dsinOut, uint64_t* workspaceSize,
                                                             aclOpExecutor** executor) {
  return prepare("aclnnRotaryPositionEmbeddingGrad", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor vdy = host_view("dy", dy), vc = host_view("cos", cos), vs = host_view("sin", sin),
               vx = optional_host_view("xOptional", xOptional), vdx = host_view("dxOut", dxOut),
               vdcos = optional_host_view("dcosOut", dcosOut), vdsin = optional_host_view("dsinOut", dsinOut);
    torch_npu::aclnn::check_rope(vdy, vc, vs, mode);
    TORCH_CHECK(vdx.sizes() == vdy.sizes(), "dxOut must have dy's shape.");
    // dcos and dsin are wanted when x is given and they are not empty.
    const bool cos_sin_grads = vx.defined() && vdcos.defined() && vdsin.defined() && vdcos.numel() > 0;
    if (cos_sin_grads) {
      TORCH_CHECK(vx.sizes() == vdy.sizes(), "xOptional must have dy's shape.");
      TORCH_CHECK(vdcos.sizes() == vc.sizes() && vdsin.sizes() == vc.sizes(),
                  "dcosOut and dsinOut must have cos's shape.");
    }
    return [vdy, vc, vs, vx, vdx, vdcos, vdsin, mode, cos_sin_grads]() mutable {
      using torch_npu::aclnn::reduce_to;
      using torch_npu::aclnn::rotate;
      at::Tensor g = vdy.to(at::kFloat), c = vc.to(at::kFloat), s = vs.to(at::kFloat);
      // y = x*c + R(x)*s with R^T = -R, so dx = g*c - R(g*s).
      vdx.copy_(g * c - rotate(g * s, mode));
      if (cos_sin_grads) {
        at::Tensor xf = vx.to(at::kFloat);
        vdcos.copy_(reduce_to(g * xf, c.sizes()));
        vdsin.copy_(reduce_to(g * rotate(xf, mode), c.sizes()));
      }
    };
  });
}

aclnnStatus aclnnRotaryPositionEmbeddingGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                             aclrtStream stream) {
  return launch("aclnnRotaryPositionEmbeddingGrad", executor, stream);
}

}  // extern "C"
