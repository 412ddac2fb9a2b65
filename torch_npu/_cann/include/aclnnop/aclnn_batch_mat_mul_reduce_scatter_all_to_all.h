/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_BATCH_MAT_MUL_REDUCE_SCATTER_ALL_TO_ALL_H_
#define VNPU_ACLNN_BATCH_MAT_MUL_REDUCE_SCATTER_ALL_TO_ALL_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Expert parallelism's second matmul, fused with its collectives (the inverse of
 * aclnnAlltoAllAllGatherBatchMatMul's layout): x (E/ep, ep*C, M/tp) times weight (E/ep, M/tp, H) is reduce-scattered
 * over the tp group (along H for yShardType 0, along C as (ep, tp, C/tp) for 1), plus bias, then goes all-to-all over the ep group
 * (C block r to ep rank r): out (E, C, H/tp) or (E, C/tp, H). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnBatchMatMulReduceScatterAlltoAllGetWorkspaceSize(
    const aclTensor *x, const aclTensor *weight, const aclTensor *biasOptional, const char *groupEp,
    const char *groupTp, int64_t epWorldSize, int64_t tpWorldSize, int64_t yShardType, aclTensor *out,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnBatchMatMulReduceScatterAlltoAll(void *workspace, uint64_t workspaceSize,
                                                                      aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
