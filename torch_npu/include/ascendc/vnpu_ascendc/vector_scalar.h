// Ascend C on the virtual NPU: vector instructions with a scalar operand, and fills.
//
// Models: Adds, Muls, Maxs, Mins, LeakyRelu (dst = src >= 0 ? src : src * alpha),
// ShiftLeft, ShiftRight (count form and mask/repeat form with UnaryRepeatParams),
// Axpy (dst = src * scalar + dst), Duplicate (fill, count form and mask/repeat form
// with block and repeat strides) and CreateVecIndex (dst[i] = first + i).
// The scalar is converted to the tensor's element type first, as the device does, so
// a float literal passed for a half tensor is rounded to half.
// Does not model: the "flexible scalar position" overloads (scalar given as a tensor
// element) of later CANN versions.
#ifndef VNPU_ASCENDC_VECTOR_SCALAR_H
#define VNPU_ASCENDC_VECTOR_SCALAR_H

#include <cstdint>
#include <type_traits>

#include "local_tensor.h"
#include "vector_mask.h"

namespace vnpu {
namespace ascendc {
namespace detail {

// A vector (or scalar) of type V with every lane set to s.
template <class V, class S>
inline V Splat(S s) {
  if constexpr (std::is_arithmetic<V>::value) {
    return static_cast<V>(s);
  } else {
    V v{};
    for (unsigned k = 0; k < sizeof(V) / sizeof(v[0]); ++k) v[k] = s;
    return v;
  }
}

template <typename C>
struct AddsOp {
  static constexpr bool kSimd = true;
  C s;
  template <class V>
  V operator()(V a) const { return a + Splat<V>(s); }
};
template <typename C>
struct MulsOp {
  static constexpr bool kSimd = true;
  C s;
  template <class V>
  V operator()(V a) const { return a * Splat<V>(s); }
};
template <typename C>
struct MaxsOp {
  static constexpr bool kSimd = true;
  C s;
  template <class V>
  V operator()(V a) const {
    V b = Splat<V>(s);
    return a > b ? a : b;
  }
};
template <typename C>
struct MinsOp {
  static constexpr bool kSimd = true;
  C s;
  template <class V>
  V operator()(V a) const {
    V b = Splat<V>(s);
    return a < b ? a : b;
  }
};
template <typename C>
struct LeakyReluOp {
  static constexpr bool kSimd = true;
  C s;
  template <class V>
  V operator()(V a) const {
    V zero{};
    return a >= zero ? a : a * Splat<V>(s);
  }
};
template <typename C>
struct ShiftLeftOp {
  static constexpr bool kSimd = true;
  C s;
  template <class V>
  V operator()(V a) const { return a << Splat<V>(s); }
};
template <typename C>
struct ShiftRightOp {
  static constexpr bool kSimd = true;
  C s;
  template <class V>
  V operator()(V a) const { return a >> Splat<V>(s); }
};

// The scalar of an instruction on T, rounded to T, in the type T is computed in.
template <typename T, typename S>
inline typename ComputeType<T>::type ScalarFor(S s) {
  return static_cast<typename ComputeType<T>::type>(static_cast<T>(s));
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

// Defines the three forms of a tensor-scalar vector instruction NAME computing OP<C>{scalar}.
#define VNPU_ASCENDC_SCALAR_INSTRUCTION(NAME, OP)                                                                 \
  template <typename T, bool isSetMask = true>                                                                    \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src,                                          \
                   const typename vnpu::ascendc::detail::Identity<T>::type& scalarValue, const int32_t& count) {  \
    using C = typename vnpu::ascendc::detail::ComputeType<T>::type;                                               \
    vnpu::ascendc::detail::UnaryCount(#NAME, dst, src, count,                                                     \
                                      OP<C>{vnpu::ascendc::detail::ScalarFor<T>(scalarValue)});                   \
  }                                                                                                               \
  template <typename T, bool isSetMask = true>                                                                    \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src,                                          \
                   const typename vnpu::ascendc::detail::Identity<T>::type& scalarValue, const uint64_t mask[],   \
                   const uint8_t repeatTime, const UnaryRepeatParams& repeatParams) {                             \
    using C = typename vnpu::ascendc::detail::ComputeType<T>::type;                                               \
    vnpu::ascendc::detail::UnaryRepeat(#NAME, dst, src, vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, #NAME), \
                                       repeatTime, repeatParams,                                                  \
                                       OP<C>{vnpu::ascendc::detail::ScalarFor<T>(scalarValue)});                  \
  }                                                                                                               \
  template <typename T, bool isSetMask = true>                                                                    \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src,                                          \
                   const typename vnpu::ascendc::detail::Identity<T>::type& scalarValue, uint64_t mask,           \
                   const uint8_t repeatTime, const UnaryRepeatParams& repeatParams) {                             \
    using C = typename vnpu::ascendc::detail::ComputeType<T>::type;                                               \
    vnpu::ascendc::detail::UnaryRepeat(#NAME, dst, src, vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, #NAME), \
                                       repeatTime, repeatParams,                                                  \
                                       OP<C>{vnpu::ascendc::detail::ScalarFor<T>(scalarValue)});                  \
  }

namespace AscendC {

VNPU_ASCENDC_SCALAR_INSTRUCTION(Adds, vnpu::ascendc::detail::AddsOp)
VNPU_ASCENDC_SCALAR_INSTRUCTION(Muls, vnpu::ascendc::detail::MulsOp)
VNPU_ASCENDC_SCALAR_INSTRUCTION(Maxs, vnpu::ascendc::detail::MaxsOp)
VNPU_ASCENDC_SCALAR_INSTRUCTION(Mins, vnpu::ascendc::detail::MinsOp)
VNPU_ASCENDC_SCALAR_INSTRUCTION(LeakyRelu, vnpu::ascendc::detail::LeakyReluOp)
VNPU_ASCENDC_SCALAR_INSTRUCTION(ShiftLeft, vnpu::ascendc::detail::ShiftLeftOp)
VNPU_ASCENDC_SCALAR_INSTRUCTION(ShiftRight, vnpu::ascendc::detail::ShiftRightOp)

// dst = src * scalar + dst.
template <typename T, typename U, bool isSetMask = true>
inline void Axpy(const LocalTensor<T>& dst, const LocalTensor<U>& src, const U scalarValue, const int32_t& count) {
  namespace d = vnpu::ascendc::detail;
  d::CheckCountFits(count, dst, "Axpy", "dst");
  d::CheckCountFits(count, src, "Axpy", "src");
  using C = typename d::ComputeType<T>::type;
  using CU = typename d::ComputeType<U>::type;
  T* o = dst.Data();
  const U* s = src.Data();
  for (int32_t i = 0; i < count; ++i) {
    C product = static_cast<C>(static_cast<U>(static_cast<CU>(s[i]) * static_cast<CU>(scalarValue)));
    o[i] = static_cast<T>(product + static_cast<C>(o[i]));
  }
}

// Fills the first `count` elements with `scalarValue`.
template <typename T>
inline void Duplicate(const LocalTensor<T>& dst, const typename vnpu::ascendc::detail::Identity<T>::type& scalarValue,
                      const int32_t& count) {
  vnpu::ascendc::detail::CheckCountFits(count, dst, "Duplicate", "dst");
  T* o = dst.Data();
  const T v = static_cast<T>(scalarValue);
  for (int32_t i = 0; i < count; ++i) o[i] = v;
}

namespace vnpu_detail {
template <typename T>
inline void DuplicateRepeat(const LocalTensor<T>& dst, T v, const vnpu::ascendc::detail::VecMask& m,
                            uint8_t repeatTime, uint16_t dstBlockStride, uint8_t dstRepeatStride) {
  namespace d = vnpu::ascendc::detail;
  constexpr uint32_t per = d::ElemsPerRepeat<T>();
  const uint32_t repeats = d::RepeatsOf(m, repeatTime, per);
  const d::Stride sd{dstBlockStride, dstRepeatStride};
  d::CheckRepeatExtent(dst, sd, m, repeats, per, "Duplicate", "dst");
  T* o = dst.Data();
  d::ForEachActive(m, repeats, per, [&](uint32_t r, uint32_t j) { o[d::OffsetOf<T>(sd, r, j)] = v; });
}
}  // namespace vnpu_detail

template <typename T, bool isSetMask = true>
inline void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, uint64_t mask[], const uint8_t repeatTime,
                      const uint16_t dstBlockStride, const uint8_t dstRepeatStride) {
  vnpu_detail::DuplicateRepeat(dst, scalarValue,
                               vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, "Duplicate"), repeatTime,
                               dstBlockStride, dstRepeatStride);
}
template <typename T, bool isSetMask = true>
inline void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, uint64_t mask, const uint8_t repeatTime,
                      const uint16_t dstBlockStride, const uint8_t dstRepeatStride) {
  vnpu_detail::DuplicateRepeat(dst, scalarValue,
                               vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, "Duplicate"), repeatTime,
                               dstBlockStride, dstRepeatStride);
}

// dst[i] = firstValue + i for the first `count` elements.
template <typename T>
inline void CreateVecIndex(const LocalTensor<T>& dst, const T& firstValue, uint32_t count) {
  namespace d = vnpu::ascendc::detail;
  d::CheckCountFits(count, dst, "CreateVecIndex", "dst");
  using C = typename d::ComputeType<T>::type;
  T* o = dst.Data();
  for (uint32_t i = 0; i < count; ++i) o[i] = static_cast<T>(static_cast<C>(firstValue) + static_cast<C>(i));
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_VECTOR_SCALAR_H
