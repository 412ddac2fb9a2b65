/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_MOE_TOKEN_PERMUTE_GRAD_H_
#define VNPU_ACLNN_MOE_TOKEN_PERMUTE_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The gradient of aclnnMoeTokenPermute: out[t] = the sum of the permuted rows copied from token t. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenPermuteGradGetWorkspaceSize(const aclTensor *permutedOutputGrad,
                                                                         const aclTensor *sortedIndices,
                                                                         int64_t numTopk, bool paddedMode,
                                                                         aclTensor *out, uint64_t *workspaceSize,
                                                                         aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMoeTokenPermuteGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
