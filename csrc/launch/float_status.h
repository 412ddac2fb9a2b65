// The float status of saturation mode: the flag an Ascend chip's arithmetic
// units raise when a result overflows, which npu_get_float_status reads and
// AMP's unscale consults instead of scanning the gradients.
//
// Note [Saturation mode's float status]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// 910B-class chips compute with IEEE inf/nan by default; the 910A and 310P
// (and a 910B with INF_NAN_MODE_FORCE_DISABLE=1) run in saturation mode,
// where an overflow is recorded in a status register that programs poll
// (torch_npu.npu_get_float_status, old loss scalers, AMP's unscale in
// op-plugin). vNPU's kernels are ATen's CPU kernels and report nothing, so in
// saturation mode stage 2 looks at each computing kernel's floating outputs
// after it ran (KernelOutputs::any_non_finite) and raises the flag when one
// holds an inf or a nan. Kernels that only move or fill values (copies, fill_,
// masked_fill_, cat, index ...) never raise it, as on the chip, where the flag
// comes from the arithmetic units: an attention mask filled with -inf is not
// an overflow. The values themselves stay IEEE (the chip would clamp them to
// the dtype's largest finite value; vNPU keeps inf, which the flag reports).
// The scan costs a pass over each output, paid only in saturation mode.
//
// vNPU keeps one flag for the process (its devices share the host's
// arithmetic), raised and read in stream order: the kernels queued before a
// read have raised it by the time the read runs.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_npu {

class KernelOutputs;

// Whether the devices run in saturation mode (not torch_npu.npu.utils.is_support_inf_nan()).
// Makes the runtime (and raises its init error) on first call.
bool saturation_mode();

// Stage 2, after a kernel named `op` wrote `outputs` successfully.
void note_kernel_outputs(const char* op, const KernelOutputs& outputs);

// Queues on `out`'s device current stream: out (8 float32 or int32) becomes
// the status (1 in element 0 when an overflow was recorded, zeros else); with
// `clear` the flag is reset after it was read.
void read_float_status(const at::Tensor& out, bool clear);

}  // namespace torch_npu
