/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_WEIGHT_QUANT_MATMUL_ALL_REDUCE_ADD_RMS_NORM_H_
#define VNPU_ACLNN_WEIGHT_QUANT_MATMUL_ALL_REDUCE_ADD_RMS_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aclnnMatmulAllReduceAddRmsNorm with an int8 x2 dequantised first: (x2 + antiquantOffset) * antiquantScale per
 * column (1 or N values) or per group of antiquantGroupSize rows ((ceil(K / size), N)), in x1's dtype. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnWeightQuantMatmulAllReduceAddRmsNormGetWorkspaceSize(
    const aclTensor *x1, const aclTensor *x2, const aclTensor *bias, const aclTensor *antiquantScale,
    const aclTensor *antiquantOffset, const aclTensor *residual, const aclTensor *gamma, double epsilon,
    const char *group, const char *reduceOp, int64_t commTurn, int64_t streamMode, int64_t antiquantGroupSize,
    const aclTensor *y, const aclTensor *normOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnWeightQuantMatmulAllReduceAddRmsNorm(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
