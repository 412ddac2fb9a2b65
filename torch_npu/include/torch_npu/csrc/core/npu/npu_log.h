// torch_npu's logging macros for extensions: ASCEND_LOGE/W/I/D(fmt, ...)
// log a printf-style message through aclAppLog when ASCEND_GLOBAL_LOG_LEVEL
// lets the level through (default: errors only). vNPU writes them to stderr.
#pragma once

#include <cstring>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/register/OptionsManager.h"

#if defined(__GNUC__) && __GNUC__ >= 12
#define FILE_NAME __FILE_NAME__
#else
#define FILE_NAME (strrchr(__FILE__, '/') ? strrchr(__FILE__, '/') + 1 : __FILE__)
#endif

#define VNPU_ASCEND_LOG(level, fmt, ...)                                               \
  do {                                                                                 \
    if (c10_npu::option::OptionsManager::isACLGlobalLogOn(level)) {                    \
      aclAppLog(level, __FUNCTION__, FILE_NAME, __LINE__, "[PTA]:" fmt, ##__VA_ARGS__); \
    }                                                                                  \
  } while (0)

#define ASCEND_LOGE(fmt, ...) VNPU_ASCEND_LOG(ACL_ERROR, fmt, ##__VA_ARGS__)
#define ASCEND_LOGW(fmt, ...) VNPU_ASCEND_LOG(ACL_WARNING, fmt, ##__VA_ARGS__)
#define ASCEND_LOGI(fmt, ...) VNPU_ASCEND_LOG(ACL_INFO, fmt, ##__VA_ARGS__)
#define ASCEND_LOGD(fmt, ...) VNPU_ASCEND_LOG(ACL_DEBUG, fmt, ##__VA_ARGS__)
