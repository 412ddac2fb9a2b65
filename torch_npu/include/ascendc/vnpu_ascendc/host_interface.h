/* Ascend C on the virtual NPU: the host interface a kernel launch calls.
 *
 * Models: the four services an Ascend C launch needs from a runtime -- what the
 * current device looks like (capacities, core counts, checking switches), running
 * the blocks of one kernel in parallel, putting a kernel task on a stream, and
 * telling which device allocation a global-memory address belongs to.
 * Does not model: the ACL runtime itself (streams, events, memory) -- vNPU's _C
 * implements these functions over its own runtime; tests link a stub
 * (tests/ascendc/host_stub.cpp).
 *
 * The header is C-compatible on purpose: the implementation lives in vNPU's
 * extension library, which is built separately from the kernels that include
 * this file, and a C ABI is the one contract both sides can keep.
 *
 * Thread-safety: every function may be called from any thread, concurrently.
 */
#ifndef VNPU_ASCENDC_HOST_INTERFACE_H
#define VNPU_ASCENDC_HOST_INTERFACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What one kernel launch may use. All capacities are in bytes and per AI core. */
typedef struct VnpuKernelEnv {
  uint32_t ub_bytes;        /* Unified Buffer per AI core, 192 KiB on 910B */
  uint32_t l1_bytes, l0a_bytes, l0b_bytes, l0c_bytes;
  uint32_t vector_core_num; /* AIV cores: the largest blockDim for vector kernels */
  uint32_t cube_core_num;   /* AIC cores: the largest blockDim for cube (and mixed) kernels */
  int strict;               /* 1: misaligned DataCopy is an error; 0: a warning (once per kernel) */
  int bounds_check;         /* 1: every GM access is checked against the tensors the kernel was given */
  char soc_version[32];     /* e.g. "Ascend910B1", NUL-terminated */
} VnpuKernelEnv;

/* Fills *env for the current device. Returns 0, or nonzero when no device is usable
 * (then *env is unspecified). Does not block. */
int vnpuGetKernelEnv(VnpuKernelEnv* env);

/* Runs fn(user_data, block) for every block in [0, block_num), in parallel, and
 * returns when all have returned. fn must not throw (the header side catches every
 * exception inside fn). Blocks: the caller's thread waits for all blocks. */
typedef void (*VnpuBlockFn)(void* user_data, uint32_t block);
void vnpuParallelBlocks(uint32_t block_num, VnpuBlockFn fn, void* user_data);

/* Enqueues one kernel task on `stream` (an aclrtStream; NULL = the current stream
 * of the current device). The task calls run(user_data, message, message_size)
 * exactly once when the stream reaches it: a return of 0 is success; nonzero is
 * failure, with a NUL-terminated reason written to message (at most message_size
 * bytes). destroy(user_data) is called exactly once in every case: after run, or
 * instead of it if the task is never run -- including a refused launch, where it
 * is called before this function returns. Ownership of user_data therefore passes
 * to the callee at the call. Returns 0, or nonzero when the launch is refused, with
 * the reason left for aclGetRecentErrMsg(). Does not wait for the task. */
typedef int (*VnpuKernelRun)(void* user_data, char* message, size_t message_size);
typedef void (*VnpuKernelDestroy)(void* user_data);
int vnpuLaunchKernelTask(const char* kernel_name, void* stream, VnpuKernelRun run, void* user_data,
                         VnpuKernelDestroy destroy);

/* The most recent error message of the calling thread (never NULL). */
const char* aclGetRecentErrMsg(void);

/* Finds the device allocation that contains address p. Returns 0 and sets
 * *base and *size (bytes) when p lies in [base, base + size) of a live allocation;
 * returns nonzero (leaving *base and *size alone) when p is in none. Only called
 * when VnpuKernelEnv.bounds_check is 1. Does not block for long (a lookup). */
int vnpuGmRegionOf(const void* p, const void** base, size_t* size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VNPU_ASCENDC_HOST_INTERFACE_H */
