// at_npu::native::from_blob (from_blob.h): npu tensors over npu memory the
// caller owns.
#include <c10/core/TensorImpl.h>

#include "csrc/api/acl_memory.h"
#include "csrc/api/npu_from_blob.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "torch_npu/csrc/aten/common/from_blob.h"

namespace at_npu {
namespace native {

at::Tensor TensorMaker::make_tensor() {
  TORCH_CHECK_VALUE(!strides_ || strides_->size() == sizes_.size(), "from_blob: expected ", sizes_.size(),
                    " strides for sizes ", sizes_, ", got ", *strides_);
  for (int64_t size : sizes_) TORCH_CHECK_VALUE(size >= 0, "from_blob: sizes must be non-negative, got ", sizes_);
  c10::Device device(c10::DeviceType::PrivateUse1, torch_npu::current_device());
  if (device_.has_value()) {
    device = *device_;
  } else if (opts_.has_device() && opts_.device().type() == c10::DeviceType::PrivateUse1) {
    device = opts_.device();
  }
  TORCH_CHECK_VALUE(device.type() == c10::DeviceType::PrivateUse1, "from_blob: the target device must be npu, got ",
                    device);
  if (!device.has_index()) device = c10::Device(device.type(), torch_npu::current_device());
  torch_npu::check_device_index(device.index());

  const int64_t itemsize = static_cast<int64_t>(opts_.dtype().itemsize());
  const int64_t offset = storage_offset_.value_or(0);
  TORCH_CHECK_VALUE(offset >= 0, "from_blob: storage_offset must be non-negative, got ", offset);
  // Elements reached: the last one's index plus one (none for an empty tensor).
  int64_t elements = 1;
  std::vector<int64_t> strides;
  if (strides_) {
    strides.assign(strides_->begin(), strides_->end());
  } else {
    strides.resize(sizes_.size());
    int64_t stride = 1;
    for (size_t i = sizes_.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= std::max<int64_t>(sizes_[i], 1);
    }
  }
  for (size_t i = 0; i < sizes_.size(); ++i) {
    if (sizes_[i] == 0) {
      elements = 0;
      break;
    }
    elements += (sizes_[i] - 1) * strides[i];
  }
  const size_t nbytes = static_cast<size_t>((elements == 0 ? 0 : offset + elements) * itemsize);

  if (nbytes > 0) {
    void* base = nullptr;
    size_t bytes = 0;
    int owner = -1;
    TORCH_CHECK_VALUE(torch_npu::acl::npu_allocation_containing(data_, &base, &bytes, &owner) &&
                          owner == device.index(),
                      "from_blob: data is not npu memory of ", device,
                      " (pass memory of an npu tensor or from aclrtMalloc)");
    const size_t reach = static_cast<size_t>(static_cast<char*>(data_) - static_cast<char*>(base)) + nbytes;
    TORCH_CHECK_VALUE(reach <= bytes, "from_blob: the tensor would span ", nbytes, " bytes from data, past the end of "
                      "its npu allocation of ", bytes, " bytes");
  }

  c10::DataPtr data_ptr = deleter_ ? c10::InefficientStdFunctionContext::makeDataPtr(data_, deleter_, device)
                                   : c10::DataPtr(data_, device);
  c10::Storage storage(c10::Storage::use_byte_size_t{}, nbytes, std::move(data_ptr), allocator_,
                       /*resizable=*/allocator_ != nullptr);
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), opts_.dtype());
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(sizes_, strides, offset);
  return tensor;
}

}  // namespace native
}  // namespace at_npu

namespace torch_npu {

at::Tensor npu_tensor_over_memory(void* data, const std::vector<int64_t>& sizes, at::ScalarType dtype,
                                  c10::DeviceIndex device) {
  return at_npu::native::from_blob(data, sizes,
                                   at::TensorOptions().dtype(dtype).device(c10::DeviceType::PrivateUse1, device));
}

}  // namespace torch_npu
