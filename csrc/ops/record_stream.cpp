// Tensor.record_stream(stream): the block may not be reused before `stream`
// has passed its current work (the caching allocator's record_stream).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_error.h"

namespace torch_npu {
namespace {

void record_stream_kernel(at::Tensor& self, c10::Stream stream) {
  NPU_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
            "record_stream: expected an npu stream, got a stream of device ", stream.device());
  record_stream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", &record_stream_kernel); }

}  // namespace
}  // namespace torch_npu
