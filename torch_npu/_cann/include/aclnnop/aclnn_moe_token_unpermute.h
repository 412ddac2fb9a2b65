/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_MOE_TOKEN_UNPERMUTE_H_
#define VNPU_ACLNN_MOE_TOKEN_UNPERMUTE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MoE combine: out[t] = sum over k of probs[t, k] * permutedTokens[rank of t * topk + k in sortedIndices]
 * (rows past permutedTokens' count are dropped tokens and add nothing). probsOptional NULL: topk 1,
 * weight 1. paddedMode must be false; restoreShapeOptional is unused then. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenUnpermuteGetWorkspaceSize(const aclTensor *permutedTokens,
                                                                       const aclTensor *sortedIndices,
                                                                       const aclTensor *probsOptional, bool paddedMode,
                                                                       const aclIntArray *restoreShapeOptional,
                                                                       aclTensor *out, uint64_t *workspaceSize,
                                                                       aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenUnpermute(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
