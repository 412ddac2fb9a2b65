/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_MOE_TOKEN_UNPERMUTE_GRAD_H_
#define VNPU_ACLNN_MOE_TOKEN_UNPERMUTE_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The gradients of aclnnMoeTokenUnpermute: of permutedTokens, and of probs when given. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
    const aclTensor *permutedTokens, const aclTensor *unpermutedTokensGrad, const aclTensor *sortedIndices,
    const aclTensor *probsOptional, bool paddedMode, const aclIntArray *restoreShapeOptional,
    aclTensor *permutedTokensGradOut, aclTensor *probsGradOut, uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenUnpermuteGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
