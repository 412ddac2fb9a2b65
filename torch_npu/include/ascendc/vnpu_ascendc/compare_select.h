// Ascend C on the virtual NPU: Compare / Compares (to a bit mask) and Select (by a bit mask).
//
// Models: Compare(dst, src0, src1, cmpMode, count) and Compares(dst, src0, scalar, ...)
// writing one bit per element (element i is bit i % 8 of byte i / 8 of dst) for CMPMODE
// LT/GT/EQ/LE/GE/NE; as on 910B the count form only processes whole 256-byte repeats
// (a count that is not is rounded down, an error in strict mode and a warning
// otherwise), and the repeat form ignores the mask (a reserved parameter on Atlas A2).
// Select(dst, selMask, src0, src1 or scalar, selMode, count) and its mask/repeat form:
// bit 1 takes src0, bit 0 takes src1 (or the scalar); VSEL_CMPMASK_SPR reuses the first
// 256/sizeof(T) bits for every repeat, the other modes consume the mask continuously.
// Does not model: the CMPMASK special register (Compare results "stored in the
// register", SetCmpMask, GetCmpMask, Select without a mask argument).
#ifndef VNPU_ASCENDC_COMPARE_SELECT_H
#define VNPU_ASCENDC_COMPARE_SELECT_H

#include <cstdint>
#include <cstring>

#include "local_tensor.h"
#include "vector_mask.h"

namespace AscendC {

enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

template <typename C>
inline bool CompareValues(C a, C b, AscendC::CMPMODE mode) {
  switch (mode) {
    case AscendC::CMPMODE::LT: return a < b;
    case AscendC::CMPMODE::GT: return a > b;
    case AscendC::CMPMODE::EQ: return a == b;
    case AscendC::CMPMODE::LE: return a <= b;
    case AscendC::CMPMODE::GE: return a >= b;
    default: return a != b;
  }
}

inline void SetBit(uint8_t* bytes, uint64_t i, bool v) {
  uint8_t bit = static_cast<uint8_t>(1u << (i % 8));
  if (v) {
    bytes[i / 8] |= bit;
  } else {
    bytes[i / 8] &= static_cast<uint8_t>(~bit);
  }
}
inline bool GetBit(const uint8_t* bytes, uint64_t i) { return (bytes[i / 8] >> (i % 8)) & 1u; }

template <typename U>
inline void CheckMaskBytes(const AscendC::LocalTensor<U>& t, uint64_t bits, const char* api, const char* role) {
  uint64_t need = (bits + 7) / 8;
  if (need > t.GetLength()) {
    Fail(Str(api, ": ", bits, " elements need ", need, " bytes of ", role, ", which has only ", t.GetLength()));
  }
}

// Elements the count form of Compare processes: whole 256-byte repeats only.
template <typename T>
inline uint32_t CompareCount(uint32_t count, const char* api) {
  constexpr uint32_t per = ElemsPerRepeat<T>();
  if (count % per == 0) return count;
  uint32_t kept = count / per * per;
  StrictOrWarn("Compare count", Str(api, ": count ", count, " of ", TypeName<T>(),
                                    " is not a multiple of 256 bytes (", per,
                                    " elements); the device compares only the first ", kept));
  return kept;
}

// The Compare kernel: bit i of dst = cmp(a(i), b(i)) for i < n.
template <typename T, typename U, typename A, typename B>
inline void CompareInto(const AscendC::LocalTensor<U>& dst, uint64_t n, AscendC::CMPMODE mode, A a, B b) {
  using C = typename ComputeType<T>::type;
  uint8_t* bytes = reinterpret_cast<uint8_t*>(dst.Data());
  for (uint64_t i = 0; i < n; ++i) SetBit(bytes, i, CompareValues<C>(a(i), b(i), mode));
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

template <typename T, typename U>
inline void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
                    uint32_t count) {
  namespace d = vnpu::ascendc::detail;
  using C = typename d::ComputeType<T>::type;
  uint32_t n = d::CompareCount<T>(count, "Compare");
  d::CheckCountFits(n, src0, "Compare", "src0");
  d::CheckCountFits(n, src1, "Compare", "src1");
  d::CheckMaskBytes(dst, n, "Compare", "dst");
  const T* a = src0.Data();
  const T* b = src1.Data();
  d::CompareInto<T>(dst, n, cmpMode, [&](uint64_t i) { return static_cast<C>(a[i]); },
                    [&](uint64_t i) { return static_cast<C>(b[i]); });
}

template <typename T, typename U>
inline void Compares(const LocalTensor<U>& dst, const LocalTensor<T>& src0,
                     const typename vnpu::ascendc::detail::ComputeType<T>::type src1Scalar, CMPMODE cmpMode,
                     uint32_t count) {
  namespace d = vnpu::ascendc::detail;
  using C = typename d::ComputeType<T>::type;
  uint32_t n = d::CompareCount<T>(count, "Compares");
  d::CheckCountFits(n, src0, "Compares", "src0");
  d::CheckMaskBytes(dst, n, "Compares", "dst");
  const T* a = src0.Data();
  const C b = static_cast<C>(static_cast<T>(src1Scalar));
  d::CompareInto<T>(dst, n, cmpMode, [&](uint64_t i) { return static_cast<C>(a[i]); }, [&](uint64_t) { return b; });
}

// Repeat form: the mask is reserved on 910B (every element of each repeat is compared);
// each repeat's 256/sizeof(T) bits follow the previous repeat's in dst.
template <typename T, typename U, bool isSetMask = true>
inline void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
                    const uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams& repeatParams) {
  namespace d = vnpu::ascendc::detail;
  using C = typename d::ComputeType<T>::type;
  (void)mask;
  constexpr uint32_t per = d::ElemsPerRepeat<T>();
  d::VecMask all = d::ContinuousMask<T>(per);
  const d::Stride s0{repeatParams.src0BlkStride, repeatParams.src0RepStride},
      s1{repeatParams.src1BlkStride, repeatParams.src1RepStride};
  d::CheckRepeatExtent(src0, s0, all, repeatTime, per, "Compare", "src0");
  d::CheckRepeatExtent(src1, s1, all, repeatTime, per, "Compare", "src1");
  d::CheckMaskBytes(dst, static_cast<uint64_t>(repeatTime) * per, "Compare", "dst");
  uint8_t* bytes = reinterpret_cast<uint8_t*>(dst.Data());
  const T* a = src0.Data();
  const T* b = src1.Data();
  d::ForEachActive(all, repeatTime, per, [&](uint32_t r, uint32_t j) {
    d::SetBit(bytes, static_cast<uint64_t>(r) * per + j,
              d::CompareValues<C>(static_cast<C>(a[d::OffsetOf<T>(s0, r, j)]),
                                  static_cast<C>(b[d::OffsetOf<T>(s1, r, j)]), cmpMode));
  });
}
template <typename T, typename U, bool isSetMask = true>
inline void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
                    const uint64_t mask[], uint8_t repeatTime, const BinaryRepeatParams& repeatParams) {
  Compare<T, U, isSetMask>(dst, src0, src1, cmpMode, mask == nullptr ? 0 : mask[0], repeatTime, repeatParams);
}

