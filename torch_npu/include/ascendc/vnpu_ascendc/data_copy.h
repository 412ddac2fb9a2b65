// Ascend C on the virtual NPU: DataCopy and DataCopyPad, the DMA between GM and local memory.
//
// Models: contiguous DataCopy (GM->UB/L1, UB/L1->GM, UB->UB by element count),
// strided DataCopy with DataCopyParams (blockCount blocks of blockLen 32-byte units,
// srcGap/dstGap 32-byte units between them), and DataCopyPad for lengths that are not
// multiples of 32 bytes (DataCopyExtParams: blockLen and the GM-side stride in bytes,
// the UB-side stride in 32-byte units; DataCopyPadExtParams: left/right padding in
// elements, padding value), with the device's rules:
//  - DataCopy moves whole 32-byte blocks: count * sizeof(T) must be a multiple of 32,
//    and the device rounds an unaligned length down; local addresses must be 32-byte
//    aligned and GM addresses aligned to sizeof(T). Breaking these is an error in
//    strict mode and otherwise a warning (once per kernel), after which the copy goes
//    on as the device would (rounded down).
//  - DataCopyPad GM->UB pads each block to 32 bytes in UB; UB->GM writes exactly
//    blockLen bytes per block.
//  - every copy stays inside its LocalTensor (error) and, with bounds checking on,
//    inside the GM allocation (error); copies into GM honour the atomic mode (atomic.h).
// Does not model: the MTE pipes running asynchronously (the copy is complete when the
// call returns), the dummy bytes DataCopyPad leaves when padding without isPad (vNPU
// leaves those bytes unchanged, except that with no left/right padding it repeats the
// block's first element as the device does), slice/NDDMA copies and GM->L1 Nd2Nz copies
// other than those cube.h provides.
#ifndef VNPU_ASCENDC_DATA_COPY_H
#define VNPU_ASCENDC_DATA_COPY_H

#include <cstdint>
#include <cstring>

#include "atomic.h"
#include "block_context.h"
#include "global_tensor.h"
#include "local_tensor.h"
#include "positions.h"

namespace AscendC {

constexpr uint16_t DEFAULT_DATA_COPY_NBURST = 1;
constexpr uint16_t DEFAULT_DATA_COPY_STRIDE = 0;

struct DataCopyParams {
  DataCopyParams() {}
  DataCopyParams(uint16_t count, uint16_t len, uint16_t srcStrideIn, uint16_t dstStrideIn)
      : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
  uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
  uint16_t blockLen = 0;
  union {
    uint16_t srcGap = 0;
    uint16_t srcStride;
  };
  union {
    uint16_t dstGap = 0;
    uint16_t dstStride;
  };
};

struct DataCopyExtParams {
  DataCopyExtParams() {}
  DataCopyExtParams(uint16_t count, uint32_t len, uint32_t srcStrideIn, uint32_t dstStrideIn, uint32_t rsvIn)
      : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn), rsv(rsvIn) {}
  uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
  uint32_t blockLen = 0;
  uint32_t srcStride = DEFAULT_DATA_COPY_STRIDE;
  uint32_t dstStride = DEFAULT_DATA_COPY_STRIDE;
  uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
  DataCopyPadExtParams() {}
  DataCopyPadExtParams(bool isPadValue, uint8_t leftPadValue, uint8_t rightPadValue, T padValue)
      : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
  bool isPad = false;
  uint8_t leftPadding = 0;
  uint8_t rightPadding = 0;
  T paddingValue = 0;
};

// The older padding parameters (DataCopyPad with DataCopyParams, blockLen in bytes).
struct DataCopyPadParams {
  DataCopyPadParams() {}
  DataCopyPadParams(bool isPadValue, uint8_t leftPadValue, uint8_t rightPadValue, uint64_t padValue)
      : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
  bool isPad = false;
  uint8_t leftPadding = 0;
  uint8_t rightPadding = 0;
  uint64_t paddingValue = 0;
};

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

constexpr uint32_t kBlockBytes = 32;

inline uint64_t AlignUp32(uint64_t n) { return (n + kBlockBytes - 1) / kBlockBytes * kBlockBytes; }

