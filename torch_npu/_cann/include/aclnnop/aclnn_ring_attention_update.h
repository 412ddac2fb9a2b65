/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_RING_ATTENTION_UPDATE_H_
#define VNPU_ACLNN_RING_ATTENTION_UPDATE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Merges two partial attention results by their softmax statistics (max m, sum l; 8 equal lanes):
 * m = max(m1, m2), l = l1 e^(m1-m) + l2 e^(m2-m), out = (out1 l1 e^(m1-m) + out2 l2 e^(m2-m)) / l.
 * inputLayoutOptional "SBH" (default; softmax (B, N, S, 8)) or "TND" (softmax (T, N, 8)). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnRingAttentionUpdateGetWorkspaceSize(
    const aclTensor *prevAttnOut, const aclTensor *prevSoftmaxMax, const aclTensor *prevSoftmaxSum,
    const aclTensor *curAttnOut, const aclTensor *curSoftmaxMax, const aclTensor *curSoftmaxSum,
    const aclTensor *actualSeqQlenOptional, char *inputLayoutOptional, aclTensor *attnOutOut,
    aclTensor *softmaxMaxOut, aclTensor *softmaxSumOut, uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnRingAttentionUpdate(void *workspace, uint64_t workspaceSize,
                                                         aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
