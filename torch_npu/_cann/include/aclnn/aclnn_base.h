/* vNPU: the base of CANN's aclnn operator API (status codes, init), with
 * CANN's names and values. The two-phase calls of every operator are
 *   aclnnXxxGetWorkspaceSize(inputs..., attributes..., outputs...,
 *                            uint64_t *workspaceSize, aclOpExecutor **executor);
 *   aclnnXxx(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
 *            aclrtStream stream);
 * vNPU implements the operators it lists in docs/aclnn.md; they run on the
 * stream like any kernel (torch_npu/_C.so, loaded through libopapi.so). */
#ifndef VNPU_ACLNN_BASE_H_
#define VNPU_ACLNN_BASE_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_NULLPTR 561103

/* Nothing to load on vNPU: both succeed. */
ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* VNPU_ACLNN_BASE_H_ */
