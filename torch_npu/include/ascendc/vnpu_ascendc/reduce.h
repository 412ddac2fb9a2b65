// Ascend C on the virtual NPU: reductions.
//
// Models, with 910B's summation order (so half results match the device's rounding):
//  - WholeReduceSum / WholeReduceMax / WholeReduceMin: one result per repeat (256 bytes
//    of source), written every dstRepStride results; Max/Min also write the index of the
//    first extreme element inside the repeat, in the element's bits (ReduceOrder).
//  - ReduceSum / ReduceMax / ReduceMin over a whole tensor, count form and mask/repeat
//    form, with the sharedTmpBuffer the device needs: its size is checked with CANN's
//    formulas (an error names the elements needed). ReduceMax/ReduceMin with calIndex
//    store the index after the value, as the value type's bits (read it back with
//    reinterpret_cast to uint16_t for half, uint32_t for float).
// Sums inside a repeat are a pairwise (binary) tree of adjacent elements; the count form
// adds the repeat sums in order, the repeat form adds them by another tree (CANN's
// "method one" and "method two" on Atlas A2). Every partial sum is rounded to T.
// Does not model: BlockReduce*/PairReduceSum, ReduceRepeat, the GetReduceMaxMinCount /
// GetAccVal special registers, and the contents the device leaves in sharedTmpBuffer.
#ifndef VNPU_ASCENDC_REDUCE_H
#define VNPU_ASCENDC_REDUCE_H

#include <cstdint>
#include <cstring>
#include <vector>

#include "local_tensor.h"
#include "vector_mask.h"

