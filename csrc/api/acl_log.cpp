// CANN's application log (aclAppLog) and torch_npu's log switch
// (OptionsManager::isACLGlobalLogOn), behind the ASCEND_LOG* macros of
// npu_log.h. CANN writes to its log folder; vNPU has none and writes to
// stderr, at or above ASCEND_GLOBAL_LOG_LEVEL (default: errors only).
#include <cstdarg>
#include <cstdio>
#include <string>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/register/OptionsManager.h"
#include <vnpu/environment.h>

namespace c10_npu {
namespace option {

bool OptionsManager::isACLGlobalLogOn(aclLogLevel level) {
  return static_cast<int>(level) >= vnpu::environment().acl_log_level;
}

}  // namespace option
}  // namespace c10_npu

extern "C" void aclAppLog(aclLogLevel logLevel, const char* func, const char* file, uint32_t line, const char* fmt,
                          ...) {
  if (fmt == nullptr || static_cast<int>(logLevel) < vnpu::environment().acl_log_level) return;
  static const char* const kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  const int index = static_cast<int>(logLevel);
  const char* name = index >= 0 && index <= 3 ? kNames[index] : "EVENT";
  char message[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  // One fprintf per line, so lines of different threads do not interleave.
  std::fprintf(stderr, "[%s] %s:%u %s: %s\n", name, file ? file : "?", line, func ? func : "?", message);
}
