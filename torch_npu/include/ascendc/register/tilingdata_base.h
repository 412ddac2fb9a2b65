// Ascend C on the virtual NPU: CANN's include path for the host-side tiling macros, so
// that an op_host tiling header (BEGIN_TILING_DATA_DEF ... REGISTER_TILING_DATA_CLASS)
// compiles unchanged. Models: vnpu_ascendc/tiling.h. Does not model: the op registry.
#ifndef VNPU_ASCENDC_REGISTER_TILINGDATA_BASE_H
#define VNPU_ASCENDC_REGISTER_TILINGDATA_BASE_H
#include "../vnpu_ascendc/tiling.h"
#endif  // VNPU_ASCENDC_REGISTER_TILINGDATA_BASE_H