namespace AscendC {

enum class ReduceOrder : uint8_t { ORDER_VALUE_INDEX, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

// Sums vals[0..n) (n a power of two) as a tree of adjacent pairs, rounding to T.
template <typename T>
inline typename ComputeType<T>::type TreeSum(typename ComputeType<T>::type* vals, uint32_t n) {
  using C = typename ComputeType<T>::type;
  for (uint32_t len = n; len > 1; len /= 2) {
    for (uint32_t k = 0; k < len / 2; ++k) vals[k] = static_cast<C>(static_cast<T>(vals[2 * k] + vals[2 * k + 1]));
  }
  return vals[0];
}

// The tree sum of one repeat: active elements of repeat r of src (addressed with s).
template <typename T>
inline typename ComputeType<T>::type RepeatSum(const T* src, Stride s, const VecMask& m, uint32_t r) {
  using C = typename ComputeType<T>::type;
  constexpr uint32_t per = ElemsPerRepeat<T>();
  C vals[per];
  for (uint32_t j = 0; j < per; ++j) vals[j] = m.Active(r, j, per) ? static_cast<C>(src[OffsetOf<T>(s, r, j)]) : C(0);
  return TreeSum<T>(vals, per);
}

// The extreme (max if want_max) of one repeat and its index inside the repeat; the
// first one on ties. Returns false if no element is active.
template <typename T>
inline bool RepeatExtreme(const T* src, Stride s, const VecMask& m, uint32_t r, bool want_max,
                          typename ComputeType<T>::type* value, uint32_t* index) {
  using C = typename ComputeType<T>::type;
  constexpr uint32_t per = ElemsPerRepeat<T>();
  bool any = false;
  for (uint32_t j = 0; j < per; ++j) {
    if (!m.Active(r, j, per)) continue;
    C v = static_cast<C>(src[OffsetOf<T>(s, r, j)]);
    if (!any || (want_max ? v > *value : v < *value)) {
      *value = v;
      *index = j;
      any = true;
    }
  }
  return any;
}

// An index stored in the bits of a T element.
template <typename T>
inline T IndexAsElement(uint32_t index) {
  T out{};
  if (sizeof(T) == 2) {
    uint16_t i16 = static_cast<uint16_t>(index);
    std::memcpy(&out, &i16, 2);
  } else {
    std::memcpy(&out, &index, sizeof(T) < 4 ? sizeof(T) : 4);
  }
  return out;
}

inline uint32_t DivCeilU(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// sharedTmpBuffer elements ReduceMax/ReduceMin need (CANN's formula, Atlas A2).
template <typename T>
inline uint64_t MaxMinTmpElements(uint32_t first_max_repeat, bool cal_index) {
  const uint64_t epb = ElemsPerBlock<T>(), epr = ElemsPerRepeat<T>();
  const uint64_t iter1_output = static_cast<uint64_t>(first_max_repeat) * 2;
  if (!cal_index) return DivCeilU(iter1_output, epb) * epb;
  const uint64_t iter2_start = DivCeilU(iter1_output, epb) * epb;
  const uint64_t iter2_output = static_cast<uint64_t>(DivCeilU(iter1_output, epr)) * 2;
  const uint64_t iter2_end = DivCeilU(iter2_output, epb) * epb;
  uint64_t need = iter2_start + iter2_end;
  if (iter2_output > 2) {
    const uint64_t iter3_output = static_cast<uint64_t>(DivCeilU(iter2_output, epr)) * 2;
    const uint64_t iter3_end = DivCeilU(iter3_output, epb) * epb;
    need = iter2_start + iter2_end + iter3_end;
  }
  return need;
}

template <typename T>
inline void CheckTmp(const AscendC::LocalTensor<T>& tmp, uint64_t need, const char* api) {
  if (tmp.GetSize() < need) {
    Fail(Str(api, ": sharedTmpBuffer has ", tmp.GetSize(), " elements of ", TypeName<T>(), " but the device needs ",
             need, " (see the API's sharedTmpBuffer size formula)"));
  }
}

// ReduceMax/ReduceMin over `repeats` repeats: value and (optionally) index to dst[0..1].
template <typename T>
inline void ReduceExtreme(const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                          Stride s, const VecMask& m, uint32_t repeats, bool want_max, bool cal_index) {
  using C = typename ComputeType<T>::type;
  constexpr uint32_t per = ElemsPerRepeat<T>();
  CheckRepeatExtent(src, s, m, repeats, per, api, "src");
  CheckCountFits(cal_index ? 2 : 1, dst, api, "dst");
  bool any = false;
  C best{};
  uint32_t best_index = 0;
  for (uint32_t r = 0; r < repeats; ++r) {
    C v{};
    uint32_t j = 0;
    if (!RepeatExtreme(src.Data(), s, m, r, want_max, &v, &j)) continue;
    if (!any || (want_max ? v > best : v < best)) {
      best = v;
      best_index = r * per + j;
      any = true;
    }
  }
  if (!any) return;  // nothing active: the device writes nothing (NOP)
  dst.Data()[0] = static_cast<T>(best);
  if (cal_index) dst.Data()[1] = IndexAsElement<T>(best_index);
}

// ReduceSum count form: repeat tree sums added in order (910B "method one").
template <typename T>
inline void ReduceSumCount(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src, int32_t count) {
  using C = typename ComputeType<T>::type;
  constexpr uint32_t per = ElemsPerRepeat<T>();
  CheckCountFits(count, src, "ReduceSum", "src");
  if (count == 0) return;
  CheckCountFits(1, dst, "ReduceSum", "dst");
  VecMask m;
  m.counter = true;
  m.total = static_cast<uint64_t>(count);
  const uint32_t repeats = DivCeilU(count, per);
  C acc = RepeatSum(src.Data(), Stride{1, 8}, m, 0);
  for (uint32_t r = 1; r < repeats; ++r) acc = static_cast<C>(static_cast<T>(acc + RepeatSum(src.Data(), Stride{1, 8}, m, r)));
  dst.Data()[0] = static_cast<T>(acc);
}

// ReduceSum repeat form: repeat tree sums, then trees of those (910B "method two").
template <typename T>
inline void ReduceSumRepeat(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                            const AscendC::LocalTensor<T>& tmp, const VecMask& m, int32_t repeatTime,
                            int32_t srcRepStride) {
  using C = typename ComputeType<T>::type;
  constexpr uint32_t per = ElemsPerRepeat<T>();
  if (repeatTime <= 0) return;
  const uint32_t repeats = RepeatsOf(m, static_cast<uint32_t>(repeatTime), per);
  const Stride s{1, static_cast<uint32_t>(srcRepStride)};
  CheckRepeatExtent(src, s, m, repeats, per, "ReduceSum", "src");
  CheckTmp(tmp, static_cast<uint64_t>(DivCeilU(repeats, ElemsPerBlock<T>())) * ElemsPerBlock<T>(), "ReduceSum");
  CheckCountFits(1, dst, "ReduceSum", "dst");
  std::vector<C> partial(repeats);
  for (uint32_t r = 0; r < repeats; ++r) partial[r] = RepeatSum(src.Data(), s, m, r);
  while (partial.size() > 1) {
    std::vector<C> next(DivCeilU(partial.size(), per));
    for (size_t g = 0; g < next.size(); ++g) {
      C vals[per];
      for (uint32_t j = 0; j < per; ++j) {
        size_t k = g * per + j;
        vals[j] = k < partial.size() ? partial[k] : C(0);
      }
      next[g] = TreeSum<T>(vals, per);
    }
    partial.swap(next);
  }
  dst.Data()[0] = static_cast<T>(partial[0]);
}

template <typename T>
inline void WholeReduceSumImpl(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                               const VecMask& m, int32_t repeatTimes, int32_t dstRepStride, int32_t srcBlkStride,
                               int32_t srcRepStride) {
  constexpr uint32_t per = ElemsPerRepeat<T>();
  if (repeatTimes <= 0) return;
  const uint32_t repeats = RepeatsOf(m, static_cast<uint32_t>(repeatTimes), per);
  const Stride s{static_cast<uint32_t>(srcBlkStride), static_cast<uint32_t>(srcRepStride)};
  CheckRepeatExtent(src, s, m, repeats, per, "WholeReduceSum", "src");
  CheckCountFits(static_cast<int64_t>(repeats - 1) * dstRepStride + 1, dst, "WholeReduceSum", "dst");
  for (uint32_t r = 0; r < repeats; ++r) {
    dst.Data()[static_cast<uint64_t>(r) * dstRepStride] = static_cast<T>(RepeatSum(src.Data(), s, m, r));
  }
}

template <typename T>
inline void WholeReduceExtremeImpl(const char* api, const AscendC::LocalTensor<T>& dst,
                                   const AscendC::LocalTensor<T>& src, const VecMask& m, int32_t repeatTimes,
                                   int32_t dstRepStride, int32_t srcBlkStride, int32_t srcRepStride,
                                   AscendC::ReduceOrder order, bool want_max) {
  using AscendC::ReduceOrder;
  using C = typename ComputeType<T>::type;
  constexpr uint32_t per = ElemsPerRepeat<T>();
  if (repeatTimes <= 0) return;
  const uint32_t repeats = RepeatsOf(m, static_cast<uint32_t>(repeatTimes), per);
  const Stride s{static_cast<uint32_t>(srcBlkStride), static_cast<uint32_t>(srcRepStride)};
  CheckRepeatExtent(src, s, m, repeats, per, api, "src");
  // Results per repeat, in T elements: value+index pairs, a value, or a uint32_t index.
  const uint64_t unit = (order == ReduceOrder::ORDER_VALUE_INDEX || order == ReduceOrder::ORDER_INDEX_VALUE) ? 2
                        : order == ReduceOrder::ORDER_ONLY_INDEX ? 4 / sizeof(T) > 0 ? 4 / sizeof(T) : 1
                                                                   : 1;
  CheckCountFits(static_cast<int64_t>((static_cast<uint64_t>(repeats - 1) * dstRepStride + 1) * unit), dst, api,
                 "dst");
  T* o = dst.Data();
  for (uint32_t r = 0; r < repeats; ++r) {
    C v{};
    uint32_t j = 0;
    if (!RepeatExtreme(src.Data(), s, m, r, want_max, &v, &j)) continue;
    T* slot = o + static_cast<uint64_t>(r) * dstRepStride * unit;
    switch (order) {
      case ReduceOrder::ORDER_VALUE_INDEX:
        slot[0] = static_cast<T>(v);
        slot[1] = IndexAsElement<T>(j);
        break;
      case ReduceOrder::ORDER_INDEX_VALUE:
        slot[0] = IndexAsElement<T>(j);
        slot[1] = static_cast<T>(v);
        break;
      case ReduceOrder::ORDER_ONLY_VALUE:
        slot[0] = static_cast<T>(v);
        break;
      case ReduceOrder::ORDER_ONLY_INDEX:
        std::memcpy(slot, &j, 4);
        break;
    }
  }
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

// ---- ReduceSum ----
template <typename T, bool isSetMask = true>
inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const int32_t count) {
  (void)sharedTmpBuffer;  // 910B's count form does not use it
  vnpu::ascendc::detail::ReduceSumCount(dst, src, count);
}
template <typename T>
inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const uint64_t mask[], const int32_t repeatTime, const int32_t srcRepStride) {
  vnpu::ascendc::detail::ReduceSumRepeat(dst, src, sharedTmpBuffer, vnpu::ascendc::detail::BitMask<T>(mask),
                                         repeatTime, srcRepStride);
}
template <typename T>
inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const int32_t mask, const int32_t repeatTime, const int32_t srcRepStride) {
  vnpu::ascendc::detail::ReduceSumRepeat(dst, src, sharedTmpBuffer,
                                         vnpu::ascendc::detail::ContinuousMask<T>(mask < 0 ? 0 : mask), repeatTime,
                                         srcRepStride);
}

// ---- ReduceMax / ReduceMin ----
namespace vnpu_detail {
template <typename T>
inline void ReduceExtremeCount(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& src,
                               const LocalTensor<T>& tmp, int32_t count, bool calIndex, bool want_max) {
  namespace d = vnpu::ascendc::detail;
  d::CheckCountFits(count, src, api, "src");
  if (count == 0) return;
  constexpr uint32_t per = d::ElemsPerRepeat<T>();
  uint32_t first_max_repeat = static_cast<uint32_t>(count) / per;
  if (first_max_repeat == 0) first_max_repeat = 1;
  d::CheckTmp(tmp, d::MaxMinTmpElements<T>(first_max_repeat, calIndex), api);
  d::VecMask m;
  m.counter = true;
  m.total = static_cast<uint64_t>(count);
  d::ReduceExtreme(api, dst, src, d::Stride{1, 8}, m, d::DivCeilU(count, per), want_max, calIndex);
}
template <typename T>
inline void ReduceExtremeRepeat(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                const LocalTensor<T>& tmp, const vnpu::ascendc::detail::VecMask& m,
                                int32_t repeatTime, int32_t srcRepStride, bool calIndex, bool want_max) {
  namespace d = vnpu::ascendc::detail;
  if (repeatTime <= 0) return;
  d::CheckTmp(tmp, d::MaxMinTmpElements<T>(static_cast<uint32_t>(repeatTime), calIndex), api);
  d::ReduceExtreme(api, dst, src, d::Stride{1, static_cast<uint32_t>(srcRepStride)}, m,
                   d::RepeatsOf(m, static_cast<uint32_t>(repeatTime), d::ElemsPerRepeat<T>()), want_max, calIndex);
}
}  // namespace vnpu_detail

template <typename T>
inline void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const int32_t count, bool calIndex = 0) {
  vnpu_detail::ReduceExtremeCount("ReduceMax", dst, src, sharedTmpBuffer, count, calIndex, true);
}
template <typename T>
inline void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const uint64_t mask[], const int32_t repeatTime, const int32_t srcRepStride,
                      bool calIndex = 0) {
  vnpu_detail::ReduceExtremeRepeat("ReduceMax", dst, src, sharedTmpBuffer, vnpu::ascendc::detail::BitMask<T>(mask),
                                   repeatTime, srcRepStride, calIndex, true);
}
template <typename T>
inline void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const int32_t mask, const int32_t repeatTime, const int32_t srcRepStride, bool calIndex = 0) {
  vnpu_detail::ReduceExtremeRepeat("ReduceMax", dst, src, sharedTmpBuffer,
                                   vnpu::ascendc::detail::ContinuousMask<T>(mask < 0 ? 0 : mask), repeatTime,
                                   srcRepStride, calIndex, true);
}
template <typename T>
inline void ReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const int32_t count, bool calIndex = 0) {
  vnpu_detail::ReduceExtremeCount("ReduceMin", dst, src, sharedTmpBuffer, count, calIndex, false);
}
template <typename T>
inline void ReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const uint64_t mask[], const int32_t repeatTime, const int32_t srcRepStride,
                      bool calIndex = 0) {
  vnpu_detail::ReduceExtremeRepeat("ReduceMin", dst, src, sharedTmpBuffer, vnpu::ascendc::detail::BitMask<T>(mask),
                                   repeatTime, srcRepStride, calIndex, false);
}
template <typename T>
inline void ReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
                      const int32_t mask, const int32_t repeatTime, const int32_t srcRepStride, bool calIndex = 0) {
  vnpu_detail::ReduceExtremeRepeat("ReduceMin", dst, src, sharedTmpBuffer,
                                   vnpu::ascendc::detail::ContinuousMask<T>(mask < 0 ? 0 : mask), repeatTime,
                                   srcRepStride, calIndex, false);
}

