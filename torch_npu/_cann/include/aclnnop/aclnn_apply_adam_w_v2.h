/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_APPLY_ADAM_W_V2_H_
#define VNPU_ACLNN_APPLY_ADAM_W_V2_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step in place on varRef, mRef, vRef (and maxGradNormOptionalRef with amsgrad), as
 * torch.optim.AdamW computes it, at step t = step + 1 (step: a 1-element int64 or float tensor). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(aclTensor *varRef, aclTensor *mRef, aclTensor *vRef,
                                                                  aclTensor *maxGradNormOptionalRef,
                                                                  const aclTensor *grad, const aclTensor *step,
                                                                  float lr, float beta1, float beta2,
                                                                  float weightDecay, float eps, bool amsgrad,
                                                                  bool maximize, uint64_t *workspaceSize,
                                                                  aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnApplyAdamWV2(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