// Where a local position's memory begins, to express addresses as offsets in it.
inline const uint8_t* LocalBase(AscendC::TPosition pos) {
  return CurrentBlock("DataCopy").MemoryOf(AscendC::GetPhyType(pos));
}

template <typename T>
inline void CheckLocalAligned(const AscendC::LocalTensor<T>& t, const char* what) {
  const uint8_t* base = LocalBase(t.Position());
  uintptr_t offset = reinterpret_cast<uintptr_t>(t.Data()) - reinterpret_cast<uintptr_t>(base);
  if (offset % kBlockBytes != 0) {
    StrictOrWarn("DataCopy alignment",
                 Str(what, ": the ", PositionName(t.Position()), " address is at byte offset ", offset, " of ",
                     HardwareName(AscendC::GetPhyType(t.Position())), ", which is not 32-byte aligned"));
  }
}

template <typename T>
inline void CheckGmAligned(const T* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) {
    StrictOrWarn("DataCopy alignment", Str(what, ": the GM address ", static_cast<const void*>(p),
                                           " is not aligned to sizeof(", TypeName<T>(), ")"));
  }
}

// Elements a contiguous DataCopy of `count` moves: count rounded down to whole 32-byte
// blocks, with the misalignment reported under the strict/warn policy.
template <typename T>
inline uint64_t AlignedCount(uint32_t count, const char* what) {
  uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T);
  if (bytes % kBlockBytes == 0) return count;
  uint64_t kept = bytes / kBlockBytes * kBlockBytes;
  StrictOrWarn("DataCopy alignment",
               Str(what, ": count ", count, " of ", TypeName<T>(), " is ", bytes,
                   " bytes, not a multiple of 32; the device copies only ", kept,
                   " bytes (rounded down to 32-byte blocks) -- use DataCopyPad for unaligned lengths"));
  return kept / sizeof(T);
}

template <typename T>
inline void CheckLocalExtent(const AscendC::LocalTensor<T>& t, uint64_t bytes, const char* what, const char* role) {
  if (bytes > t.GetLength()) {
    Fail(Str(what, ": the copy reaches ", bytes, " bytes into the ", role, " ", PositionName(t.Position()),
             " tensor, which has only ", t.GetLength(), " bytes (", t.GetSize(), " elements of ", TypeName<T>(), ")"));
  }
}

inline bool IsUbOrL1(AscendC::TPosition p) {
  AscendC::Hardware h = AscendC::GetPhyType(p);
  return h == AscendC::Hardware::UB || h == AscendC::Hardware::L1;
}

inline void CheckPath(bool ok, const char* what, AscendC::TPosition local) {
  if (!ok) {
    Fail(Str(what, ": a ", PositionName(local), " tensor cannot be the local side of this copy on 910B "
             "(GM<->UB and GM->L1 only; L1->L0 is LoadData, L0C->GM is Fixpipe)"));
  }
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

// GM -> local, `count` elements.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopy GM->local";
  d::CheckPath(d::IsUbOrL1(dst.Position()), what, dst.Position());
  d::CheckLocalAligned(dst, what);
  d::CheckGmAligned(src.GetPhyAddr(), what);
  uint64_t n = d::AlignedCount<T>(count, what);
  d::CheckLocalExtent(dst, n * sizeof(T), what, "destination");
  src.Check(0, n, what);
  std::memcpy(dst.Data(), src.GetPhyAddr(), n * sizeof(T));
}

// local -> GM, `count` elements.
template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopy local->GM";
  d::CheckPath(d::IsUbOrL1(src.Position()), what, src.Position());
  d::CheckLocalAligned(src, what);
  d::CheckGmAligned(dst.GetPhyAddr(), what);
  uint64_t n = d::AlignedCount<T>(count, what);
  d::CheckLocalExtent(src, n * sizeof(T), what, "source");
  dst.Check(0, n, what);
  d::StoreToGm(dst.GetPhyAddr(), src.Data(), n, what);
}

// local -> local (UB -> UB), `count` elements.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopy local->local";
  d::CheckLocalAligned(dst, what);
  d::CheckLocalAligned(src, what);
  uint64_t n = d::AlignedCount<T>(count, what);
  d::CheckLocalExtent(dst, n * sizeof(T), what, "destination");
  d::CheckLocalExtent(src, n * sizeof(T), what, "source");
  std::memmove(dst.Data(), src.Data(), n * sizeof(T));
}

