/* vNPU: CANN's ACL umbrella header (initialisation and the runtime API). */
#ifndef VNPU_ACL_H_
#define VNPU_ACL_H_

#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The virtual NPU needs no initialisation: aclInit accepts a config path (or
 * NULL) and succeeds, aclFinalize succeeds. Both are for code written for CANN. */
ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath);
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion);

#ifdef __cplusplus
}
#endif

#endif /* VNPU_ACL_H_ */
