/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_QUANT_MATMUL_ALL_REDUCE_ADD_RMS_NORM_H_
#define VNPU_ACLNN_QUANT_MATMUL_ALL_REDUCE_ADD_RMS_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aclnnMatmulAllReduceAddRmsNorm with int8 x1 and x2: the product is accumulated exactly, int32 bias added, then
 * multiplied by dequantScale (1 or N values; int64 scales carry float32 bits); y and normOut in residual's dtype. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnQuantMatmulAllReduceAddRmsNormGetWorkspaceSize(
    const aclTensor *x1, const aclTensor *x2, const aclTensor *bias, const aclTensor *dequantScale,
    const aclTensor *residual, const aclTensor *gamma, double epsilon, const char *group, const char *reduceOp,
    int64_t commTurn, int64_t streamMode, const aclTensor *y, const aclTensor *normOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnQuantMatmulAllReduceAddRmsNorm(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
