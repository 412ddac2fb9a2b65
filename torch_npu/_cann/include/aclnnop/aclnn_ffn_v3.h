/* vNPU: an aclnn operator's two-phase API, with CANN's signature. */
#ifndef VNPU_ACLNN_FFN_V3_H_
#define VNPU_ACLNN_FFN_V3_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A feed-forward block in one operator: y = activation(x @ weight1 + bias1) @ weight2 + bias2, the math of
 * torch_npu.npu_ffn. expertTokensOptional splits x's rows among experts (counts, or cumulative ends with
 * tokensIndexFlag); the weights are then (E, K, N). int8 x (scale, deqScale1/2) and int8 weights with float x
 * (antiquantScale1/2, antiquantOffset1/2) are the quantised forms. activation: "fastgelu", "gelu", "relu", "silu",
 * "geglu", "swiglu", "reglu"; innerPrecise 0 keeps float16's activation in float32. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnFFNV3GetWorkspaceSize(
    const aclTensor *x, const aclTensor *weight1, const aclTensor *weight2, const aclTensor *expertTokensOptional,
    const aclTensor *bias1Optional, const aclTensor *bias2Optional, const aclTensor *scaleOptional,
    const aclTensor *offsetOptional, const aclTensor *deqScale1Optional, const aclTensor *deqScale2Optional,
    const aclTensor *antiquantScale1Optional, const aclTensor *antiquantScale2Optional,
    const aclTensor *antiquantOffset1Optional, const aclTensor *antiquantOffset2Optional, const char *activation,
    int64_t innerPrecise, bool tokensIndexFlag, const aclTensor *y, uint64_t *workspaceSize,
    aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFFNV3(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                           aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
