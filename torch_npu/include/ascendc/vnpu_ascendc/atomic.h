// Ascend C on the virtual NPU: atomic accumulation into global memory.
//
// Models: SetAtomicAdd<T> / SetAtomicMax<T> / SetAtomicMin<T> / SetAtomicType<T>,
// SetAtomicNone / DisableDmaAtomic. While a mode is set, every copy of this block into
// GM (DataCopy, DataCopyPad, Fixpipe, Matmul output) combines each element with the
// value already in GM instead of overwriting it, element by element and atomically
// with respect to every other block: blocks of one kernel may accumulate into the same
// GM bytes concurrently (multi-core partial sums). The element type of the copy must
// be the atomic type the mode was set with.
// Does not model: the order in which blocks' additions land (like the device, the sum
// of floats from several blocks may differ in the last bits from run to run).
#ifndef VNPU_ASCENDC_ATOMIC_H
#define VNPU_ASCENDC_ATOMIC_H

#include <cstdint>
#include <cstring>
#include <mutex>

#include "block_context.h"
#include "types.h"

namespace vnpu {
namespace ascendc {
namespace detail {

// Atomic stores lock a stripe per 4 KiB page of GM: blocks writing different pages do
// not contend, blocks writing the same element always take the same lock.
constexpr size_t kAtomicPageBytes = 4096;
constexpr size_t kAtomicStripes = 64;

inline std::mutex& AtomicStripe(uintptr_t address) {
  static std::mutex stripes[kAtomicStripes];
  return stripes[(address / kAtomicPageBytes) % kAtomicStripes];
}

template <typename T>
inline T CombineAtomic(AtomicOp op, T old_value, T value) {
  using C = typename ComputeType<T>::type;
  C a = static_cast<C>(old_value);
  C b = static_cast<C>(value);
  switch (op) {
    case AtomicOp::kAdd: return static_cast<T>(a + b);
    case AtomicOp::kMax: return static_cast<T>(a > b ? a : b);
    case AtomicOp::kMin: return static_cast<T>(a < b ? a : b);
    default: return value;
  }
}

// Stores count elements into GM at dst, honouring the block's atomic mode. `what`
// names the copy for errors.
template <typename T>
inline void StoreToGm(T* dst, const T* src, size_t count, const char* what) {
  BlockContext& ctx = CurrentBlock(what);
  if (ctx.atomic_op == AtomicOp::kNone) {
    std::memcpy(dst, src, count * sizeof(T));
    return;
  }
  if (std::strcmp(ctx.atomic_type, TypeName<T>()) != 0) {
    Fail(Str(what, ": the atomic mode was set for ", ctx.atomic_type, " but the copy moves ", TypeName<T>(),
             " elements; call SetAtomicAdd<", TypeName<T>(), ">() (or SetAtomicNone()) first"));
  }
  size_t i = 0;
  while (i < count) {
    uintptr_t address = reinterpret_cast<uintptr_t>(dst + i);
    size_t page_left = (kAtomicPageBytes - address % kAtomicPageBytes + sizeof(T) - 1) / sizeof(T);
    size_t n = count - i < page_left ? count - i : page_left;
    std::lock_guard<std::mutex> lock(AtomicStripe(address));
    for (size_t j = i; j < i + n; ++j) dst[j] = CombineAtomic<T>(ctx.atomic_op, dst[j], src[j]);
    i += n;
  }
}

template <typename T>
inline void SetAtomic(AtomicOp op, const char* api) {
  BlockContext& ctx = CurrentBlock(api);
  ctx.atomic_op = op;
  ctx.atomic_type = TypeName<T>();
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

template <typename T>
inline void SetAtomicAdd() {
  vnpu::ascendc::detail::SetAtomic<T>(vnpu::ascendc::detail::AtomicOp::kAdd, "SetAtomicAdd");
}
template <typename T>
inline void SetAtomicMax() {
  vnpu::ascendc::detail::SetAtomic<T>(vnpu::ascendc::detail::AtomicOp::kMax, "SetAtomicMax");
}
template <typename T>
inline void SetAtomicMin() {
  vnpu::ascendc::detail::SetAtomic<T>(vnpu::ascendc::detail::AtomicOp::kMin, "SetAtomicMin");
}
// Changes the element type of the current atomic mode.
template <typename T>
inline void SetAtomicType() {
  vnpu::ascendc::detail::CurrentBlock("SetAtomicType").atomic_type = vnpu::ascendc::detail::TypeName<T>();
}
inline void SetAtomicNone() {
  vnpu::ascendc::detail::CurrentBlock("SetAtomicNone").atomic_op = vnpu::ascendc::detail::AtomicOp::kNone;
}
inline void DisableDmaAtomic() { SetAtomicNone(); }

}  // namespace AscendC

#endif  // VNPU_ASCENDC_ATOMIC_H
