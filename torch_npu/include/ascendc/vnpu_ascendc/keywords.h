// Ascend C on the virtual NPU: the language keywords of the bisheng compiler.
//
// Models: the qualifiers an Ascend C kernel is written with (__global__, __aicore__,
// __vector__, __cube__, __gm__, __ubuf__, ...) and GM_ADDR, so that kernel sources
// compile with g++. On the host every kernel is an ordinary function and every
// memory space is host memory, so the qualifiers expand to nothing.
// Does not model: address spaces (a __gm__ pointer and a __ubuf__ pointer are both
// host pointers), the kernel-entry calling convention, or the compiler's checks
// that a __global__ function returns void. The launch syntax
// name<<<blockDim, l2ctrl, stream>>>(args) is not C++ at all: it is rewritten by
// torch_npu/utils/_ascendc_source.py before g++ sees the file (see launch.h).
#ifndef VNPU_ASCENDC_KEYWORDS_H
#define VNPU_ASCENDC_KEYWORDS_H

#include <cstdint>

#ifndef __global__
#define __global__
#endif
#ifndef __aicore__
#define __aicore__
#endif
// Kernel-kind attributes of the .asc dialect. The kind matters only for the blockDim
// limit at launch; the source rewriter reads it from the text (launch.h).
#ifndef __vector__
#define __vector__
#endif
#ifndef __cube__
#define __cube__
#endif
#ifndef __mix__
#define __mix__(aic, aiv)
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef __ubuf__
#define __ubuf__
#endif
#ifndef __cbuf__
#define __cbuf__
#endif
#ifndef __ca__
#define __ca__
#endif
#ifndef __cb__
#define __cb__
#endif
#ifndef __cc__
#define __cc__
#endif
#ifndef __fbuf__
#define __fbuf__
#endif
#ifndef __sync_alias__
#define __sync_alias__
#endif
#ifndef __inout_pipe__
#define __inout_pipe__(pipe)
#endif
#ifndef __in_pipe__
#define __in_pipe__(pipe)
#endif
#ifndef __out_pipe__
#define __out_pipe__(pipe)
#endif

// A kernel parameter pointing at global memory.
#ifndef GM_ADDR
#define GM_ADDR __gm__ uint8_t*
#endif

// The NPU architecture the headers model: Ascend 910B (dav-c220).
#ifndef __NPU_ARCH__
#define __NPU_ARCH__ 2201
#endif

// Kernel types as KERNEL_TASK_TYPE_DEFAULT takes them (CANN's KernelMetaType).
enum KernelMetaType : uint8_t {
  KERNEL_TYPE_AIV_ONLY,
  KERNEL_TYPE_AIC_ONLY,
  KERNEL_TYPE_MIX_AIV_1_0,
  KERNEL_TYPE_MIX_AIC_1_0,
  KERNEL_TYPE_MIX_AIC_1_1,
  KERNEL_TYPE_MIX_AIC_1_2,
  KERNEL_TYPE_MAX,
};

#endif  // VNPU_ASCENDC_KEYWORDS_H
