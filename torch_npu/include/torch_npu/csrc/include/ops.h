// What extensions include to write torch_npu operators (real torch_npu:
// op-plugin's generated op declarations plus the framework helpers). vNPU
// provides the framework helpers; torch_npu's own npu_* operators are
// reached through the dispatcher (c10::Dispatcher, "npu::<name>").
#pragma once

#include "torch_npu/csrc/aten/NPUNativeFunctions.h"
#include "torch_npu/csrc/core/npu/DeviceUtils.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include "torch_npu/csrc/framework/utils/OpAdapter.h"
#include "torch_npu/csrc/framework/utils/OpPreparation.h"
