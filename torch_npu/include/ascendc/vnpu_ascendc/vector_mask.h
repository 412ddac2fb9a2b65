// Ascend C on the virtual NPU: how a vector instruction walks the Unified Buffer.
//
// Models: the two calling forms of the vector API.
//  - "count" form (first n elements): the n elements are processed contiguously.
//  - "mask/repeat" form (high-dimensional split): each repeat reads 8 data blocks of
//    32 bytes (256 bytes: 128 halves or 64 floats); the mask selects elements within a
//    repeat (a count of leading elements, or a 128-bit bit mask: two uint64_t for
//    16-bit types, one for 32-bit); dataBlockStride is the distance of blocks inside a
//    repeat and repeatStride the distance of repeats, both in 32-byte blocks.
//    Masked-off destination elements keep their value.
// and the mask register: SetVectorMask / SetMaskNorm / SetMaskCount / ResetMask used
// with isSetMask = false (counter mode: the mask is a total element count and the
// repeat count follows from it).
// Every form checks that the elements it touches lie inside each LocalTensor.
// Does not model: the repeat-count limit of 255 beyond the uint8_t the API takes,
// 8-bit element masks, or bank conflicts.
#ifndef VNPU_ASCENDC_VECTOR_MASK_H
#define VNPU_ASCENDC_VECTOR_MASK_H

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "block_context.h"
#include "local_tensor.h"
#include "types.h"

namespace AscendC {

constexpr int32_t DEFAULT_BLK_NUM = 8;
constexpr int32_t DEFAULT_BLK_STRIDE = 1;
constexpr uint8_t DEFAULT_REPEAT_STRIDE = 8;
constexpr uint8_t HALF_DEFAULT_REPEAT_STRIDE = 4;
constexpr int32_t ONE_REPEAT_BYTE_SIZE = 256;
constexpr int32_t MAX_REPEAT_TIMES = 255;
// The mask argument of an API called with isSetMask = false (the register is used).
constexpr uint64_t MASK_PLACEHOLDER = 0;

struct BinaryRepeatParams {
  BinaryRepeatParams() {}
  BinaryRepeatParams(uint8_t dstBlkStrideIn, uint8_t src0BlkStrideIn, uint8_t src1BlkStrideIn, uint8_t dstRepStrideIn,
                     uint8_t src0RepStrideIn, uint8_t src1RepStrideIn)
      : dstBlkStride(dstBlkStrideIn),
        src0BlkStride(src0BlkStrideIn),
        src1BlkStride(src1BlkStrideIn),
        dstRepStride(dstRepStrideIn),
        src0RepStride(src0RepStrideIn),
        src1RepStride(src1RepStrideIn) {}
  uint32_t blockNumber = DEFAULT_BLK_NUM;
  uint8_t dstBlkStride = DEFAULT_BLK_STRIDE;
  uint8_t src0BlkStride = DEFAULT_BLK_STRIDE;
  uint8_t src1BlkStride = DEFAULT_BLK_STRIDE;
  uint8_t dstRepStride = DEFAULT_REPEAT_STRIDE;
  uint8_t src0RepStride = DEFAULT_REPEAT_STRIDE;
  uint8_t src1RepStride = DEFAULT_REPEAT_STRIDE;
  bool repeatStrideMode = false;
  bool strideSizeMode = false;
};

struct UnaryRepeatParams {
  UnaryRepeatParams() {}
  UnaryRepeatParams(uint16_t dstBlkStrideIn, uint16_t srcBlkStrideIn, uint8_t dstRepStrideIn, uint8_t srcRepStrideIn)
      : dstBlkStride(dstBlkStrideIn),
        srcBlkStride(srcBlkStrideIn),
        dstRepStride(dstRepStrideIn),
        srcRepStride(srcRepStrideIn) {}
  UnaryRepeatParams(uint16_t dstBlkStrideIn, uint16_t srcBlkStrideIn, uint8_t dstRepStrideIn, uint8_t srcRepStrideIn,
                    bool halfBlockIn)
      : dstBlkStride(dstBlkStrideIn),
        srcBlkStride(srcBlkStrideIn),
        dstRepStride(dstRepStrideIn),
        srcRepStride(srcRepStrideIn),
        halfBlock(halfBlockIn) {}
  uint32_t blockNumber = DEFAULT_BLK_NUM;
  uint16_t dstBlkStride = DEFAULT_BLK_STRIDE;
  uint16_t srcBlkStride = DEFAULT_BLK_STRIDE;
  uint8_t dstRepStride = DEFAULT_REPEAT_STRIDE;
  uint8_t srcRepStride = DEFAULT_REPEAT_STRIDE;
  bool repeatStrideMode = false;
  bool strideSizeMode = false;
  bool halfBlock = false;
};

enum class MaskMode : uint8_t { NORMAL = 0, COUNTER };

inline void SetMaskCount() { vnpu::ascendc::detail::CurrentBlock("SetMaskCount").mask_counter_mode = true; }
inline void SetMaskNorm() { vnpu::ascendc::detail::CurrentBlock("SetMaskNorm").mask_counter_mode = false; }

// Sets the mask register to explicit bits (normal mode).
template <typename T, MaskMode mode = MaskMode::NORMAL>
inline void SetVectorMask(uint64_t maskHigh, uint64_t maskLow) {
  auto& ctx = vnpu::ascendc::detail::CurrentBlock("SetVectorMask");
  ctx.mask_bits[0] = maskLow;
  ctx.mask_bits[1] = maskHigh;
}
// Sets the mask register to `len` leading elements (normal mode) or a total count of
// `len` elements (counter mode).
template <typename T, MaskMode mode = MaskMode::NORMAL>
inline void SetVectorMask(int32_t len) {
  auto& ctx = vnpu::ascendc::detail::CurrentBlock("SetVectorMask");
  bool counter = mode == MaskMode::COUNTER || ctx.mask_counter_mode;
  if (counter) {
    ctx.mask_bits[0] = static_cast<uint64_t>(len);
    ctx.mask_bits[1] = 0;
    return;
  }
  uint32_t n = len < 0 ? 0u : static_cast<uint32_t>(len);
  ctx.mask_bits[0] = n >= 64 ? ~0ull : ((1ull << n) - 1);
  ctx.mask_bits[1] = n >= 128 ? ~0ull : (n > 64 ? ((1ull << (n - 64)) - 1) : 0);
}
inline void ResetMask() {
  auto& ctx = vnpu::ascendc::detail::CurrentBlock("ResetMask");
  ctx.mask_bits[0] = ctx.mask_bits[1] = ~0ull;
}

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

// Elements of T per 32-byte block and per 256-byte repeat.
template <typename T>
constexpr uint32_t ElemsPerBlock() {
  return 32 / sizeof(T);
}
template <typename T>
constexpr uint32_t ElemsPerRepeat() {
  return 256 / sizeof(T);
}

// Which elements of which repeats an instruction processes.
struct VecMask {
  uint64_t bits[2] = {0, 0};  // normal mode: element j of every repeat is active if bit j is set
  bool counter = false;       // counter mode: the first `total` elements, repeat after repeat
  uint64_t total = 0;

