/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_GROUPED_MATMUL_V2_H_
#define VNPU_ACLNN_GROUPED_MATMUL_V2_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Grouped matmul, float inputs: groupType -1 multiplies x[i] by weight[i]; 0 splits x's rows (M) at the
 * cumulative ends groupListOptional and multiplies group e by weight[e] (+ bias[e]); 2 splits the inner
 * dimension K (x (K, M) column groups with weight (M, N) row groups: out (E, K, N)). splitItem 0/1: one
 * output per group; 2/3: one output, the groups' rows concatenated. The quantisation lists must be
 * NULL or empty on vNPU. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnGroupedMatmulV2GetWorkspaceSize(
    const aclTensorList *x, const aclTensorList *weight, const aclTensorList *biasOptional,
    const aclTensorList *scaleOptional, const aclTensorList *offsetOptional,
    const aclTensorList *antiquantScaleOptional, const aclTensorList *antiquantOffsetOptional,
    const aclIntArray *groupListOptional, int64_t splitItem, int64_t groupType, const aclTensorList *y,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGroupedMatmulV2(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
