/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_GROUPED_MAT_MUL_ALL_REDUCE_H_
#define VNPU_ACLNN_GROUPED_MAT_MUL_ALL_REDUCE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y_i = allreduce(x_i @ weight_i) + bias_i over the hccl group `group` (get_hccl_comm_name), reduceOp "sum";
 * float16 or bfloat16. splitItem 1 and 3 split the one x's rows by groupListOptional (cumulative ends); 2 and 3
 * write one output. commTurn and streamMode do not change the result. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnGroupedMatMulAllReduceGetWorkspaceSize(
    const aclTensorList *x, const aclTensorList *weight, const aclTensorList *bias,
    const aclIntArray *groupListOptional, int64_t splitItem, const char *group, const char *reduceOp,
    int64_t commTurn, int64_t streamMode, const aclTensorList *y, uint64_t *workspaceSize,
    aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGroupedMatMulAllReduce(void *workspace, uint64_t workspaceSize,
                                                            aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