// GM -> local in blockCount blocks of blockLen 32-byte units, gaps in 32-byte units.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopy GM->local (DataCopyParams)";
  d::CheckPath(d::IsUbOrL1(dst.Position()), what, dst.Position());
  d::CheckLocalAligned(dst, what);
  d::CheckGmAligned(src.GetPhyAddr(), what);
  uint64_t block = static_cast<uint64_t>(p.blockLen) * d::kBlockBytes;
  if (p.blockCount == 0 || block == 0) return;
  uint64_t src_pitch = block + static_cast<uint64_t>(p.srcGap) * d::kBlockBytes;
  uint64_t dst_pitch = block + static_cast<uint64_t>(p.dstGap) * d::kBlockBytes;
  d::CheckLocalExtent(dst, dst_pitch * (p.blockCount - 1) + block, what, "destination");
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src.GetPhyAddr());
  src.Check(0, (src_pitch * (p.blockCount - 1) + block) / sizeof(T), what);
  uint8_t* t = reinterpret_cast<uint8_t*>(dst.Data());
  for (uint16_t i = 0; i < p.blockCount; ++i) std::memcpy(t + i * dst_pitch, s + i * src_pitch, block);
}

// local -> GM in blocks.
template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopy local->GM (DataCopyParams)";
  d::CheckPath(d::IsUbOrL1(src.Position()), what, src.Position());
  d::CheckLocalAligned(src, what);
  d::CheckGmAligned(dst.GetPhyAddr(), what);
  uint64_t block = static_cast<uint64_t>(p.blockLen) * d::kBlockBytes;
  if (p.blockCount == 0 || block == 0) return;
  uint64_t src_pitch = block + static_cast<uint64_t>(p.srcGap) * d::kBlockBytes;
  uint64_t dst_pitch = block + static_cast<uint64_t>(p.dstGap) * d::kBlockBytes;
  d::CheckLocalExtent(src, src_pitch * (p.blockCount - 1) + block, what, "source");
  dst.Check(0, (dst_pitch * (p.blockCount - 1) + block) / sizeof(T), what);
  uint8_t* g = reinterpret_cast<uint8_t*>(dst.GetPhyAddr());
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src.Data());
  for (uint16_t i = 0; i < p.blockCount; ++i) {
    d::StoreToGm(reinterpret_cast<T*>(g + i * dst_pitch), reinterpret_cast<const T*>(s + i * src_pitch),
                 block / sizeof(T), what);
  }
}

// local -> local in blocks.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopy local->local (DataCopyParams)";
  d::CheckLocalAligned(dst, what);
  d::CheckLocalAligned(src, what);
  uint64_t block = static_cast<uint64_t>(p.blockLen) * d::kBlockBytes;
  if (p.blockCount == 0 || block == 0) return;
  uint64_t src_pitch = block + static_cast<uint64_t>(p.srcGap) * d::kBlockBytes;
  uint64_t dst_pitch = block + static_cast<uint64_t>(p.dstGap) * d::kBlockBytes;
  d::CheckLocalExtent(dst, dst_pitch * (p.blockCount - 1) + block, what, "destination");
  d::CheckLocalExtent(src, src_pitch * (p.blockCount - 1) + block, what, "source");
  uint8_t* t = reinterpret_cast<uint8_t*>(dst.Data());
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src.Data());
  for (uint16_t i = 0; i < p.blockCount; ++i) std::memmove(t + i * dst_pitch, s + i * src_pitch, block);
}

