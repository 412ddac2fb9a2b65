/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_APPLY_FUSED_EMA_ADAM_H_
#define VNPU_ACLNN_APPLY_FUSED_EMA_ADAM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One Adam step in place on varRef, mRef, vRef at step t (a 1-element int64 tensor), then the EMA of the
 * parameter: sRef = emaDecay * sRef + (1 - emaDecay) * varRef. mode 1 decouples the weight decay (AdamW),
 * mode 0 adds it to the gradient (Adam's L2); biasCorrection divides m and v by 1 - beta^t. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnApplyFusedEmaAdamGetWorkspaceSize(const aclTensor *grad, aclTensor *varRef,
                                                                       aclTensor *mRef, aclTensor *vRef,
                                                                       aclTensor *sRef, const aclTensor *step,
                                                                       double lr, double emaDecay, double beta1,
                                                                       double beta2, double eps, int64_t mode,
                                                                       bool biasCorrection, double weightDecay,
                                                                       uint64_t *workspaceSize,
                                                                       aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnApplyFusedEmaAdam(void *workspace, uint64_t workspaceSize,
                                                       aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
