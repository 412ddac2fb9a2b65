// What the RecordFunction callbacks of csrc/api (operator hooks, the
// op_plugin log) ask of an operator's inputs.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <algorithm>

namespace torch_npu {

// Whether an operator got an npu tensor among its (top-level) inputs: only
// those operators are the npu's to hook or log.
inline bool has_npu_tensor_input(c10::ArrayRef<c10::IValue> inputs) {
  return std::any_of(inputs.begin(), inputs.end(), [](const c10::IValue& value) {
    return value.isTensor() && value.toTensor().defined() &&
           value.toTensor().device().type() == c10::DeviceType::PrivateUse1;
  });
}

}  // namespace torch_npu