namespace vnpu_detail {
// dst[i] = bit ? src0[i] : other(i), for the bit chosen by `selMode`.
template <typename T, typename U, typename Other>
inline void SelectCount(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                        SELMODE selMode, uint32_t count, Other other) {
  namespace d = vnpu::ascendc::detail;
  constexpr uint32_t per = d::ElemsPerRepeat<T>();
  d::CheckCountFits(count, dst, "Select", "dst");
  d::CheckCountFits(count, src0, "Select", "src0");
  d::CheckMaskBytes(selMask, selMode == SELMODE::VSEL_CMPMASK_SPR ? (count < per ? count : per) : count, "Select",
                    "selMask");
  const uint8_t* bits = reinterpret_cast<const uint8_t*>(selMask.Data());
  T* o = dst.Data();
  const T* a = src0.Data();
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t bit = selMode == SELMODE::VSEL_CMPMASK_SPR ? i % per : i;
    o[i] = d::GetBit(bits, bit) ? a[i] : other(i);
  }
}
}  // namespace vnpu_detail

// Tensor/tensor select (VSEL_CMPMASK_SPR or VSEL_TENSOR_TENSOR_MODE).
template <typename T, typename U>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                   const LocalTensor<T>& src1, SELMODE selMode, uint32_t count) {
  vnpu::ascendc::detail::CheckCountFits(count, src1, "Select", "src1");
  const T* b = src1.Data();
  vnpu_detail::SelectCount(dst, selMask, src0, selMode, count, [&](uint32_t i) { return b[i]; });
}
// Tensor/scalar select (VSEL_TENSOR_SCALAR_MODE).
template <typename T, typename U>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                   typename vnpu::ascendc::detail::Identity<T>::type src1, SELMODE selMode, uint32_t count) {
  vnpu_detail::SelectCount(dst, selMask, src0, selMode, count, [&](uint32_t) { return src1; });
}

