// Copies between host and npu, and between npu devices (_copy_from), plus
// .item() (_local_scalar_dense).
//
// Every copy touching device memory is a task on a stream, so it is ordered
// with the kernels that produce or consume the data:
//   H2D: a blocking copy waits for the stream and copies on the caller (as
//        real torch_npu does); a non_blocking one is queued, reading pinned
//        memory in place or a clone of pageable memory taken at call time.
//   D2H: queued on the source's stream; the caller waits unless the copy is
//        non_blocking into pinned memory (then it completes asynchronously).
// A queued copy never holds the caller's host tensor: pinned memory is
// aliased and its use recorded with the pinned allocator (the block outlives
// its tensor until the copy ran), so a stream worker never drops the last
// reference to a Python-owned tensor.
//   D2D: same device: one task. Across devices: the destination stream first
//        waits for the source stream, the source stream then waits for the
//        copy, so neither side's memory is reused early.
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ExpandUtils.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include "csrc/core/npu_capture.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_recovery.h"
#include "csrc/core/npu_stream.h"
#include "csrc/core/host_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/ops/npu_format.h"
#include "csrc/launch/launch.h"
#include "csrc/launch/sync_point.h"
#include <vnpu/event.h>
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

bool is_npu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

bool is_pinned(const at::Tensor& t) {
  return t.device().is_cpu() && t.numel() > 0 && is_pinned_host_pointer(t.const_data_ptr());
}

// `from_pinned`: a non_blocking copy from pinned memory, which the task reads
// in place. `blocking`: the caller asked for a blocking copy (non_blocking
// false) and is not capturing a fused op's host constants.
//
// Note [A blocking copy to the device is done when it returns]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Real torch_npu (and CUDA) finish a blocking host-to-device copy before
// returning: the stream is synchronised, then the memory copied. Code
// relies on it: a tensor made by `.npu()` on one stream and then written on
// another (a side stream, a graph's capture stream) without a wait is
// correct there. A queued copy would race with that write, so a blocking
// copy waits for the stream and runs on the caller, reading the source in
// place (no staging clone needed). The wait is not a reported sync point
// (set_sync_debug_mode), as in real torch_npu. A non_blocking copy from
// pageable memory stays queued, from a private clone.
void copy_host_to_device(const at::Tensor& src, const at::Tensor& dst, bool from_pinned, bool blocking) {
  const c10::DeviceIndex device = dst.device().index();
  if (from_pinned) {
    LaunchSnapshot snap;
    launch(device, "copy_h2d", {dst}, snap, [src_ = snap.alias_host(src), dst_ = snap.ref(dst)]() {
      dst_.view().copy_(src_.view());
    });
    record_pinned_use(src.const_data_ptr(), current_stream(device));
    return;
  }
  if (blocking) {
    wait_for_current_stream(device);
    LaunchSnapshot snap;
    launch_on_caller("copy_h2d", {dst}, snap, [src_ = snap.alias_host(src), dst_ = snap.ref(dst)]() {
      dst_.view().copy_(src_.view());
    });
    return;
  }
  // A private clone, owned by the task alone (no Python object behind it).
  LaunchSnapshot snap;
  launch(device, "copy_h2d", {dst}, snap, [staged = src.clone(), dst_ = snap.ref(dst)]() {
    dst_.view().copy_(staged);
  });
}

// `into_pinned`: a non_blocking copy into pinned memory, which returns at
// once (else the caller waits for the copy).
//
// Note [A non_blocking copy to the host from an idle stream is done at once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On the device, a copy with nothing queued before it is finished by the DMA
// engine in microseconds, and programs read its destination without a sync
// and are right in practice: PyTorch's own ZeroRedundancyOptimizer moves the
// state it consolidates with `.to("cpu", non_blocking=True)` and pickles it
// at once. Queued on an idle stream here, the copy would wait for the
// worker to wake up while the host reads uninitialised memory. So when the
// source stream is idle (and not capturing) the copy runs on the caller, as
// a blocking one does; behind queued kernels it stays asynchronous. On the
// caller, a stream's earlier error raises at the call, as CUDA's copy
// returns the sticky error.
void copy_device_to_host(const at::Tensor& src, const at::Tensor& dst, bool into_pinned) {
  const c10::DeviceIndex device = src.device().index();
  LaunchSnapshot snap;
  auto copy = [src_ = snap.ref(src), dst_ = snap.alias_host(dst)]() { dst_.view().copy_(src_.view()); };
  const vnpu::Stream& stream = current_runtime_stream(device);
  if (into_pinned && stream.query() && !stream.capturing()) {
    wait_for_current_stream(device);  // idle: only raises an earlier kernel's error
    launch_on_caller("copy_d2h", {}, snap, std::move(copy));
    return;
  }
  launch(device, "copy_d2h", {}, snap, std::move(copy));
  if (into_pinned) {
    record_pinned_use(dst.const_data_ptr(), current_stream(device));
  } else {
    sync_current_stream(device);  // the caller's `dst` is alive until then
  }
}

