/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_MATMUL_ALL_REDUCE_ADD_RMS_NORM_H_
#define VNPU_ACLNN_MATMUL_ALL_REDUCE_ADD_RMS_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = allreduce(x1 @ x2 + bias) + residual over the hccl group `group` (get_hccl_comm_name), reduceOp "sum";
 * normOut = rms_norm(y) * gamma over the last dim. x1 (..., K) and x2 (K, N) float16 or bfloat16; residual, y
 * and normOut x1's leading dims by N; bias and gamma (N). commTurn and streamMode do not change the result. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnMatmulAllReduceAddRmsNormGetWorkspaceSize(
    const aclTensor *x1, const aclTensor *x2, const aclTensor *bias, const aclTensor *residual, const aclTensor *gamma,
    double epsilon, const char *group, const char *reduceOp, int64_t commTurn, int64_t streamMode,
    const aclTensor *y, const aclTensor *normOut, uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnMatmulAllReduceAddRmsNorm(void *workspace, uint64_t workspaceSize,
                                                               aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
