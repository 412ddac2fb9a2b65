// What op-plugin style operator code includes: OpPreparation, OpCommand and
// the device helpers (real torch_npu's OpAdapter.h bundles the same).
#pragma once

#include "torch_npu/csrc/core/npu/DeviceUtils.h"
#include "torch_npu/csrc/core/npu/npu_log.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include "torch_npu/csrc/framework/utils/OpPreparation.h"
