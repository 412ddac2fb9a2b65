// The fused optimizer steps of the aclnn API, computed in float32 and
// written back in each tensor's dtype:
// - aclnnApplyAdamWV2: one AdamW step in place, as torch.optim.AdamW
//   computes it (op-plugin's _fused_adamw_ and MindSpeed's fused AdamW call
//   it with step = t - 1; the operator steps at t = step + 1).
// - aclnnApplyFusedEmaAdam: one Adam(W) step at t = step, then the EMA of
//   the parameter (MindSpeed's FusedEmaAdamW).
#include <cmath>

#include <ATen/TensorOperators.h>
#include <ATen/ops/maximum.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_apply_adam_w_v2.h"
#include "aclnnop/aclnn_apply_fused_ema_adam.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(aclTensor* varRef, aclTensor* mRef, aclTensor* vRef,
                                              aclTensor* maxGradNormOptionalRef, const aclTensor* grad,
                                              const aclTensor* step, float lr, float beta1, float beta2,
                                              float weightDecay, float eps, bool amsgrad, bool maximize,
                                              uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnApplyAdamWV2", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor var = host_view("varRef", varRef), m = host_view("mRef", mRef), v = host_view("vRef", vRef),
               max_v = optional_host_view("maxGradNormOptionalRef", maxGradNormOptionalRef),
               g = host_view("grad", grad), s = host_view("step", step);
    for (const at::Tensor* t : {&m, &v, &g}) {
      TORCH_CHECK(t->sizes() == var.sizes(), "mRef, vRef and grad must have varRef's shape ", var.sizes(), ".");
    }
    TORCH_CHECK(m.scalar_type() == var.scalar_type() && v.scalar_type() == var.scalar_type(),
                "mRef and vRef must have varRef's dtype.");
    TORCH_CHECK(!amsgrad || (max_v.defined() && max_v.sizes() == var.sizes()),
                "maxGradNormOptionalRef must be given, with varRef's shape, when amsgrad is true.");
    TORCH_CHECK(s.numel() == 1 && (s.scalar_type() == at::kLong || s.scalar_type() == at::kFloat),
                "step must be a 1-element int64 or float32 tensor.");
    return [=]() mutable {
      const double t = s.item<double>() + 1;
      at::Tensor p = var.to(at::kFloat), mf = m.to(at::kFloat), vf = v.to(at::kFloat);
      at::Tensor gf = maximize ? -g.to(at::kFloat) : g.to(at::kFloat);
      p.mul_(1 - lr * weightDecay);
      mf.lerp_(gf, 1 - beta1);
      vf.mul_(beta2).addcmul_(gf, gf, 1 - beta2);
      const double bias1 = 1 - std::pow(static_cast<double>(beta1), t);
      const double bias2_sqrt = std::sqrt(1 - std::pow(static_cast<double>(beta2), t));
      at::Tensor second = vf;
      if (amsgrad) {
        second = at::maximum(max_v.to(at::kFloat), vf);
        max_v.copy_(second);
      }
      at::Tensor denom = second.sqrt().div_(bias2_sqrt).add_(eps);
      p.addcdiv_(mf, denom, -lr / bias1);
      var.copy_(p);
      m.copy_(mf);
      v.copy_(vf);
    };
  });
}

aclnnStatus aclnnApplyAdamWV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnApplyAdamWV2", executor, stream);
}

aclnnStatus aclnnApplyFusedEmaAdamGetWorkspaceSize(const aclTensor* grad, aclTensor* varRef, aclTensor* mRef,
                                                   aclTensor* vRef, aclTensor* sRef, const aclTensor* step,
                                                   double lr, double emaDecay, double beta1, double beta2, double eps,
                                                   int64_t mode, bool biasCorrection, double weightDecay,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnApplyFusedEmaAdam", workspaceSize, executor, [&]() -> std::function<void()> {
    at::Tensor var = host_view("varRef", varRef), m = host_view("mRef", mRef), v = host_view("vRef", vRef),
               ema = host_view("sRef", sRef), g = host_view("grad", grad), s = host_view("step", step);
    for (const at::Tensor* t : {&m, &v, &ema, &g}) {
      TORCH_CHECK(t->sizes() == var.sizes(), "grad, mRef, vRef and sRef must have varRef's shape ", var.sizes(),
                  ", got ", t->sizes(), ".");
    }
    TORCH_CHECK(s.numel() == 1 && s.scalar_type() == at::kLong, "step must be a 1-element int64 tensor, got ",
                s.scalar_type(), " ", s.sizes(), ".");
    TORCH_CHECK(mode == 0 || mode == 1, "mode must be 0 (Adam, L2 weight decay) or 1 (AdamW), got ", mode, ".");
    return [=]() mutable {
      const double t = static_cast<double>(s.item<int64_t>());
      const double bias1 = biasCorrection ? 1 - std::pow(beta1, t) : 1.0;
      const double bias2 = biasCorrection ? 1 - std::pow(beta2, t) : 1.0;
      at::Tensor p = var.to(at::kFloat), mf = m.to(at::kFloat), vf = v.to(at::kFloat);
      at::Tensor gf = mode == 0 ? g.to(at::kFloat) + p * weightDecay : g.to(at::kFloat);
      mf.mul_(beta1).add_(gf, 1 - beta1);
      vf.mul_(beta2).addcmul_(gf, gf, 1 - beta2);
      at::Tensor update = (mf / bias1) / ((vf / bias2).sqrt_() + eps);
      if (mode == 1) update.add_(p, weightDecay);
      p.sub_(update, lr);
      var.copy_(p);
      m.copy_(mf);
      v.copy_(vf);
      ema.copy_(ema.to(at::kFloat).mul_(emaDecay).add_(p, 1 - emaDecay));
    };
  });
}

aclnnStatus aclnnApplyFusedEmaAdam(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream) {
  return launch("aclnnApplyFusedEmaAdam", executor, stream);
}

}  // extern "C"
