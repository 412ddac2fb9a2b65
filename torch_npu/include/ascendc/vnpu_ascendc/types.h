// Ascend C on the virtual NPU: the scalar types kernels compute with.
//
// Models: `half` (IEEE binary16, as the compiler's _Float16: every operation on two
// halves is computed in float and rounded back to half, which for +, -, *, / gives
// the correctly rounded binary16 result) and `bfloat16_t` (a 16-bit storage type
// converted from float with round-to-nearest-even, NaN kept quiet). Arithmetic on
// bfloat16_t happens in float, as the AI core's vector unit does it.
// Does not model: int4b_t and the 8-bit float formats of later chips; subnormal
// flushing (the vector unit of 910B keeps binary16 subnormals, so does _Float16).
#ifndef VNPU_ASCENDC_TYPES_H
#define VNPU_ASCENDC_TYPES_H

#include <cstdint>
#include <cstring>
#include <type_traits>

using half = _Float16;

// bfloat16: the upper 16 bits of a float. Construction rounds to nearest even;
// reading converts exactly to float. Kept trivial so that arrays of it live in
// the Unified Buffer like any other element type.
struct bfloat16_t {
  uint16_t bits;

  bfloat16_t() = default;
  // From any arithmetic type (and half), implicitly like the device type.
  template <typename U, typename = typename std::enable_if<std::is_arithmetic<U>::value ||
                                                           std::is_same<U, _Float16>::value>::type>
  bfloat16_t(U v) : bits(FromFloat(static_cast<float>(v))) {}  // NOLINT
  operator float() const {  // NOLINT: implicit like the device type
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }

  static bfloat16_t FromBits(uint16_t b) {
    bfloat16_t r;
    r.bits = b;
    return r;
  }

  static uint16_t FromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN stays NaN (quiet)
    }
    // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
    uint32_t lsb = (u >> 16) & 1u;
    return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
  }
};
static_assert(sizeof(bfloat16_t) == 2, "bfloat16_t must be 16 bits");
static_assert(std::is_trivially_copyable<bfloat16_t>::value, "bfloat16_t must be trivially copyable");
static_assert(sizeof(half) == 2, "half must be 16 bits");

namespace vnpu {
namespace ascendc {
namespace detail {

template <typename T>
struct IsFloatingElement
    : std::integral_constant<bool, std::is_floating_point<T>::value || std::is_same<T, half>::value ||
                                       std::is_same<T, bfloat16_t>::value> {};

// The type computations on T are carried out in: float for the 16-bit floats (the
// result is rounded back to T), T itself otherwise.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<half> {
  using type = float;
};
template <>
struct ComputeType<bfloat16_t> {
  using type = float;
};

// A non-deduced context: scalar parameters take the tensor's element type without
// taking part in deduction (a float literal for a half tensor converts).
template <typename T>
struct Identity {
  using type = T;
};

// Type names for error messages.
template <typename T>
inline const char* TypeName() {
  if (std::is_same<T, half>::value) return "half";
  if (std::is_same<T, bfloat16_t>::value) return "bfloat16_t";
  if (std::is_same<T, float>::value) return "float";
  if (std::is_same<T, double>::value) return "double";
  if (std::is_same<T, int8_t>::value) return "int8_t";
  if (std::is_same<T, uint8_t>::value) return "uint8_t";
  if (std::is_same<T, int16_t>::value) return "int16_t";
  if (std::is_same<T, uint16_t>::value) return "uint16_t";
  if (std::is_same<T, int32_t>::value) return "int32_t";
  if (std::is_same<T, uint32_t>::value) return "uint32_t";
  if (std::is_same<T, int64_t>::value) return "int64_t";
  if (std::is_same<T, uint64_t>::value) return "uint64_t";
  return "?";
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

#endif  // VNPU_ASCENDC_TYPES_H
