// torch_npu's C++ API in one header (real torch_npu's csrc/libs/torch_npu.h):
// starting and stopping the NPU without Python (init_npu.h) and the npu
// operators torch_npu declares (NPUNativeFunctions.h).
#pragma once

#include "torch_npu/csrc/libs/init_npu.h"
#include "torch_npu/csrc/aten/NPUNativeFunctions.h"