// The profiler names device-to-device copies after the kernels real
// torch_npu launches for them (its trans-contiguous tests look for these
// names). It copies with a memcpy ("d2dCopyAsync") only when the two tensors
// have the same storage descriptor and the copy covers all of it; any other
// copy (strided, converting, or between views of storages of another shape,
// such as the clone of x.view(...)) is "aclnnInplaceCopy". torch_npu's
// descriptor holds the sizes of the tensor that made the storage and its
// format; vNPU's storages are ATen's, so those are the viewed tensor's sizes
// and its format tag.
c10::IntArrayRef storage_shape(const at::Tensor& t) { return t.is_view() ? t._base().sizes() : t.sizes(); }

bool copies_whole_storage_with_memcpy(const at::Tensor& src, const at::Tensor& dst) {
  return src.is_contiguous() && dst.is_contiguous() && src.scalar_type() == dst.scalar_type() &&
         src.sizes().equals(dst.sizes()) && src.storage_offset() == dst.storage_offset() &&
         src.storage().nbytes() == dst.storage().nbytes() && storage_shape(src).equals(storage_shape(dst)) &&
         get_npu_format(src) == get_npu_format(dst);
}

const char* d2d_copy_kernel_name(const at::Tensor& src, const at::Tensor& dst) {
  return copies_whole_storage_with_memcpy(src, dst) ? "d2dCopyAsync" : "aclnnInplaceCopy";
}

void copy_device_to_device(const at::Tensor& src, const at::Tensor& dst) {
  RECORD_FUNCTION(d2d_copy_kernel_name(src, dst), std::vector<c10::IValue>({src}));
  const c10::DeviceIndex src_device = src.device().index();
  const c10::DeviceIndex dst_device = dst.device().index();
  if (src_device == dst_device) {
    LaunchSnapshot snap;
    launch(dst_device, "copy_d2d", {dst}, snap, [src_ = snap.ref(src), dst_ = snap.ref(dst)]() {
      dst_.view().copy_(src_.view());
    });
    return;
  }
  vnpu::Stream& src_stream = current_runtime_stream(src_device);
  vnpu::Stream& dst_stream = current_runtime_stream(dst_device);
  with_torch_errors([&] {
    vnpu::Event src_ready;
    src_ready.record(src_stream);
    src_ready.block(dst_stream);
    LaunchSnapshot snap;
    launch(dst_device, "copy_d2d", {dst}, snap, [src_ = snap.ref(src), dst_ = snap.ref(dst)]() {
      dst_.view().copy_(src_.view());
    });
    vnpu::Event copy_done;
    copy_done.record(dst_stream);
    copy_done.block(src_stream);
  });
}

at::Tensor npu_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // copy_ hands npu copies to _copy_from before broadcasting: check here so
  // a bad shape fails at the call, not later on the stream.
  TORCH_CHECK(at::is_expandable_to(self.sizes(), dst.sizes()), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", self.sizes());
  if (dst.numel() == 0) return dst;
  if (C10_UNLIKELY(unsafe_data_checked())) {
    // A copy from safe data makes its destination safe (npu_recovery.h).
    if (is_npu(self)) check_npu_tensor_is_safe(self);
    if (is_npu(dst) && dst.has_storage()) mark_device_data_safe(dst.storage().data());
  }
  if (is_npu(self) && is_npu(dst)) {
    copy_device_to_device(self, dst);
  } else if (is_npu(dst)) {
    TORCH_CHECK(self.device().is_cpu(), "Copying from ", self.device(), " to npu is not supported");
    // A captured copy would replay the host data of capture time: refused,
    // except for a fused op's host constants (npu_capture.h) and, as in CUDA
    // graphs, a non_blocking copy from pinned memory, which each replay reads
    // anew (the memory must outlive the graph: a block pinned during the
    // capture does, in the graph's host pool).
    const bool constant = host_constants_capturable();
    const bool from_pinned = non_blocking && !constant && is_pinned(self);  // a constant is staged, never aliased
    if (!constant && !from_pinned) check_not_capturing(dst.device().index(), "a copy from host to device");
    copy_host_to_device(self, dst, from_pinned, /*blocking=*/!non_blocking && !constant);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "Copying from npu to ", dst.device(), " is not supported");
    // Captured only into pinned memory, non_blocking (each replay writes it), as in CUDA graphs.
    const bool into_pinned = non_blocking && is_pinned(dst);
    if (!into_pinned) check_not_capturing(self.device().index(), "a copy from device to host");
    copy_device_to_host(self, dst, into_pinned);
  }
  return dst;
}

at::Tensor npu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return npu_copy_from(self, dst, false);
}

at::Scalar npu_local_scalar_dense(const at::Tensor& self) {
  const c10::DeviceIndex device = self.device().index();
  sync_current_stream(device);
  at::AutoDispatchBelowADInplaceOrView no_autograd;
  return at::native::_local_scalar_dense_cpu(TensorRef(self).view());
}

}  // namespace

// _copy_from resolves lazy conjugate/negative bits itself (the CPU copy in
// stage 2 sees them on the views). Without these fallthroughs ATen's
// conjugate fallback would materialise the source with clone(), which calls
// copy_ -> _copy_from again, forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(npu_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(npu_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(npu_local_scalar_dense));
}

}  // namespace torch_npu