// GM -> UB, blocks of any byte length; each lands 32-byte aligned in UB with padding.
template <typename T>
inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                        const DataCopyPadExtParams<T>& pad) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopyPad GM->local";
  d::CheckPath(d::IsUbOrL1(dst.Position()), what, dst.Position());
  d::CheckLocalAligned(dst, what);
  if (p.blockLen % sizeof(T) != 0) {
    d::Fail(d::Str(what, ": blockLen is ", p.blockLen, " bytes, which must be a multiple of sizeof(", d::TypeName<T>(),
                   ") = ", sizeof(T)));
  }
  if (pad.leftPadding * sizeof(T) > d::kBlockBytes || pad.rightPadding * sizeof(T) > d::kBlockBytes) {
    d::Fail(d::Str(what, ": leftPadding ", int(pad.leftPadding), " / rightPadding ", int(pad.rightPadding),
                   " elements exceed 32 bytes"));
  }
  if (p.blockCount == 0) return;
  const uint64_t left = pad.leftPadding, right = pad.rightPadding, elems = p.blockLen / sizeof(T);
  const uint64_t slot = d::AlignUp32((left + elems + right) * sizeof(T));
  const uint64_t dst_pitch = slot + static_cast<uint64_t>(p.dstStride) * d::kBlockBytes;
  const uint64_t src_pitch = static_cast<uint64_t>(p.blockLen) + p.srcStride;
  d::CheckLocalExtent(dst, dst_pitch * (p.blockCount - 1) + slot, what, "destination");
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src.GetPhyAddr());
  uint8_t* t = reinterpret_cast<uint8_t*>(dst.Data());
  for (uint16_t i = 0; i < p.blockCount; ++i) {
    const T* from = reinterpret_cast<const T*>(s + i * src_pitch);
    T* to = reinterpret_cast<T*>(t + i * dst_pitch);
    d::CheckGmRange(src.Region(), from, p.blockLen, what);
    if (pad.isPad) {
      for (uint64_t k = 0; k < left; ++k) to[k] = pad.paddingValue;
      for (uint64_t k = 0; k < right; ++k) to[left + elems + k] = pad.paddingValue;
    }
    std::memcpy(to + left, from, p.blockLen);
    const uint64_t used = left + elems + right, slot_elems = slot / sizeof(T);
    if (left == 0 && right == 0 && elems > 0) {
      for (uint64_t k = used; k < slot_elems; ++k) to[k] = from[0];  // the device's dummy: the first element
    } else if (pad.isPad) {
      for (uint64_t k = used; k < slot_elems; ++k) to[k] = pad.paddingValue;
    }
  }
}

// UB -> GM, blocks of any byte length (each read from a 32-byte aligned UB slot).
template <typename T>
inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
  namespace d = vnpu::ascendc::detail;
  const char* what = "DataCopyPad local->GM";
  d::CheckPath(d::IsUbOrL1(src.Position()), what, src.Position());
  d::CheckLocalAligned(src, what);
  if (p.blockLen % sizeof(T) != 0) {
    d::Fail(d::Str(what, ": blockLen is ", p.blockLen, " bytes, which must be a multiple of sizeof(", d::TypeName<T>(),
                   ") = ", sizeof(T)));
  }
  if (p.blockCount == 0) return;
  const uint64_t slot = d::AlignUp32(p.blockLen);
  const uint64_t src_pitch = slot + static_cast<uint64_t>(p.srcStride) * d::kBlockBytes;
  const uint64_t dst_pitch = static_cast<uint64_t>(p.blockLen) + p.dstStride;
  d::CheckLocalExtent(src, src_pitch * (p.blockCount - 1) + p.blockLen, what, "source");
  uint8_t* g = reinterpret_cast<uint8_t*>(dst.GetPhyAddr());
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src.Data());
  for (uint16_t i = 0; i < p.blockCount; ++i) {
    T* to = reinterpret_cast<T*>(g + i * dst_pitch);
    d::CheckGmRange(dst.Region(), to, p.blockLen, what);
    d::StoreToGm(to, reinterpret_cast<const T*>(s + i * src_pitch), p.blockLen / sizeof(T), what);
  }
}

// The older DataCopyPad forms: DataCopyParams with blockLen in bytes.
template <typename T>
inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p,
                        const DataCopyPadParams& pad) {
  DataCopyExtParams ext(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0);
  DataCopyPadExtParams<T> padExt(pad.isPad, pad.leftPadding, pad.rightPadding,
                                 static_cast<T>(static_cast<float>(pad.paddingValue)));
  DataCopyPad(dst, src, ext, padExt);
}
template <typename T>
inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
  DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0));
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_DATA_COPY_H
