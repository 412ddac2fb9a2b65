// Types of torch_npu's operator-building API (OpCommand.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/SmallVector.h>

// GE's operator description (third_party/acl/inc/graph/operator.h declares
// the same, with the class); only the pointer type is needed here.
namespace ge {
class Operator;
using OperatorPtr = std::shared_ptr<Operator>;
}  // namespace ge

namespace at_npu {
namespace native {

// In an npu format, a shape has at most 8 dimensions.
constexpr int MAX_FORMAT_SHAPE_SIZE = 8;
using FormatShape = c10::SmallVector<int64_t, MAX_FORMAT_SHAPE_SIZE>;

// A dynamic-input CANN operator's inputs: (count, first index) per group,
// and the function that makes its graph-engine operator description.
using DyNumAndIndex = std::vector<std::pair<uint32_t, uint32_t>>;
using DynamicInputRegFunc = std::function<ge::OperatorPtr(DyNumAndIndex, std::string)>;

}  // namespace native
}  // namespace at_npu
