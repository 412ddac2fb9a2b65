// Strict chip mode (torch.npu.set_check_mode(True)): vNPU runs every op, but
// a real chip does not. While strict mode is on, each op launched on npu (by
// any thread) is checked against what real torch_npu does on the selected
// chip:
//   - an op real torch_npu has no npu kernel for gets torch_npu's CPU-fallback
//     warning (once per op), and raises under TORCH_NPU_FALLBACK_CPU_DISABLE=1;
//   - a dtype the chip's kernels reject raises in aclnn's words.
// Every finding is also collected for a report.
//
// How (docs/strict_mode.md): strict mode is process-wide. Each launch path
// names its op: the boxed kernels by their OperatorHandle (StrictOpScope
// around the kernel, or passed), the hand-written ones by the aten name they
// launch under ("relu", "add.Tensor"). The ops real torch_npu implements but
// vNPU decomposes (scaled_dot_product_attention, matmul, ...) get a wrapper
// kernel while strict mode is on, which marks the thread as inside them:
// their launches are checked as theirs. No RecordFunction callback: that
// costs every dispatcher call, and the autograd engine's too.
#pragma once

#include <c10/macros/Macros.h>
#include <c10/util/ArrayRef.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace c10 {
struct IValue;
class OperatorHandle;
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

extern std::atomic<bool> g_strict_any;  // strict mode is on

// Checks a launch (npu_dtypes: 1 << ScalarType per npu tensor); raises as the
// chip would refuse it, warns as it would fall back. `op_name`: the aten op
// a hand-written kernel launches under ("relu", "add.Tensor"; "aten::" implied);
// inside a StrictOpScope the scope's op is used instead.
void strict_check_launch(const char* op_name, uint64_t npu_dtypes);
void strict_check_op(const c10::OperatorHandle& op, uint64_t npu_dtypes);
inline void check_strict_mode(const char* op_name, uint64_t npu_dtypes) {
  if (C10_UNLIKELY(g_strict_any.load(std::memory_order_relaxed))) strict_check_launch(op_name, npu_dtypes);
}
inline void check_strict_mode(const c10::OperatorHandle& op, uint64_t npu_dtypes) {
  if (C10_UNLIKELY(g_strict_any.load(std::memory_order_relaxed))) strict_check_op(op, npu_dtypes);
}

// Around a boxed kernel: the launches it makes are `op`'s.
class StrictOpScope {
 public:
  explicit StrictOpScope(const c10::OperatorHandle& op) {
    if (C10_UNLIKELY(g_strict_any.load(std::memory_order_relaxed))) enter(op);
  }
  ~StrictOpScope() {
    if (C10_UNLIKELY(entered_)) leave();
  }
  StrictOpScope(const StrictOpScope&) = delete;
  StrictOpScope& operator=(const StrictOpScope&) = delete;

 private:
  void enter(const c10::OperatorHandle& op);
  void leave();
  bool entered_ = false;
  const c10::OperatorHandle* previous_ = nullptr;
};

// The npu dtype mask of a boxed call's arguments (synchronous path, fallback).
uint64_t npu_dtypes_of(c10::ArrayRef<c10::IValue> args);

// `native_ops`: "name.overload" ("aten::" implied) real torch_npu implements;
// `rules`: rejected dtypes per op; `chip`: named in messages. Registers (on)
// or removes (off) the wrappers of the ops real torch_npu implements and
// vNPU decomposes; call it with the device idle.
void set_strict_mode(bool enabled, const std::vector<std::string>& native_ops, const std::vector<StrictRule>& rules,
                     const std::string& chip);
bool strict_mode_enabled();
// True while strict mode's wrapper is `op`'s npu kernel (op_route.cpp).
bool strict_mode_wraps(const c10::OperatorHandle& op);
std::vector<StrictFinding> strict_findings();
void clear_strict_findings();

}  // namespace torch_npu
