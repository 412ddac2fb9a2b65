/* vNPU: the GE header under a CANN-shaped include folder (ASCEND_HOME_PATH/include). */
#include "../../../include/third_party/acl/inc/graph/ascend_string.h"
