// Ascend C on the virtual NPU: element-wise vector instructions on one tensor.
//
// Models: Exp, Ln, Abs, Sqrt, Rsqrt, Relu, Reciprocal, Neg and Not, in the count form
// and the mask/repeat form with UnaryRepeatParams. Transcendental functions are
// computed with the host's float libm and rounded to the element type.
// Does not model: the vector unit's own approximations -- Exp, Ln, Sqrt, Rsqrt and
// Reciprocal on the device differ from libm in the last bits (compare with a
// tolerance of a few ulp), and high-precision modes.
#ifndef VNPU_ASCENDC_VECTOR_UNARY_H
#define VNPU_ASCENDC_VECTOR_UNARY_H

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "local_tensor.h"
#include "vector_mask.h"

namespace vnpu {
namespace ascendc {
namespace detail {

// kSimd: the op is written for GCC vector types too (MapUnary uses them).
struct ExpOp {
  static constexpr bool kSimd = false;
  template <class V>
  V operator()(V a) const { return static_cast<V>(std::exp(a)); }
};
struct LnOp {
  static constexpr bool kSimd = false;
  template <class V>
  V operator()(V a) const { return static_cast<V>(std::log(a)); }
};
struct SqrtOp {
  static constexpr bool kSimd = false;
  template <class V>
  V operator()(V a) const { return static_cast<V>(std::sqrt(a)); }
};
struct RsqrtOp {
  static constexpr bool kSimd = false;
  template <class V>
  V operator()(V a) const { return static_cast<V>(V(1) / std::sqrt(a)); }
};
struct ReciprocalOp {
  static constexpr bool kSimd = false;
  template <class V>
  V operator()(V a) const { return V(1) / a; }
};
struct AbsOp {
  static constexpr bool kSimd = true;
  template <class V>
  V operator()(V a) const {
    V zero{};
    return a < zero ? -a : a;
  }
};
struct ReluOp {
  static constexpr bool kSimd = true;
  template <class V>
  V operator()(V a) const {
    V zero{};
    return a > zero ? a : zero;
  }
};
struct NegOp {
  static constexpr bool kSimd = true;
  template <class V>
  V operator()(V a) const { return -a; }
};
struct NotOp {
  static constexpr bool kSimd = true;
  template <class V>
  V operator()(V a) const { return ~a; }
};

template <typename T, typename Op>
inline void UnaryCount(const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                       int64_t count, Op op) {
  CheckCountFits(count, dst, api, "dst");
  CheckCountFits(count, src, api, "src");
  MapUnary(dst.Data(), src.Data(), count, op);
}

template <typename T, typename Op>
inline void UnaryRepeat(const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                        const VecMask& m, uint8_t repeatTime, const AscendC::UnaryRepeatParams& p, Op op) {
  constexpr uint32_t per = ElemsPerRepeat<T>();
  const uint32_t repeats = RepeatsOf(m, repeatTime, per);
  const Stride sd{p.dstBlkStride, p.dstRepStride}, ss{p.srcBlkStride, p.srcRepStride};
  CheckRepeatExtent(dst, sd, m, repeats, per, api, "dst");
  CheckRepeatExtent(src, ss, m, repeats, per, api, "src");
  using C = typename ComputeType<T>::type;
  T* d = dst.Data();
  const T* s = src.Data();
  ForEachActive(m, repeats, per, [&](uint32_t r, uint32_t j) {
    d[OffsetOf<T>(sd, r, j)] = static_cast<T>(op(static_cast<C>(s[OffsetOf<T>(ss, r, j)])));
  });
}

template <typename T>
constexpr bool kUnaryFloat = IsFloatingElement<T>::value;
template <typename T>
constexpr bool kUnaryAny = true;
template <typename T>
constexpr bool kUnaryInteger = std::is_integral<T>::value;

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

// Defines the three forms of a one-input vector instruction NAME computing OP.
#define VNPU_ASCENDC_UNARY_INSTRUCTION(NAME, OP, REQUIRE, REQUIREMENT)                                           \
  template <typename T, bool isSetMask = true>                                                                   \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count) {                 \
    static_assert(REQUIRE<T>, #NAME " " REQUIREMENT);                                                            \
    vnpu::ascendc::detail::UnaryCount(#NAME, dst, src, count, OP{});                                             \
  }                                                                                                              \
  template <typename T, bool isSetMask = true>                                                                   \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t mask[],                  \
                   const uint8_t repeatTime, const UnaryRepeatParams& repeatParams) {                            \
    static_assert(REQUIRE<T>, #NAME " " REQUIREMENT);                                                            \
    vnpu::ascendc::detail::UnaryRepeat(#NAME, dst, src, vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, #NAME), \
                                       repeatTime, repeatParams, OP{});                                          \
  }                                                                                                              \
  template <typename T, bool isSetMask = true>                                                                   \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask, const uint8_t repeatTime, \
                   const UnaryRepeatParams& repeatParams) {                                                      \
    static_assert(REQUIRE<T>, #NAME " " REQUIREMENT);                                                            \
    vnpu::ascendc::detail::UnaryRepeat(#NAME, dst, src, vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, #NAME), \
                                       repeatTime, repeatParams, OP{});                                          \
  }

namespace AscendC {

VNPU_ASCENDC_UNARY_INSTRUCTION(Exp, vnpu::ascendc::detail::ExpOp, vnpu::ascendc::detail::kUnaryFloat,
                               "supports half and float")
VNPU_ASCENDC_UNARY_INSTRUCTION(Ln, vnpu::ascendc::detail::LnOp, vnpu::ascendc::detail::kUnaryFloat,
                               "supports half and float")
VNPU_ASCENDC_UNARY_INSTRUCTION(Sqrt, vnpu::ascendc::detail::SqrtOp, vnpu::ascendc::detail::kUnaryFloat,
                               "supports half and float")
VNPU_ASCENDC_UNARY_INSTRUCTION(Rsqrt, vnpu::ascendc::detail::RsqrtOp, vnpu::ascendc::detail::kUnaryFloat,
                               "supports half and float")
VNPU_ASCENDC_UNARY_INSTRUCTION(Reciprocal, vnpu::ascendc::detail::ReciprocalOp, vnpu::ascendc::detail::kUnaryFloat,
                               "supports half and float")
VNPU_ASCENDC_UNARY_INSTRUCTION(Abs, vnpu::ascendc::detail::AbsOp, vnpu::ascendc::detail::kUnaryAny, "")
VNPU_ASCENDC_UNARY_INSTRUCTION(Relu, vnpu::ascendc::detail::ReluOp, vnpu::ascendc::detail::kUnaryAny, "")
VNPU_ASCENDC_UNARY_INSTRUCTION(Neg, vnpu::ascendc::detail::NegOp, vnpu::ascendc::detail::kUnaryAny, "")
VNPU_ASCENDC_UNARY_INSTRUCTION(Not, vnpu::ascendc::detail::NotOp, vnpu::ascendc::detail::kUnaryInteger,
                               "supports int16_t and uint16_t")

}  // namespace AscendC

#endif  // VNPU_ASCENDC_VECTOR_UNARY_H