// ---- WholeReduceSum / WholeReduceMax / WholeReduceMin ----
template <typename T, bool isSetMask = true>
inline void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t mask[],
                           const int32_t repeatTimes, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride) {
  vnpu::ascendc::detail::WholeReduceSumImpl(dst, src,
                                            vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, "WholeReduceSum"),
                                            repeatTimes, dstRepStride, srcBlkStride, srcRepStride);
}
template <typename T, bool isSetMask = true>
inline void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTimes, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride) {
  vnpu::ascendc::detail::WholeReduceSumImpl(
      dst, src, vnpu::ascendc::detail::PickMask<T, isSetMask>(static_cast<uint64_t>(mask < 0 ? 0 : mask),
                                                              "WholeReduceSum"),
      repeatTimes, dstRepStride, srcBlkStride, srcRepStride);
}
template <typename T, bool isSetMask = true>
inline void WholeReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t mask[],
                           const int32_t repeatTimes, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {
  vnpu::ascendc::detail::WholeReduceExtremeImpl("WholeReduceMax", dst, src,
                                                vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, "WholeReduceMax"),
                                                repeatTimes, dstRepStride, srcBlkStride, srcRepStride, order, true);
}
template <typename T, bool isSetMask = true>
inline void WholeReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTimes, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {
  vnpu::ascendc::detail::WholeReduceExtremeImpl(
      "WholeReduceMax", dst, src,
      vnpu::ascendc::detail::PickMask<T, isSetMask>(static_cast<uint64_t>(mask < 0 ? 0 : mask), "WholeReduceMax"),
      repeatTimes, dstRepStride, srcBlkStride, srcRepStride, order, true);
}
template <typename T, bool isSetMask = true>
inline void WholeReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t mask[],
                           const int32_t repeatTimes, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {
  vnpu::ascendc::detail::WholeReduceExtremeImpl("WholeReduceMin", dst, src,
                                                vnpu::ascendc::detail::PickMask<T, isSetMask>(mask, "WholeReduceMin"),
                                                repeatTimes, dstRepStride, srcBlkStride, srcRepStride, order, false);
}
template <typename T, bool isSetMask = true>
inline void WholeReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                           const int32_t repeatTimes, const int32_t dstRepStride, const int32_t srcBlkStride,
                           const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {
  vnpu::ascendc::detail::WholeReduceExtremeImpl(
      "WholeReduceMin", dst, src,
      vnpu::ascendc::detail::PickMask<T, isSetMask>(static_cast<uint64_t>(mask < 0 ? 0 : mask), "WholeReduceMin"),
      repeatTimes, dstRepStride, srcBlkStride, srcRepStride, order, false);
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_REDUCE_H
