// torch_npu's native functions for extensions. Real torch_npu generates one
// static member per npu kernel; vNPU declares the free functions extensions
// call (NPUFormat.h: npu_format_cast, empty_with_format, get_npu_format ...)
// and leaves every other operator to the dispatcher (at::..., or
// c10::Dispatcher for torch.ops.npu.*).
#pragma once

#include "torch_npu/csrc/core/npu/NPUFormat.h"
