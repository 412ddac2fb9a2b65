// torch._lazy_clone on npu: a copy-on-write clone that shares the storage
// until either side is written.
//
// ATen's kernel (c10::impl::cow::lazy_clone_storage) can share only a
// storage whose DataPtr context is its data address; the caching allocator
// hands out DataPtrs whose context is the block. The storage is switched to
// the address-keyed form first (the same block, found by its address from
// then on), and ATen's kernel does the rest. A write to either side
// materialises a private copy through Allocator::clone, whose copy_data
// waits for the queued work first (npu_caching_allocator.cpp).
#include <ATen/core/Tensor.h>
#include <ATen/ops/_lazy_clone_native.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include "csrc/core/npu_caching_allocator.h"

namespace torch_npu {
namespace {

at::Tensor npu_lazy_clone(const at::Tensor& self) {
  make_address_keyed(*self.storage().unsafeGetStorageImpl());
  return at::native::_lazy_clone(self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_lazy_clone", TORCH_FN(npu_lazy_clone)); }

}  // namespace torch_npu
