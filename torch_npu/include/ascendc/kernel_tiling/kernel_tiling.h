// Ascend C on the virtual NPU: CANN's include path for the kernel-side tiling structures.
// Models: TCubeTiling (vnpu_ascendc/cube_tiling.h). Does not model: the other library
// tiling structures (softmax, layernorm, ...).
#ifndef VNPU_ASCENDC_KERNEL_TILING_KERNEL_TILING_H
#define VNPU_ASCENDC_KERNEL_TILING_KERNEL_TILING_H
#include "../vnpu_ascendc/cube_tiling.h"
#endif  // VNPU_ASCENDC_KERNEL_TILING_KERNEL_TILING_H
