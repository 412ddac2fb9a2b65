// The CPU fallback: for ops with no npu kernel at all (neither asynchronous
// nor synchronous native). Inputs are copied to the host, the CPU kernel
// runs, results are copied back: correct, slow by design, and announced with
// torch_npu's CAUTION warning once per op. TORCH_NPU_FALLBACK_CPU_DISABLE=1
// turns it into an error.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_npu {

// Times each op took the fallback in this process.
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

// set_option("enable_debug", True): also report every fallback call.
void set_fallback_debug(bool enabled);

}  // namespace torch_npu
