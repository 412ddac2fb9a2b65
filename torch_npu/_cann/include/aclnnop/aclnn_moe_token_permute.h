/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_MOE_TOKEN_PERMUTE_H_
#define VNPU_ACLNN_MOE_TOKEN_PERMUTE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MoE dispatch: sortedIndicesOut = the flat (token, k) positions of indices sorted by expert (stable,
 * int32); permuteTokensOut[i] = tokens[sortedIndicesOut[i] / topk] for the first numOutTokens rows.
 * paddedMode must be false. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenPermuteGetWorkspaceSize(const aclTensor *tokens, const aclTensor *indices,
                                                                     int64_t numOutTokens, bool paddedMode,
                                                                     aclTensor *permuteTokensOut,
                                                                     aclTensor *sortedIndicesOut,
                                                                     uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenPermute(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
