// Ascend C on the virtual NPU: the header Ascend C kernels include.
//
// Models: the Ascend C kernel API of an Ascend 910B (dav-c220) AI core, so that a
// kernel written for that chip compiles unchanged with g++ (-std=c++17) and runs on the
// host CPU inside vNPU -- each block on its own thread with its own Unified Buffer and
// L1/L0 memories. See docs/ascendc.md for how a launch runs, what is faithful and what
// is not modelled, and the API coverage table.
// Does not model: timing, the concurrency of an AI core's pipes, bank conflicts,
// inter-core synchronization and mixed AIC+AIV kernels (docs/ascendc.md).
//
// One concept per header under vnpu_ascendc/; this file only gathers them. The host
// side of a launch needs the four functions of vnpu_ascendc/host_interface.h, which
// vNPU's extension library implements.
#ifndef VNPU_ASCENDC_KERNEL_OPERATOR_H
#define VNPU_ASCENDC_KERNEL_OPERATOR_H

#include "vnpu_ascendc/keywords.h"
#include "vnpu_ascendc/types.h"
#include "vnpu_ascendc/host_interface.h"
#include "vnpu_ascendc/positions.h"
#include "vnpu_ascendc/events.h"
#include "vnpu_ascendc/block_context.h"
#include "vnpu_ascendc/global_tensor.h"
#include "vnpu_ascendc/local_tensor.h"
#include "vnpu_ascendc/tpipe.h"
#include "vnpu_ascendc/tque.h"
#include "vnpu_ascendc/tbuf.h"
#include "vnpu_ascendc/local_mem_allocator.h"
#include "vnpu_ascendc/atomic.h"
#include "vnpu_ascendc/data_copy.h"
#include "vnpu_ascendc/vector_mask.h"
#include "vnpu_ascendc/vector_binary.h"
#include "vnpu_ascendc/vector_unary.h"
#include "vnpu_ascendc/vector_scalar.h"
#include "vnpu_ascendc/reduce.h"
#include "vnpu_ascendc/cast.h"
#include "vnpu_ascendc/compare_select.h"
#include "vnpu_ascendc/sync.h"
#include "vnpu_ascendc/cube.h"
#include "vnpu_ascendc/system.h"
#include "vnpu_ascendc/tiling.h"
#include "vnpu_ascendc/launch.h"

#endif  // VNPU_ASCENDC_KERNEL_OPERATOR_H
