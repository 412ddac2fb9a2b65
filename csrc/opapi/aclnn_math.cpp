// aclnnAdd, aclnnMul, aclnnMatmul: the basic operators of CANN's aclnn API
// that extensions call most, computed by ATen's CPU kernels on views of the
// device memory (acl_meta.h), in stream order (aclnn_executor.h).
#include <ATen/ExpandUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_matmul.h"
#include "aclnnop/aclnn_mul.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

namespace torch_npu {
namespace aclnn {
namespace {

// out must have the shape the result has (CANN does not resize outputs).
void check_out_shape(const at::Tensor& out, c10::IntArrayRef expected) {
  TORCH_CHECK(out.sizes() == expected, "out's shape ", out.sizes(), " must be the result's shape ", expected, ".");
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                     aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnAdd", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor a = host_view("self", self), b = host_view("other", other), o = host_view("out", out);
    TORCH_CHECK(alpha != nullptr, "alpha is nullptr.");
    c10::Scalar scale = alpha->value;
    torch_npu::aclnn::check_out_shape(o, at::infer_size(a.sizes(), b.sizes()));
    return [a, b, o, scale]() mutable { o.copy_(at::add(a, b, scale)); };
  });
}

aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnAdd", executor, stream);
}

aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                     uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnMul", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor a = host_view("self", self), b = host_view("other", other), o = host_view("out", out);
    torch_npu::aclnn::check_out_shape(o, at::infer_size(a.sizes(), b.sizes()));
    return [a, b, o]() mutable { o.copy_(at::mul(a, b)); };
  });
}

aclnnStatus aclnnMul(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnMul", executor, stream);
}

aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2, aclTensor* out,
                                        int8_t cubeMathType, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnMatmul", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor a = host_view("self", self), b = host_view("mat2", mat2), o = host_view("out", out);
    TORCH_CHECK(cubeMathType >= 0 && cubeMathType <= 3, "cubeMathType must be 0 (KEEP_DTYPE), 1, 2 or 3, but got ",
                static_cast<int>(cubeMathType), ".");
    TORCH_CHECK(a.dim() >= 1 && b.dim() >= 1, "self and mat2 must have at least 1 dimension.");
    const int64_t k_self = a.size(-1), k_mat2 = b.dim() == 1 ? b.size(0) : b.size(-2);
    TORCH_CHECK(k_self == k_mat2, "self's last dim ", k_self, " must equal mat2's reduction dim ", k_mat2, ".");
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "self (", a.scalar_type(), ") and mat2 (", b.scalar_type(),
                ") must have the same dtype.");
    return [a, b, o]() mutable { o.copy_(at::matmul(a, b)); };
  });
}

aclnnStatus aclnnMatmul(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnMatmul", executor, stream);
}

}  // extern "C"
