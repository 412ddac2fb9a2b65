// Ascend C on the virtual NPU: GlobalTensor, a typed view of global memory (GM).
//
// Models: SetGlobalBuffer / GetPhyAddr / GetValue / SetValue / operator[] /
// operator() / GetSize / ReinterpretCast as kernels use them, and -- when the
// launch's VnpuKernelEnv.bounds_check is on -- a bounds check of every access made
// through the API (DataCopy, DataCopyPad, GetValue, SetValue, Matmul, Fixpipe)
// against the device allocation that contains the tensor's start address, found
// once per SetGlobalBuffer with vnpuGmRegionOf(). An access outside it is a
// KernelError naming the access, the offset and the allocation's size.
// Does not model: the L2 cache (SetL2CacheHint is accepted and ignored); accesses
// through raw __gm__ pointers are not checked (they are plain host loads).
// The declared size of SetGlobalBuffer is kept for GetSize(); like the device we do
// not fail an access past it, only one past the allocation.
#ifndef VNPU_ASCENDC_GLOBAL_TENSOR_H
#define VNPU_ASCENDC_GLOBAL_TENSOR_H

#include <cstddef>
#include <cstdint>

#include "block_context.h"
#include "types.h"

namespace vnpu {
namespace ascendc {
namespace detail {

// The allocation a GlobalTensor's start address lies in, found once.
struct GmRegion {
  const uint8_t* base = nullptr;
  size_t size = 0;
  bool checked = false;  // bounds checking was on when the tensor was set
  bool known = false;    // the start address lies in a live allocation
};

inline GmRegion LookUpGmRegion(const void* p) {
  GmRegion r;
  BlockContext* ctx = tls_block;
  if (ctx == nullptr || !ctx->env->bounds_check) return r;
  r.checked = true;
  // First the allocations the launch's arguments lay in when it was launched.
  const uint8_t* q = static_cast<const uint8_t*>(p);
  for (size_t i = 0; q != nullptr && i < ctx->launch_region_count; ++i) {
    const GmLaunchRegion& region = ctx->launch_regions[i];
    if (q >= region.base && q < region.base + region.size) {
      r.known = true;
      r.base = region.base;
      r.size = region.size;
      return r;
    }
  }
  const void* base = nullptr;
  size_t size = 0;
  if (p != nullptr && vnpuGmRegionOf(p, &base, &size) == 0) {
    r.known = true;
    r.base = static_cast<const uint8_t*>(base);
    r.size = size;
  }
  return r;
}

// Fails unless [p, p + bytes) lies inside `region`. `what` names the access.
inline void CheckGmRange(const GmRegion& region, const void* p, size_t bytes, const char* what) {
  if (!region.checked || bytes == 0) return;
  const uint8_t* q = static_cast<const uint8_t*>(p);
  if (!region.known) {
    Fail(Str(what, ": GM address ", p,
             " is not inside any device allocation (bounds checking is on); pass the kernel pointers "
             "that the device allocator returned"));
  }
  const uint8_t* end = region.base + region.size;
  if (q < region.base || q > end || static_cast<size_t>(end - q) < bytes) {
    long long offset = static_cast<long long>(q - region.base);
    Fail(Str(what, ": GM access out of bounds: bytes [", offset, ", ", offset + static_cast<long long>(bytes),
             ") of an allocation of ", region.size, " bytes (base ", static_cast<const void*>(region.base), ")"));
  }
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

template <typename T>
class GlobalTensor {
 public:
  using PrimType = T;

  GlobalTensor() = default;

  // Points this tensor at `buffer` (bufferSize elements, for GetSize()).
  void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize) {
    address_ = buffer;
    size_ = bufferSize;
    region_ = vnpu::ascendc::detail::LookUpGmRegion(buffer);
  }
  void SetGlobalBuffer(__gm__ T* buffer) { SetGlobalBuffer(buffer, 0); }

  __gm__ T* GetPhyAddr() const { return address_; }
  __gm__ T* GetPhyAddr(uint64_t offset) const { return address_ + offset; }
  uint64_t GetSize() const { return size_; }

  T GetValue(uint64_t offset) const {
    Check(offset, 1, "GlobalTensor::GetValue");
    return address_[offset];
  }
  void SetValue(uint64_t offset, T value) {
    Check(offset, 1, "GlobalTensor::SetValue");
    address_[offset] = value;
  }
  // A reference to element `offset` (checked like GetValue).
  __gm__ T& operator()(uint64_t offset) const {
    Check(offset, 1, "GlobalTensor::operator()");
    return address_[offset];
  }

  // The tensor starting `offset` elements further (same allocation).
  GlobalTensor operator[](uint64_t offset) const {
    GlobalTensor r = *this;
    r.address_ = address_ + offset;
    r.size_ = size_ > offset ? size_ - offset : 0;
    return r;
  }

  template <typename U>
  GlobalTensor<U> ReinterpretCast() const {
    GlobalTensor<U> r;
    r.SetFromOther(reinterpret_cast<__gm__ U*>(address_), size_ * sizeof(T) / sizeof(U), region_);
    return r;
  }

  void SetL2CacheHint(int /*mode*/) {}
  template <typename Mode>
  void SetL2CacheHint(Mode) {}

  // vNPU: fails unless elements [offset, offset + count) lie in the tensor's allocation.
  void Check(uint64_t offset, uint64_t count, const char* what) const {
    vnpu::ascendc::detail::CheckGmRange(region_, address_ + offset, count * sizeof(T), what);
  }
  const vnpu::ascendc::detail::GmRegion& Region() const { return region_; }
  void SetFromOther(__gm__ T* address, uint64_t size, const vnpu::ascendc::detail::GmRegion& region) {
    address_ = address;
    size_ = size;
    region_ = region;
  }

 private:
  __gm__ T* address_ = nullptr;
  uint64_t size_ = 0;
  vnpu::ascendc::detail::GmRegion region_;
};

}  // namespace AscendC

#endif  // VNPU_ASCENDC_GLOBAL_TENSOR_H
