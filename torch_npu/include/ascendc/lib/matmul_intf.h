// Ascend C on the virtual NPU: CANN's include path for the high-level Matmul API.
// Models: vnpu_ascendc/matmul.h (Matmul, MatmulType, REGIST_MATMUL_OBJ). Does not model:
// the AIV/AIC message protocol behind mixed-mode Matmul (see matmul.h).
#ifndef VNPU_ASCENDC_LIB_MATMUL_INTF_H
#define VNPU_ASCENDC_LIB_MATMUL_INTF_H
#include "../kernel_operator.h"
#include "../vnpu_ascendc/matmul.h"
#endif  // VNPU_ASCENDC_LIB_MATMUL_INTF_H
