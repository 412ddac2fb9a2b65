#include "csrc/launch/float_status.h"

#include <atomic>
#include <cstring>

#include "csrc/core/npu_error.h"
#include "csrc/launch/launch.h"
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

std::atomic<bool> g_overflow{false};

// Kernels that move or fill values without computing them: on the chip they
// run no arithmetic unit, so they never raise the flag (Note [Saturation
// mode's float status]). Matched as prefixes of the launched op's name.
constexpr const char* kMovesValues[] = {
    "copy", "_copy", "_to_copy", "fill_", "zero_", "masked_fill", "masked_scatter", "masked_select", "full",
    "cat", "stack", "index", "_index", "put", "take", "gather", "scatter", "where", "clone", "flip", "roll",
    "repeat", "tril", "triu", "constant_pad", "narrow", "select", "slice", "unfold", "resize_", "set_",
};

bool moves_values(const char* op) {
  if (std::strncmp(op, "aten::", 6) == 0) op += 6;  // boxed kernels name the operator in full
  for (const char* prefix : kMovesValues) {
    if (std::strncmp(op, prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

}  // namespace

bool saturation_mode() {
  static const bool saturation = with_torch_errors([] {
    vnpu::Runtime& runtime = vnpu::Runtime::instance();
    if (!runtime.init_error().empty()) throw vnpu::Error(vnpu::ErrorCode::kInvalidValue, runtime.init_error());
    return !runtime.inf_nan_mode();
  });
  return saturation;
}

void note_kernel_outputs(const char* op, const KernelOutputs& outputs) {
  if (g_overflow.load(std::memory_order_relaxed) || moves_values(op)) return;
  if (outputs.any_non_finite()) g_overflow.store(true, std::memory_order_relaxed);
}

void read_float_status(const at::Tensor& out, bool clear) {
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1 &&
                  (out.scalar_type() == at::kFloat || out.scalar_type() == at::kInt) && out.numel() == 8 &&
                  out.is_contiguous(),
              "the float status buffer should be a contiguous float32 or int32 npu tensor of 8 elements, got ",
              out.scalar_type(), " ", out.sizes(), " on ", out.device());
  LaunchSnapshot snap;
  launch(out.device().index(), "npu_get_float_status", {out}, snap, [out_ = snap.ref(out), clear]() {
    at::Tensor status = out_.view();
    status.zero_();
    const bool overflow = clear ? g_overflow.exchange(false) : g_overflow.load();
    if (overflow) status.narrow(0, 0, 1).fill_(1.0);
  });
}

}  // namespace torch_npu
