// Strict chip mode (torch.npu.set_check_mode(True)): vNPU runs every op, but
// a real chip does not. While strict mode is on, each op the calling thread
// (and the autograd threads it starts) launches on npu is checked against
// what real torch_npu does on the selected chip:
//   - an op real torch_npu has no npu kernel for gets torch_npu's CPU-fallback
//     warning (once per op), and raises under TORCH_NPU_FALLBACK_CPU_DISABLE=1;
//   - a dtype the chip's kernels reject raises in aclnn's words.
// Every finding is also collected for a report.
//
// How: a thread-local RecordFunction callback (without inputs: cheap) keeps
// the stack of aten ops the thread is inside; every launch path
// (check_strict_mode) looks at the innermost one and at the dtypes of the
// launch's npu tensors. Composite ops are not checked themselves (their
// parts are, as on the chip), except the ones real torch_npu implements
// itself (scaled_dot_product_attention, matmul): those are checked, their
// parts are not.
#pragma once

#include <c10/macros/Macros.h>
#include <c10/util/ArrayRef.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace c10 {
struct IValue;
}  // namespace c10

namespace torch_npu {

struct StrictRule {
  std::string op;                  // "aten::mm" (any overload)
  std::vector<std::string> dtypes; // rejected dtypes ("Double", "ComplexFloat", ...)
  std::string supported;           // the support list the message names: "DT_FLOAT16,DT_FLOAT,DT_BFLOAT16"
};

struct StrictFinding {
  std::string op;       // "aten::foo.overload"
  std::string kind;     // "cpu_fallback" | "dtype"
  std::string detail;   // the message given
  int count = 0;        // calls seen
};

extern std::atomic<bool> g_strict_any;  // some thread has strict mode on
// Checks the op being launched on this thread (npu_dtypes: 1 << ScalarType
// per npu tensor); raises as the chip would refuse, warns as it would fall back.
void strict_check_launch(uint64_t npu_dtypes);
inline void check_strict_mode(uint64_t npu_dtypes) {
  if (C10_UNLIKELY(g_strict_any.load(std::memory_order_relaxed))) strict_check_launch(npu_dtypes);
}
// The npu dtype mask of a boxed call's arguments (synchronous path, fallback).
uint64_t npu_dtypes_of(c10::ArrayRef<c10::IValue> args);

// `native_ops`: "name.overload" ("aten::" implied) real torch_npu implements;
// `rules`: rejected dtypes per op; `chip`: named in messages.
void set_strict_mode(bool enabled, const std::vector<std::string>& native_ops, const std::vector<StrictRule>& rules,
                     const std::string& chip);
bool strict_mode_enabled();
std::vector<StrictFinding> strict_findings();
void clear_strict_findings();

}  // namespace torch_npu
