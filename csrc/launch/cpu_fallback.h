// The CPU fallback: for ops with no npu kernel at all (neither asynchronous
// nor synchronous native). Inputs are copied to the host, the CPU kernel
// runs, results are copied back: correct, slow by design, and announced with
// torch_npu's CAUTION warning once per op. TORCH_NPU_FALLBACK_CPU_DISABLE=1
// turns it into an error.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_npu {

// The boxed fallback: runs `op` with its arguments moved to the host, on the
// kernel of `cpu_key` (CPU, SparseCPU or SparseCsrCPU: the npu key's host twin).
void npu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key);

// Times each op took the fallback in this process.
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

// set_option("enable_debug", True): also report every fallback call.
void set_fallback_debug(bool enabled);

}  // namespace torch_npu
