// Ascend C on the virtual NPU: Cast, element type conversion with a rounding mode.
//
// Models: Cast(dst, src, roundMode, count) and the mask/repeat form, for the type pairs
// and rounding modes Atlas A2 (910B) supports -- a pair the chip cannot convert is a
// compile error (static_assert), a mode the pair does not take is a KernelError naming
// the modes it does take. Rounding follows CANN's definitions: CAST_RINT nearest-even,
// CAST_FLOOR, CAST_CEIL, CAST_ROUND (half away from zero), CAST_TRUNC, CAST_ODD
// (von Neumann: an inexact result gets an odd last bit) and CAST_NONE (CAST_RINT when
// the conversion loses precision, exact otherwise). Out-of-range values saturate to the
// destination's largest finite value (CANN's default overflow mode); infinities and NaN
// pass through to floating destinations, NaN becomes 0 in integer ones.
// Does not model: int32_t -> half (needs SetDeqScale), int4b_t, CAST_HYBRID, and the
// float-to-integer conversions of other chips.
#ifndef VNPU_ASCENDC_CAST_H
#define VNPU_ASCENDC_CAST_H

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "local_tensor.h"
#include "vector_mask.h"

namespace AscendC {

enum class RoundMode : uint8_t {
  CAST_NONE = 0,
  CAST_RINT,
  CAST_FLOOR,
  CAST_CEIL,
  CAST_ROUND,
  CAST_TRUNC,
  CAST_ODD,
  CAST_HYBRID,
};

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

constexpr uint32_t ModeBit(AscendC::RoundMode m) { return 1u << static_cast<uint32_t>(m); }
constexpr uint32_t kNone = ModeBit(AscendC::RoundMode::CAST_NONE);
constexpr uint32_t kDirected = ModeBit(AscendC::RoundMode::CAST_RINT) | ModeBit(AscendC::RoundMode::CAST_FLOOR) |
                               ModeBit(AscendC::RoundMode::CAST_CEIL) | ModeBit(AscendC::RoundMode::CAST_ROUND) |
                               ModeBit(AscendC::RoundMode::CAST_TRUNC);
constexpr uint32_t kOdd = ModeBit(AscendC::RoundMode::CAST_ODD);

// The rounding modes Cast from S to D accepts on Atlas A2; 0 = the chip cannot convert.
template <typename D, typename S>
constexpr uint32_t CastModes() {
  using std::is_same;
  if constexpr (is_same<S, int8_t>::value && is_same<D, half>::value) return kNone;
  if constexpr (is_same<S, uint8_t>::value && is_same<D, half>::value) return kNone;
  if constexpr (is_same<S, int16_t>::value && is_same<D, half>::value) return kDirected | kNone;
  if constexpr (is_same<S, int16_t>::value && is_same<D, float>::value) return kNone;
  if constexpr (is_same<S, half>::value && is_same<D, int8_t>::value) return kDirected | kNone;
  if constexpr (is_same<S, half>::value && is_same<D, uint8_t>::value) return kDirected | kNone;
  if constexpr (is_same<S, half>::value && is_same<D, int16_t>::value) return kDirected;
  if constexpr (is_same<S, half>::value && is_same<D, int32_t>::value) return kDirected;
  if constexpr (is_same<S, half>::value && is_same<D, float>::value) return kNone;
  if constexpr (is_same<S, bfloat16_t>::value && is_same<D, int32_t>::value) return kDirected;
  if constexpr (is_same<S, bfloat16_t>::value && is_same<D, float>::value) return kNone;
  if constexpr (is_same<S, int32_t>::value && is_same<D, int16_t>::value) return kNone;
  if constexpr (is_same<S, int32_t>::value && is_same<D, float>::value) return kDirected | kNone;
  if constexpr (is_same<S, int32_t>::value && is_same<D, int64_t>::value) return kNone;
  if constexpr (is_same<S, float>::value && is_same<D, int16_t>::value) return kDirected;
  if constexpr (is_same<S, float>::value && is_same<D, half>::value) return kDirected | kOdd | kNone;
  if constexpr (is_same<S, float>::value && is_same<D, bfloat16_t>::value) return kDirected;
  if constexpr (is_same<S, float>::value && is_same<D, int32_t>::value) return kDirected;
  if constexpr (is_same<S, float>::value && is_same<D, float>::value) return kDirected;
  if constexpr (is_same<S, float>::value && is_same<D, int64_t>::value) return kDirected;
  if constexpr (is_same<S, int64_t>::value && is_same<D, int32_t>::value) return kNone;
  if constexpr (is_same<S, int64_t>::value && is_same<D, float>::value) return kDirected;
  return 0;
}

inline const char* RoundModeName(AscendC::RoundMode m) {
  switch (m) {
    case AscendC::RoundMode::CAST_NONE: return "CAST_NONE";
    case AscendC::RoundMode::CAST_RINT: return "CAST_RINT";
    case AscendC::RoundMode::CAST_FLOOR: return "CAST_FLOOR";
    case AscendC::RoundMode::CAST_CEIL: return "CAST_CEIL";
    case AscendC::RoundMode::CAST_ROUND: return "CAST_ROUND";
    case AscendC::RoundMode::CAST_TRUNC: return "CAST_TRUNC";
    case AscendC::RoundMode::CAST_ODD: return "CAST_ODD";
    default: return "CAST_HYBRID";
  }
}

inline std::string ModeList(uint32_t modes) {
  std::string s;
  for (uint32_t m = 0; m <= static_cast<uint32_t>(AscendC::RoundMode::CAST_HYBRID); ++m) {
    if (modes & (1u << m)) s += (s.empty() ? "" : ", ") + std::string(RoundModeName(static_cast<AscendC::RoundMode>(m)));
  }
  return s;
}

// Rounds the non-negative magnitude `a` to a multiple of `ulp` (a power of two) in
// `mode`; `negative` is the sign of the original value (FLOOR/CEIL depend on it).
inline long double RoundToGrid(long double a, long double ulp, AscendC::RoundMode mode, bool negative) {
  using AscendC::RoundMode;
  long double q = a / ulp;
  long double t = std::floor(q);
  long double frac = q - t;
  bool inexact = frac != 0;
  bool t_odd = std::fmod(t, 2.0L) != 0;
  long double r = t;
  switch (mode) {
    case RoundMode::CAST_TRUNC: break;
    case RoundMode::CAST_FLOOR: r = (negative && inexact) ? t + 1 : t; break;
    case RoundMode::CAST_CEIL: r = (!negative && inexact) ? t + 1 : t; break;
    case RoundMode::CAST_ROUND: r = frac >= 0.5L ? t + 1 : t; break;
    case RoundMode::CAST_ODD: r = (inexact && !t_odd) ? t + 1 : t; break;
    default:  // CAST_RINT, CAST_NONE: nearest, ties to even
      r = (frac > 0.5L || (frac == 0.5L && t_odd)) ? t + 1 : t;
      break;
  }
  return r * ulp;
}

// Rounds x to a binary floating format with `mantissa` fraction bits and smallest
// normal exponent `min_exp`, saturating at `max_finite`.
inline long double RoundToFloatFormat(long double x, int mantissa, int min_exp, long double max_finite,
                                      AscendC::RoundMode mode) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  bool negative = x < 0;
  long double a = negative ? -x : x;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;
  if (exp < min_exp) exp = min_exp;
  long double r = RoundToGrid(a, std::ldexp(1.0L, exp - mantissa), mode, negative);
  if (r > max_finite) r = max_finite;  // saturation
  return negative ? -r : r;
}

