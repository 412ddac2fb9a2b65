// Strict chip mode (torch.npu.set_check_mode(True)): vNPU runs every op, but
// a real chip does not. While strict mode is on, each op the calling thread
// (and the autograd threads it starts) runs on npu tensors is checked
// against what real torch_npu does on the selected chip:
//   - an op real torch_npu has no npu kernel for gets torch_npu's CPU-fallback
//     warning (once per op), and raises under TORCH_NPU_FALLBACK_CPU_DISABLE=1;
//   - a dtype the chip's kernels reject raises in aclnn's words.
// Every finding is also collected for a report. The check is a thread-local
// RecordFunction callback, present only while strict mode is on; composite
// ops are not checked themselves (their parts are, as on the chip).
// RecordFunction swallows exceptions from callbacks, so an op to refuse is
// marked pending on the thread and refused where it launches
// (check_strict_mode(), in every launch path); the callback's end clears a
// mark its op never reached a launch with.
#pragma once

#include <string>
#include <vector>

#include <c10/macros/Macros.h>

namespace torch_npu {

extern thread_local bool t_strict_pending;
[[noreturn]] void raise_pending_strict_error();
// Raises the error the strict check marked for the op now launching.
inline void check_strict_mode() {
  if (C10_UNLIKELY(t_strict_pending)) raise_pending_strict_error();
}

struct StrictRule {
  std::string op;                  // "aten::mm" (any overload)
  std::vector<std::string> dtypes; // rejected input dtypes ("Double", "ComplexFloat", ...)
  std::string supported;           // the support list the message names: "DT_FLOAT16,DT_FLOAT,DT_BFLOAT16"
};

struct StrictFinding {
  std::string op;       // "aten::foo.overload"
  std::string kind;     // "cpu_fallback" | "dtype"
  std::string detail;   // the message given
  int count = 0;        // calls seen
};

// `native_ops`: "name.overload" ("aten::" implied) real torch_npu implements;
// `rules`: rejected dtypes per op; `chip`: named in messages.
void set_strict_mode(bool enabled, const std::vector<std::string>& native_ops, const std::vector<StrictRule>& rules,
                     const std::string& chip);
bool strict_mode_enabled();
std::vector<StrictFinding> strict_findings();
void clear_strict_findings();

}  // namespace torch_npu
