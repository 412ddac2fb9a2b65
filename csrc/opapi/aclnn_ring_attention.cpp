// aclnnRingAttentionUpdate: merges two partial attention results by their
// softmax statistics (ring / context-parallel attention; MindSpeed's
// --use-fused-ring-attention-update calls it through its C++ op builder).
// The math of vNPU's torch_npu.npu_ring_attention_update
// (torch_npu/op_plugin/infer_cache.py), computed in float32:
//   m = max(m1, m2), l = l1 e^(m1 - m) + l2 e^(m2 - m),
//   out = out1 l1 e^(m1 - m) / l + out2 l2 e^(m2 - m) / l.
// Layouts: "SBH" attention (S, B, N*D) with softmax (B, N, S, 8); "TND"
// attention (T, N, D) with softmax (T, N, 8). The 8 lanes of a softmax
// statistic hold one value repeated, as the device keeps it.
#include <ATen/TensorOperators.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/maximum.h>
#include <c10/util/Exception.h>

#include <string>

#include "aclnnop/aclnn_ring_attention_update.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

namespace torch_npu {
namespace aclnn {
namespace {

void check_ring_update(const at::Tensor& out1, const at::Tensor& m1, const at::Tensor& l1, const at::Tensor& out2,
                       const at::Tensor& m2, const at::Tensor& l2, const std::string& layout) {
  TORCH_CHECK(layout == "SBH" || layout == "TND", "inputLayout only supports SBH or TND, but got ", layout, ".");
  TORCH_CHECK(out1.sizes() == out2.sizes() && out1.scalar_type() == out2.scalar_type(),
              "prevAttnOut and curAttnOut must have one shape and dtype.");
  const auto dtype = out1.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "attention outputs must be float32, float16 or bfloat16, but got ", dtype, ".");
  TORCH_CHECK(out1.dim() == 3, "attention outputs must be 3-dimensional, but got ", out1.dim(), " dims.");
  for (const at::Tensor* t : {&l1, &m2, &l2}) {
    TORCH_CHECK(t->sizes() == m1.sizes(), "the softmax statistics must have one shape, got ", m1.sizes(), " and ",
                t->sizes(), ".");
  }
  for (const at::Tensor* t : {&m1, &l1, &m2, &l2}) {
    TORCH_CHECK(t->scalar_type() == at::kFloat, "the softmax statistics must be float32, but got ",
                t->scalar_type(), ".");
  }
  TORCH_CHECK(m1.dim() > 0 && m1.size(-1) == 8, "the softmax statistics' last dimension must be 8, got ",
              m1.sizes(), ".");
  if (layout == "SBH") {
    TORCH_CHECK(m1.dim() == 4 && m1.size(0) == out1.size(1) && m1.size(2) == out1.size(0) && m1.size(1) > 0 &&
                    out1.size(2) % m1.size(1) == 0,
                "with inputLayout SBH the softmax statistics must be (B, N, S, 8) for attention (S, B, N*D) ",
                out1.sizes(), ", got ", m1.sizes(), ".");
  } else {
    TORCH_CHECK(m1.dim() == 3 && m1.size(0) == out1.size(0) && m1.size(1) == out1.size(1),
                "with inputLayout TND the softmax statistics must be (T, N, 8) for attention (T, N, D) ",
                out1.sizes(), ", got ", m1.sizes(), ".");
  }
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnRingAttentionUpdateGetWorkspaceSize(
    const aclTensor* prevAttnOut, const aclTensor* prevSoftmaxMax, const aclTensor* prevSoftmaxSum,
    const aclTensor* curAttnOut, const aclTensor* curSoftmaxMax, const aclTensor* curSoftmaxSum,
    const aclTensor* actualSeqQlenOptional, char* inputLayoutOptional, aclTensor* attnOutOut,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnRingAttentionUpdate", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor out1 = host_view("prevAttnOut", prevAttnOut), m1 = host_view("prevSoftmaxMax", prevSoftmaxMax),
               l1 = host_view("prevSoftmaxSum", prevSoftmaxSum), out2 = host_view("curAttnOut", curAttnOut),
               m2 = host_view("curSoftmaxMax", curSoftmaxMax), l2 = host_view("curSoftmaxSum", curSoftmaxSum),
               out = host_view("attnOutOut", attnOutOut), m = host_view("softmaxMaxOut", softmaxMaxOut),
               l = host_view("softmaxSumOut", softmaxSumOut);
    (void)optional_host_view("actualSeqQlenOptional", actualSeqQlenOptional);  // TND's sequence bounds: rows are
                                                                             // merged alike whatever they are
    const std::string layout = inputLayoutOptional != nullptr ? inputLayoutOptional : "SBH";
    torch_npu::aclnn::check_ring_update(out1, m1, l1, out2, m2, l2, layout);
    TORCH_CHECK(out.sizes() == out1.sizes() && out.scalar_type() == out1.scalar_type(),
                "attnOutOut must have prevAttnOut's shape and dtype.");
    TORCH_CHECK(m.sizes() == m1.sizes() && l.sizes() == m1.sizes() && m.scalar_type() == at::kFloat &&
                    l.scalar_type() == at::kFloat,
                "softmaxMaxOut and softmaxSumOut must be float32 with the statistics' shape.");
    return [=]() mutable {
      at::Tensor mx = at::maximum(m1, m2);
      at::Tensor l1s = l1 * at::exp(m1 - mx), l2s = l2 * at::exp(m2 - mx);
      at::Tensor total = l1s + l2s;
      at::Tensor f1 = (l1s / total).select(-1, 0), f2 = (l2s / total).select(-1, 0);
      at::Tensor a = out1.to(at::kFloat), b = out2.to(at::kFloat);
      at::Tensor merged;
      if (layout == "SBH") {
        const int64_t s = a.size(0), batch = a.size(1), h = a.size(2), n = f1.size(1);
        // (B, N, S) -> (S, B, N, 1), against attention (S, B, N, D).
        at::Tensor w1 = f1.permute({2, 0, 1}).unsqueeze(-1), w2 = f2.permute({2, 0, 1}).unsqueeze(-1);
        merged = (a.view({s, batch, n, h / n}) * w1 + b.view({s, batch, n, h / n}) * w2).view({s, batch, h});
      } else {
        merged = a * f1.unsqueeze(-1) + b * f2.unsqueeze(-1);
      }
      m.copy_(mx);
      l.copy_(total);
      out.copy_(merged);
    };
  });
}

aclnnStatus aclnnRingAttentionUpdate(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     aclrtStream stream) {
  return launch("aclnnRingAttentionUpdate", executor, stream);
}

}  // extern "C"
