// The c10::Stream of a Python stream object: a torch.npu.Stream, or any
// object with stream_id and device_index (torch.Stream). TypeError naming
// `fn` for anything else; the stream id and device are checked.
#pragma once

#include <torch/csrc/utils/pybind.h>

#include <c10/core/Stream.h>

namespace torch_npu {

c10::Stream stream_of_object(const pybind11::handle& stream, const char* fn);

}  // namespace torch_npu
