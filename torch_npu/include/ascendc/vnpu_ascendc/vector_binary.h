// Ascend C on the virtual NPU: element-wise vector instructions on two tensors.
//
// Models: Add, Sub, Mul, Div, Max, Min, And, Or, AddRelu, SubRelu (dst = f(src0, src1))
// and MulAddDst (dst = src0 * src1 + dst), FusedMulAdd (dst = src0 * dst + src1), each
// in the count form and in the mask/repeat form with BinaryRepeatParams
// (vector_mask.h). Results are rounded to the element type after every operation, as
// the vector unit does: half and bfloat16_t are computed in float and rounded back.
// Does not model: the whole-tensor operator forms (dst = src0 + src1), saturation
// modes, and the exact NaN handling of Max/Min.
#ifndef VNPU_ASCENDC_VECTOR_BINARY_H
#define VNPU_ASCENDC_VECTOR_BINARY_H

#include <cstdint>
#include <type_traits>

#include "local_tensor.h"
#include "vector_mask.h"

namespace vnpu {
namespace ascendc {
namespace detail {

// The operations, written once for scalars and for GCC vector types alike.
struct AddOp {
  template <class V>
  V operator()(V a, V b) const { return a + b; }
};
struct SubOp {
  template <class V>
  V operator()(V a, V b) const { return a - b; }
};
struct MulOp {
  template <class V>
  V operator()(V a, V b) const { return a * b; }
};
struct DivOp {
  template <class V>
  V operator()(V a, V b) const { return a / b; }
};
struct MaxOp {
  template <class V>
  V operator()(V a, V b) const { return a > b ? a : b; }
};
struct MinOp {
  template <class V>
  V operator()(V a, V b) const { return a < b ? a : b; }
};
struct AndOp {
  template <class V>
  V operator()(V a, V b) const { return a & b; }
};
struct OrOp {
  template <class V>
  V operator()(V a, V b) const { return a | b; }
};
struct AddReluOp {
  template <class V>
  V operator()(V a, V b) const {
    V s = a + b;
    V zero{};
    return s > zero ? s : zero;
  }
};
struct SubReluOp {
  template <class V>
  V operator()(V a, V b) const {
    V s = a - b;
    V zero{};
    return s > zero ? s : zero;
  }
};

template <typename T, typename Op>
inline void BinaryCount(const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src0,
                        const AscendC::LocalTensor<T>& src1, int64_t count, Op op) {
  CheckCountFits(count, dst, api, "dst");
  CheckCountFits(count, src0, api, "src0");
  CheckCountFits(count, src1, api, "src1");
  MapBinary(dst.Data(), src0.Data(), src1.Data(), count, op);
}

template <typename T, typename Op>
inline void BinaryRepeat(const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src0,
                         const AscendC::LocalTensor<T>& src1, const VecMask& m, uint8_t repeatTime,
                         const AscendC::BinaryRepeatParams& p, Op op) {
  constexpr uint32_t per = ElemsPerRepeat<T>();
  const uint32_t repeats = RepeatsOf(m, repeatTime, per);
  const Stride sd{p.dstBlkStride, p.dstRepStride}, s0{p.src0BlkStride, p.src0RepStride},
      s1{p.src1BlkStride, p.src1RepStride};
  CheckRepeatExtent(dst, sd, m, repeats, per, api, "dst");
  CheckRepeatExtent(src0, s0, m, repeats, per, api, "src0");
  CheckRepeatExtent(src1, s1, m, repeats, per, api, "src1");
  using C = typename ComputeType<T>::type;
  T* d = dst.Data();
  const T* a = src0.Data();
  const T* b = src1.Data();
  ForEachActive(m, repeats, per, [&](uint32_t r, uint32_t j) {
    d[OffsetOf<T>(sd, r, j)] = static_cast<T>(op(static_cast<C>(a[OffsetOf<T>(s0, r, j)]),
                                                 static_cast<C>(b[OffsetOf<T>(s1, r, j)])));
  });
}

template <typename T>
constexpr bool kFloatOnly = IsFloatingElement<T>::value;
template <typename T>
constexpr bool kIntegerOnly = std::is_integral<T>::value;

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

// Defines the three forms of a two-input vector instruction NAME computing OP, for the
// element types REQUIRE accepts.
#define VNPU_ASCENDC_BINARY_INSTRUCTION(NAME, OP, REQUIRE, REQUIREMENT)                                          \
  template <typename T>                                                                                          \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,            \
                   const int32_t& count) {                                                                       \
    static_assert(REQUIRE<T>, #NAME " " REQUIREMENT);                                                            \
    vnpu::ascendc::detail::BinaryCount(#NAME, dst, src0, src1, count, OP{});                                     \
  }                                                                                                              \
  template <typename T, bool isSetMask = true>                                                                   \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,            \
                   const uint64_t mask[], const uint8_t repeatTime, const BinaryRepeatParams& repeatParams) {    \
    static_assert(REQUIRE<T>, #NAME " " REQUIREMENT);                                                            \
    vnpu::ascendc::detail::BinaryRepeat(#NAME, dst, src0, src1,                                                  \
                                        vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, #NAME), repeatTime, \
                                        repeatParams, OP{});                                                     \
  }                                                                                                              \
  template <typename T, bool isSetMask = true>                                                                   \
  inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,            \
                   uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams) {            \
    static_assert(REQUIRE<T>, #NAME " " REQUIREMENT);                                                            \
    vnpu::ascendc::detail::BinaryRepeat(#NAME, dst, src0, src1,                                                  \
                                        vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, #NAME), repeatTime, \
                                        repeatParams, OP{});                                                     \
  }

namespace vnpu {
namespace ascendc {
namespace detail {
template <typename T>
constexpr bool kAnyElement = true;
}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

VNPU_ASCENDC_BINARY_INSTRUCTION(Add, vnpu::ascendc::detail::AddOp, vnpu::ascendc::detail::kAnyElement, "")
VNPU_ASCENDC_BINARY_INSTRUCTION(Sub, vnpu::ascendc::detail::SubOp, vnpu::ascendc::detail::kAnyElement, "")
VNPU_ASCENDC_BINARY_INSTRUCTION(Mul, vnpu::ascendc::detail::MulOp, vnpu::ascendc::detail::kAnyElement, "")
VNPU_ASCENDC_BINARY_INSTRUCTION(Div, vnpu::ascendc::detail::DivOp, vnpu::ascendc::detail::kFloatOnly,
                                "supports half and float on 910B")
VNPU_ASCENDC_BINARY_INSTRUCTION(Max, vnpu::ascendc::detail::MaxOp, vnpu::ascendc::detail::kAnyElement, "")
VNPU_ASCENDC_BINARY_INSTRUCTION(Min, vnpu::ascendc::detail::MinOp, vnpu::ascendc::detail::kAnyElement, "")
VNPU_ASCENDC_BINARY_INSTRUCTION(And, vnpu::ascendc::detail::AndOp, vnpu::ascendc::detail::kIntegerOnly,
                                "supports int16_t and uint16_t on 910B")
VNPU_ASCENDC_BINARY_INSTRUCTION(Or, vnpu::ascendc::detail::OrOp, vnpu::ascendc::detail::kIntegerOnly,
                                "supports int16_t and uint16_t on 910B")
VNPU_ASCENDC_BINARY_INSTRUCTION(AddRelu, vnpu::ascendc::detail::AddReluOp, vnpu::ascendc::detail::kAnyElement, "")
VNPU_ASCENDC_BINARY_INSTRUCTION(SubRelu, vnpu::ascendc::detail::SubReluOp, vnpu::ascendc::detail::kAnyElement, "")

// dst = src0 * src1 + dst.
template <typename T>
inline void MulAddDst(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
                      const int32_t& count) {
  namespace d = vnpu::ascendc::detail;
  d::CheckCountFits(count, dst, "MulAddDst", "dst");
  d::CheckCountFits(count, src0, "MulAddDst", "src0");
  d::CheckCountFits(count, src1, "MulAddDst", "src1");
  using C = typename d::ComputeType<T>::type;
  T* o = dst.Data();
  const T* a = src0.Data();
  const T* b = src1.Data();
  for (int32_t i = 0; i < count; ++i) {
    o[i] = static_cast<T>(static_cast<C>(static_cast<T>(static_cast<C>(a[i]) * static_cast<C>(b[i]))) +
                          static_cast<C>(o[i]));
  }
}

// dst = src0 * dst + src1.
template <typename T>
inline void FusedMulAdd(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
                        const int32_t& count) {
  namespace d = vnpu::ascendc::detail;
  d::CheckCountFits(count, dst, "FusedMulAdd", "dst");
  d::CheckCountFits(count, src0, "FusedMulAdd", "src0");
  d::CheckCountFits(count, src1, "FusedMulAdd", "src1");
  using C = typename d::ComputeType<T>::type;
  T* o = dst.Data();
  const T* a = src0.Data();
  const T* b = src1.Data();
  for (int32_t i = 0; i < count; ++i) {
    o[i] = static_cast<T>(static_cast<C>(static_cast<T>(static_cast<C>(a[i]) * static_cast<C>(o[i]))) +
                          static_cast<C>(b[i]));
  }
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_VECTOR_BINARY_H