  bool Active(uint32_t repeat, uint32_t j, uint32_t per_repeat) const {
    if (counter) return static_cast<uint64_t>(repeat) * per_repeat + j < total;
    return (bits[j >> 6] >> (j & 63)) & 1u;
  }
};

// A mask of `n` leading elements (the "continuous" form), clamped to a repeat.
template <typename T>
inline VecMask ContinuousMask(uint64_t n) {
  VecMask m;
  constexpr uint32_t per_repeat = ElemsPerRepeat<T>() > 128 ? 128 : ElemsPerRepeat<T>();
  if (n > per_repeat) n = per_repeat;
  m.bits[0] = n >= 64 ? ~0ull : ((1ull << n) - 1);
  m.bits[1] = n >= 128 ? ~0ull : (n > 64 ? ((1ull << (n - 64)) - 1) : 0);
  return m;
}
// The "bit" form: mask[0] covers elements 0..63, mask[1] 64..127 (16-bit types only).
template <typename T>
inline VecMask BitMask(const uint64_t mask[]) {
  VecMask m;
  m.bits[0] = mask[0];
  m.bits[1] = sizeof(T) == 2 ? mask[1] : 0;
  return m;
}
// The mask register (isSetMask = false).
inline VecMask RegisterMask(const char* api) {
  BlockContext& ctx = CurrentBlock(api);
  VecMask m;
  if (ctx.mask_counter_mode) {
    m.counter = true;
    m.total = ctx.mask_bits[0];
  } else {
    m.bits[0] = ctx.mask_bits[0];
    m.bits[1] = ctx.mask_bits[1];
  }
  return m;
}
template <typename T, bool isSetMask>
inline VecMask PickMask(uint64_t mask, const char* api) {
  return isSetMask ? ContinuousMask<T>(mask) : RegisterMask(api);
}
template <typename T, bool isSetMask>
inline VecMask PickMask(const uint64_t mask[], const char* api) {
  return isSetMask ? BitMask<T>(mask) : RegisterMask(api);
}

// How one operand of a repeat-form instruction is addressed.
struct Stride {
  uint32_t block;   // dataBlockStride, in 32-byte blocks
  uint32_t repeat;  // repeatStride, in 32-byte blocks
};

template <typename T>
inline uint64_t OffsetOf(Stride s, uint32_t repeat, uint32_t j) {
  constexpr uint32_t epb = ElemsPerBlock<T>();
  return (static_cast<uint64_t>(repeat) * s.repeat + static_cast<uint64_t>(j / epb) * s.block) * epb + j % epb;
}

// Repeats the instruction actually runs (counter mode derives them from the count).
inline uint32_t RepeatsOf(const VecMask& m, uint32_t repeat, uint32_t per_repeat) {
  if (!m.counter) return repeat;
  return static_cast<uint32_t>((m.total + per_repeat - 1) / per_repeat);
}

// Fails unless every element the instruction touches in `t` (addressed with `s`, one
// repeat covering `per_repeat` elements) lies inside it.
template <typename T>
inline void CheckRepeatExtent(const AscendC::LocalTensor<T>& t, Stride s, const VecMask& m, uint32_t repeats,
                              uint32_t per_repeat, const char* api, const char* role) {
  if (repeats == 0) return;
  uint64_t max_off = 0;
  bool any = false;
  for (uint32_t r = 0; r < repeats; ++r) {
    for (uint32_t j = 0; j < per_repeat; ++j) {
      if (!m.Active(r, j, per_repeat)) continue;
      uint64_t off = OffsetOf<T>(s, r, j);
      if (!any || off > max_off) max_off = off;
      any = true;
    }
  }
  if (any && max_off >= t.GetSize()) {
    Fail(Str(api, ": with these repeat/stride/mask parameters the instruction reaches element ", max_off, " of ",
             role, ", which has only ", t.GetSize(), " elements"));
  }
}

// Calls f(repeat, j) for every active element position.
template <typename F>
inline void ForEachActive(const VecMask& m, uint32_t repeats, uint32_t per_repeat, F&& f) {
  for (uint32_t r = 0; r < repeats; ++r) {
    for (uint32_t j = 0; j < per_repeat; ++j) {
      if (m.Active(r, j, per_repeat)) f(r, j);
    }
  }
}

// Fails unless count elements fit every listed tensor.
template <typename T>
inline void CheckCountFits(int64_t count, const AscendC::LocalTensor<T>& t, const char* api, const char* role) {
  if (count < 0) Fail(Str(api, ": count is ", count, ", which must not be negative"));
  if (static_cast<uint64_t>(count) > t.GetSize()) {
    Fail(Str(api, ": count ", count, " exceeds the ", t.GetSize(), " elements of ", role, " (a ",
             PositionName(t.Position()), " tensor of ", TypeName<T>(), ")"));
  }
}

// Types the count form runs on 16-byte SIMD vectors (the 16-bit floats go through float).
template <typename T>
struct Vectorizable
    : std::integral_constant<bool, std::is_same<T, float>::value || std::is_same<T, int32_t>::value ||
                                       std::is_same<T, uint32_t>::value || std::is_same<T, int16_t>::value ||
                                       std::is_same<T, uint16_t>::value> {};

template <typename T>
struct Vec16 {
  typedef T type __attribute__((vector_size(16)));
};

// d[i] = op(a[i], b[i]) for i < n: SIMD for the plain types, float for half/bfloat16_t.
template <typename T, typename Op>
inline void MapBinary(T* d, const T* a, const T* b, int64_t n, Op op) {
  int64_t i = 0;
  if constexpr (Vectorizable<T>::value) {
    using V = typename Vec16<T>::type;
    constexpr int64_t L = 16 / sizeof(T);
    for (; i + 2 * L <= n; i += 2 * L) {
      V x0, y0, x1, y1;
      std::memcpy(&x0, a + i, 16);
      std::memcpy(&x1, a + i + L, 16);
      std::memcpy(&y0, b + i, 16);
      std::memcpy(&y1, b + i + L, 16);
      V z0 = op(x0, y0), z1 = op(x1, y1);
      std::memcpy(d + i, &z0, 16);
      std::memcpy(d + i + L, &z1, 16);
    }
    for (; i < n; ++i) d[i] = op(a[i], b[i]);
  } else {
    using C = typename ComputeType<T>::type;
    for (; i < n; ++i) d[i] = static_cast<T>(op(static_cast<C>(a[i]), static_cast<C>(b[i])));
  }
}

// d[i] = op(a[i]) for i < n.
template <typename T, typename Op>
inline void MapUnary(T* d, const T* a, int64_t n, Op op) {
  int64_t i = 0;
  if constexpr (Vectorizable<T>::value && Op::kSimd) {
    using V = typename Vec16<T>::type;
    constexpr int64_t L = 16 / sizeof(T);
    for (; i + 2 * L <= n; i += 2 * L) {
      V x0, x1;
      std::memcpy(&x0, a + i, 16);
      std::memcpy(&x1, a + i + L, 16);
      V z0 = op(x0), z1 = op(x1);
      std::memcpy(d + i, &z0, 16);
      std::memcpy(d + i + L, &z1, 16);
    }
    for (; i < n; ++i) d[i] = op(a[i]);
  } else {
    using C = typename ComputeType<T>::type;
    for (; i < n; ++i) d[i] = static_cast<T>(op(static_cast<C>(a[i])));
  }
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

#endif  // VNPU_ASCENDC_VECTOR_MASK_H