namespace vnpu_detail {
template <typename T, typename U, typename Other>
inline void SelectRepeat(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                         SELMODE selMode, const vnpu::ascendc::detail::VecMask& m, uint8_t repeatTime,
                         const BinaryRepeatParams& p, Other other) {
  namespace d = vnpu::ascendc::detail;
  constexpr uint32_t per = d::ElemsPerRepeat<T>();
  const uint32_t repeats = d::RepeatsOf(m, repeatTime, per);
  const d::Stride sd{p.dstBlkStride, p.dstRepStride}, s0{p.src0BlkStride, p.src0RepStride};
  d::CheckRepeatExtent(dst, sd, m, repeats, per, "Select", "dst");
  d::CheckRepeatExtent(src0, s0, m, repeats, per, "Select", "src0");
  d::CheckMaskBytes(selMask, selMode == SELMODE::VSEL_CMPMASK_SPR ? per : static_cast<uint64_t>(repeats) * per,
                    "Select", "selMask");
  const uint8_t* bits = reinterpret_cast<const uint8_t*>(selMask.Data());
  T* o = dst.Data();
  const T* a = src0.Data();
  d::ForEachActive(m, repeats, per, [&](uint32_t r, uint32_t j) {
    uint64_t bit = selMode == SELMODE::VSEL_CMPMASK_SPR ? j : static_cast<uint64_t>(r) * per + j;
    o[d::OffsetOf<T>(sd, r, j)] = d::GetBit(bits, bit) ? a[d::OffsetOf<T>(s0, r, j)] : other(r, j);
  });
}
}  // namespace vnpu_detail

template <typename T, typename U, bool isSetMask = true>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                   const LocalTensor<T>& src1, SELMODE selMode, uint64_t mask, uint8_t repeatTime,
                   const BinaryRepeatParams& repeatParams) {
  namespace d = vnpu::ascendc::detail;
  const d::Stride s1{repeatParams.src1BlkStride, repeatParams.src1RepStride};
  d::VecMask m = d::PickMask<T, isSetMask>(mask, "Select");
  d::CheckRepeatExtent(src1, s1, m, d::RepeatsOf(m, repeatTime, d::ElemsPerRepeat<T>()), d::ElemsPerRepeat<T>(),
                       "Select", "src1");
  const T* b = src1.Data();
  vnpu_detail::SelectRepeat(dst, selMask, src0, selMode, m, repeatTime, repeatParams,
                            [&](uint32_t r, uint32_t j) { return b[d::OffsetOf<T>(s1, r, j)]; });
}
template <typename T, typename U, bool isSetMask = true>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                   const LocalTensor<T>& src1, SELMODE selMode, uint64_t mask[], uint8_t repeatTime,
                   const BinaryRepeatParams& repeatParams) {
  namespace d = vnpu::ascendc::detail;
  const d::Stride s1{repeatParams.src1BlkStride, repeatParams.src1RepStride};
  d::VecMask m = d::PickMask<T, isSetMask>(mask, "Select");
  d::CheckRepeatExtent(src1, s1, m, d::RepeatsOf(m, repeatTime, d::ElemsPerRepeat<T>()), d::ElemsPerRepeat<T>(),
                       "Select", "src1");
  const T* b = src1.Data();
  vnpu_detail::SelectRepeat(dst, selMask, src0, selMode, m, repeatTime, repeatParams,
                            [&](uint32_t r, uint32_t j) { return b[d::OffsetOf<T>(s1, r, j)]; });
}
template <typename T, typename U, bool isSetMask = true>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                   typename vnpu::ascendc::detail::Identity<T>::type src1, SELMODE selMode, uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams& repeatParams) {
  vnpu_detail::SelectRepeat(dst, selMask, src0, selMode,
                            vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, "Select"), repeatTime, repeatParams,
                            [&](uint32_t, uint32_t) { return src1; });
}
template <typename T, typename U, bool isSetMask = true>
inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                   typename vnpu::ascendc::detail::Identity<T>::type src1, SELMODE selMode, uint64_t mask[], uint8_t repeatTime, const BinaryRepeatParams& repeatParams) {
  vnpu_detail::SelectRepeat(dst, selMask, src0, selMode,
                            vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, "Select"), repeatTime, repeatParams,
                            [&](uint32_t, uint32_t) { return src1; });
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_COMPARE_SELECT_H