template <typename D>
inline D SaturateToInteger(long double v) {
  if (std::isnan(v)) return 0;
  const long double lo = static_cast<long double>(std::numeric_limits<D>::lowest());
  const long double hi = static_cast<long double>(std::numeric_limits<D>::max());
  if (v <= lo) return std::numeric_limits<D>::lowest();
  if (v >= hi) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

// Converts one element from S to D in `mode`.
template <typename D, typename S>
inline D ConvertElement(S s, AscendC::RoundMode mode) {
  using C = typename ComputeType<S>::type;
  // Widening conversions are exact: no rounding to do.
  if constexpr ((std::is_same<D, float>::value &&
                 (std::is_same<S, half>::value || std::is_same<S, bfloat16_t>::value ||
                  std::is_same<S, int16_t>::value)) ||
                (std::is_same<D, half>::value && (std::is_same<S, int8_t>::value || std::is_same<S, uint8_t>::value)) ||
                (std::is_same<D, int64_t>::value && std::is_same<S, int32_t>::value)) {
    return static_cast<D>(static_cast<C>(s));
  }
  // float -> half to nearest even is the compiler's conversion, plus saturation.
  if constexpr (std::is_same<D, half>::value && std::is_same<S, float>::value) {
    if (mode == AscendC::RoundMode::CAST_RINT || mode == AscendC::RoundMode::CAST_NONE) {
      half h = static_cast<half>(s);
      if (std::isinf(static_cast<float>(h)) && !std::isinf(s)) return static_cast<half>(s < 0 ? -65504.0f : 65504.0f);
      return h;
    }
  }
  const long double x = static_cast<long double>(static_cast<C>(s));
  if constexpr (std::is_same<D, half>::value) {
    return static_cast<half>(static_cast<float>(RoundToFloatFormat(x, 10, -14, 65504.0L, mode)));
  } else if constexpr (std::is_same<D, bfloat16_t>::value) {
    const long double max_bf16 = std::ldexp(static_cast<long double>(0xff), 120);  // (2 - 2^-7) * 2^127
    return bfloat16_t::FromBits(
        bfloat16_t(static_cast<float>(RoundToFloatFormat(x, 7, -126, max_bf16, mode))).bits);
  } else if constexpr (std::is_same<D, float>::value) {
    if constexpr (std::is_same<S, float>::value) {
      // float -> float rounds to an integral value.
      if (std::isnan(x) || std::isinf(x)) return static_cast<float>(x);
      bool negative = x < 0;
      long double r = RoundToGrid(negative ? -x : x, 1.0L, mode, negative);
      return static_cast<float>(negative ? -r : r);
    } else {
      return static_cast<float>(
          RoundToFloatFormat(x, 23, -126, static_cast<long double>(std::numeric_limits<float>::max()), mode));
    }
  } else {
    static_assert(std::is_integral<D>::value, "unexpected Cast destination");
    if (std::isnan(x)) return 0;
    if (std::isinf(x)) return x < 0 ? std::numeric_limits<D>::lowest() : std::numeric_limits<D>::max();
    bool negative = x < 0;
    long double r = RoundToGrid(negative ? -x : x, 1.0L, mode, negative);
    return SaturateToInteger<D>(negative ? -r : r);
  }
}

template <typename D, typename S>
inline void CheckCastMode(AscendC::RoundMode mode, const char* api) {
  constexpr uint32_t modes = CastModes<D, S>();
  if (!(modes & ModeBit(mode))) {
    Fail(Str(api, " from ", TypeName<S>(), " to ", TypeName<D>(), " does not take ", RoundModeName(mode),
             " on 910B; it takes ", ModeList(modes)));
  }
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

template <typename T, typename U>
inline void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode,
                 const uint32_t count) {
  namespace d = vnpu::ascendc::detail;
  static_assert(d::CastModes<T, U>() != 0, "Cast: this source/destination type pair is not supported on 910B "
                                          "(see the Cast type table of Atlas A2)");
  d::CheckCastMode<T, U>(roundMode, "Cast");
  d::CheckCountFits(count, dst, "Cast", "dst");
  d::CheckCountFits(count, src, "Cast", "src");
  T* o = dst.Data();
  const U* s = src.Data();
  for (uint32_t i = 0; i < count; ++i) o[i] = d::ConvertElement<T, U>(s[i], roundMode);
}

namespace vnpu_detail {
template <typename T, typename U>
inline void CastRepeat(const LocalTensor<T>& dst, const LocalTensor<U>& src, RoundMode roundMode,
                       const vnpu::ascendc::detail::VecMask& m, uint8_t repeatTime, const UnaryRepeatParams& p) {
  namespace d = vnpu::ascendc::detail;
  static_assert(d::CastModes<T, U>() != 0, "Cast: this source/destination type pair is not supported on 910B "
                                          "(see the Cast type table of Atlas A2)");
  d::CheckCastMode<T, U>(roundMode, "Cast");
  // A repeat covers 256 bytes of the wider type.
  constexpr uint32_t per = sizeof(T) > sizeof(U) ? d::ElemsPerRepeat<T>() : d::ElemsPerRepeat<U>();
  const uint32_t repeats = d::RepeatsOf(m, repeatTime, per);
  const d::Stride sd{p.dstBlkStride, p.dstRepStride}, ss{p.srcBlkStride, p.srcRepStride};
  d::CheckRepeatExtent(dst, sd, m, repeats, per, "Cast", "dst");
  d::CheckRepeatExtent(src, ss, m, repeats, per, "Cast", "src");
  T* o = dst.Data();
  const U* s = src.Data();
  d::ForEachActive(m, repeats, per, [&](uint32_t r, uint32_t j) {
    o[d::OffsetOf<T>(sd, r, j)] = d::ConvertElement<T, U>(s[d::OffsetOf<U>(ss, r, j)], roundMode);
  });
}
}  // namespace vnpu_detail

template <typename T, typename U, bool isSetMask = true>
inline void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode,
                 const uint64_t mask[], const uint8_t repeatTime, const UnaryRepeatParams& repeatParams) {
  using W = typename std::conditional<(sizeof(T) > sizeof(U)), T, U>::type;
  vnpu_detail::CastRepeat(dst, src, roundMode, vnpu::ascendc::detail::PickMask<W, isSetMask>(mask, "Cast"),
                          repeatTime, repeatParams);
}
template <typename T, typename U, bool isSetMask = true>
inline void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode,
                 const uint64_t mask, const uint8_t repeatTime, const UnaryRepeatParams& repeatParams) {
  using W = typename std::conditional<(sizeof(T) > sizeof(U)), T, U>::type;
  vnpu_detail::CastRepeat(dst, src, roundMode, vnpu::ascendc::detail::PickMask<W, isSetMask>(mask, "Cast"),
                          repeatTime, repeatParams);
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_CAST_H
