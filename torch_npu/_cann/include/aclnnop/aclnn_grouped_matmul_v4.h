/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_GROUPED_MATMUL_V4_H_
#define VNPU_ACLNN_GROUPED_MATMUL_V4_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GMM_ACT_TYPE_NONE = 0L,
  GMM_ACT_TYPE_RELU = 1L,
  GMM_ACT_TYPE_GELU_TANH = 2L,
  GMM_ACT_TYPE_GELU_ERR_FUNC = 3L,
  GMM_ACT_TYPE_FAST_GELU = 4L,
  GMM_ACT_TYPE_SILU = 5L,
} GMMActType;

/* aclnnGroupedMatmulV2 with the group list as a device tensor (groupListType 0: cumulative ends, 1: group
 * sizes) and an activation applied to the output (actType, GMMActType). The quantisation and
 * activation-quantisation lists must be NULL or empty on vNPU. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnGroupedMatmulV4GetWorkspaceSize(
    const aclTensorList *x, const aclTensorList *weight, const aclTensorList *biasOptional,
    const aclTensorList *scaleOptional, const aclTensorList *offsetOptional,
    const aclTensorList *antiquantScaleOptional, const aclTensorList *antiquantOffsetOptional,
    const aclTensorList *perTokenScaleOptional, const aclTensor *groupListOptional,
    const aclTensorList *activationInputOptional, const aclTensorList *activationQuantScaleOptional,
    const aclTensorList *activationQuantOffsetOptional, int64_t splitItem, int64_t groupType,
    int64_t groupListType, int64_t actType, aclTensorList *out, aclTensorList *activationFeatureOutOptional,
    aclTensorList *dynQuantScaleOutOptional, uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnGroupedMatmulV4(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                     aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
