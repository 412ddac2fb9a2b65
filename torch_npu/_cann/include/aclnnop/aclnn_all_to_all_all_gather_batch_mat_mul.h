/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_ALL_TO_ALL_ALL_GATHER_BATCH_MAT_MUL_H_
#define VNPU_ACLNN_ALL_TO_ALL_ALL_GATHER_BATCH_MAT_MUL_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Expert parallelism's first matmul, fused with its collectives: x (E, C, H/tp) (xShardType 0) or (E, C/tp, H)
 * (1) goes all-to-all over the ep group (expert block r to ep rank r), is all-gathered over the tp group (along
 * H, or along C as (ep, tp, C/tp)), and multiplies weight (E/ep, H, M/tp), plus bias (E/ep, M/tp) or (E/ep, 1,
 * M/tp), then actType (0 none, 1 GELU (erf), 2 SiLU, 3 ReLU, 4 FastGELU). y1Out is
 * the result, y2OutOptional the gathered x, y3OutOptional the product before the activation. groupEp and
 * groupTp are hccl comm names (get_hccl_comm_name). */
ACL_FUNC_VISIBILITY aclnnStatus aclnnAlltoAllAllGatherBatchMatMulGetWorkspaceSize(
    const aclTensor *x, const aclTensor *weight, const aclTensor *biasOptional, const char *groupEp,
    const char *groupTp, int64_t epWorldSize, int64_t tpWorldSize, int64_t xShardType, int64_t actType,
    aclTensor *y1Out, aclTensor *y2OutOptional, aclTensor *y3OutOptional, uint64_t *workspaceSize,
    aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnAlltoAllAllGatherBatchMatMul(void *workspace, uint64_t workspaceSize,
                                                                  aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
