// Ascend C on the virtual NPU: the Cube unit's basic API (ND2NZ copy, LoadData, Mmad, Fixpipe).
//
// Models the data path of a matrix multiply on a 910B AI core, in the fractal formats
// the hardware uses (a fractal is 16 rows x C0 elements, C0 = 32 bytes / sizeof(T)):
//  - DataCopy(L1 tensor, GM tensor, Nd2NzParams): an ND matrix [nValue, dValue] (rows
//    srcDValue elements apart) becomes NZ in L1: element (n, d) lands at
//    (d / C0) * dstNzC0Stride * C0 + n * dstNzNStride * C0 + d % C0; the rest of a
//    partial C0 column is zero-filled. ndNum matrices, srcNdMatrixStride /
//    dstNzMatrixStride elements apart.
//  - LoadData(L0A/L0B tensor, L1 tensor, LoadData2DParams): repeatTimes fractals of
//    512 bytes, source fractal startIndex + r * srcStride, destination fractal
//    r * (1 + dstGap), each transposed (16 x 16, b16 only) with ifTranspose.
//  - Mmad(L0C, L0A, L0B[, bias], MmadParams): L0A holds A [m, k] as "Zz" (fractal (i, j)
//    at i * ceil(k / C0) + j, row-major inside), L0B holds B [k, n] as "Zn" (fractal (i, j)
//    at i * ceil(n / 16) + j, each stored n-major), L0C receives C [m, n] as NZ float
//    (or int32 for int8): (n / 16) * ceil(m / 16) * 256 + m * 16 + n % 16. cmatrixInitVal
//    starts from zero, otherwise C accumulates; a bias adds bias[n].
//  - Fixpipe<T, U, config>(GM tensor, L0C tensor, FixpipeParamsV220): NZ -> ND
//    (CFG_ROW_MAJOR: row m at m * dstStride elements) or NZ -> NZ (CFG_NZ: Z columns
//    dstStride 32-byte blocks apart), with QuantMode_t NoQuant / F322F16 / F322BF16
//    (round to nearest even) and reluEn, honouring the atomic mode.
// Every transfer checks its positions, its extent in each tensor and GM bounds; the
// first Cube instruction of a block checks blockDim against the AIC cores.
// Does not model: LoadData 3D (img2col), LoadData from GM, the other quantization modes,
// channel split, unit flags (accepted, no effect), sparse and MX matmul.
#ifndef VNPU_ASCENDC_CUBE_H
#define VNPU_ASCENDC_CUBE_H

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "atomic.h"
#include "block_context.h"
#include "global_tensor.h"
#include "local_tensor.h"
#include "positions.h"
#include "system.h"
#include "types.h"

enum QuantMode_t {
  NoQuant,
  F322F16,
  F322BF16,
  DEQF16,
  VDEQF16,
  QF322B8_PRE,
  VQF322B8_PRE,
  REQ8,
  VREQ8,
};

namespace AscendC {

struct Nd2NzParams {
  Nd2NzParams() {}
  Nd2NzParams(uint16_t ndNumIn, uint16_t nValueIn, uint16_t dValueIn, uint16_t srcNdMatrixStrideIn,
              uint16_t srcDValueIn, uint16_t dstNzC0StrideIn, uint16_t dstNzNStrideIn, uint16_t dstNzMatrixStrideIn)
      : ndNum(ndNumIn),
        nValue(nValueIn),
        dValue(dValueIn),
        srcNdMatrixStride(srcNdMatrixStrideIn),
        srcDValue(srcDValueIn),
        dstNzC0Stride(dstNzC0StrideIn),
        dstNzNStride(dstNzNStrideIn),
        dstNzMatrixStride(dstNzMatrixStrideIn) {}
  uint16_t ndNum = 0;
  uint16_t nValue = 0;
  uint16_t dValue = 0;
  uint16_t srcNdMatrixStride = 0;
  uint16_t srcDValue = 0;
  uint16_t dstNzC0Stride = 0;
  uint16_t dstNzNStride = 0;
  uint16_t dstNzMatrixStride = 0;
};

struct LoadData2DParams {
  LoadData2DParams() {}
  LoadData2DParams(uint16_t startIndexIn, uint8_t repeatTimesIn, uint16_t srcStrideIn, uint8_t sidIn,
                   uint16_t dstGapIn, bool ifTransposeIn, uint8_t addrModeIn)
      : startIndex(startIndexIn),
        dstGap(dstGapIn),
        srcStride(srcStrideIn),
        ifTranspose(ifTransposeIn),
        repeatTimes(repeatTimesIn),
        sid(sidIn),
        addrMode(addrModeIn) {}
  uint16_t startIndex = 0;
  uint16_t dstGap = 0;
  uint16_t srcStride = 0;
  bool ifTranspose = false;
  uint8_t repeatTimes = 0;
  uint8_t sid = 0;
  uint8_t addrMode = 0;
};

struct MmadParams {
  MmadParams() {}
  MmadParams(uint16_t mIn, uint16_t nIn, uint16_t kIn, uint8_t unitFlagIn, bool cmatrixSourceIn,
             bool cmatrixInitValIn)
      : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn), cmatrixInitVal(cmatrixInitValIn) {}
  uint16_t m = 0;
  uint16_t n = 0;
  uint16_t k = 0;
  bool isBias = false;
  int32_t fmOffset = 0;
  bool enSsparse = false;
  bool enWinogradA = false;
  bool enWinogradB = false;
  uint8_t unitFlag = 0;
  bool kDirectionAlign = false;
  bool cmatrixSource = false;
  bool cmatrixInitVal = true;
};

enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR, COLUMN_MAJOR };
struct FixpipeConfig {
  CO2Layout format;
  constexpr FixpipeConfig(CO2Layout f) : format(f) {}  // NOLINT: CANN's aggregate-like use
  constexpr FixpipeConfig(CO2Layout f, bool) : format(f) {}
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};

struct FixpipeParamsV220 {
  FixpipeParamsV220() {}
  FixpipeParamsV220(uint16_t nSizeIn, uint16_t mSizeIn, uint16_t srcStrideIn, uint32_t dstStrideIn, bool reluEnIn)
      : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), reluEn(reluEnIn) {}
  FixpipeParamsV220(uint16_t nSizeIn, uint16_t mSizeIn, uint16_t srcStrideIn, uint32_t dstStrideIn, bool reluEnIn,
                    QuantMode_t quantPreIn, int64_t deqScalarIn, uint16_t ndNumIn, uint16_t srcNdStrideIn,
                    uint16_t dstNdStrideIn, uint8_t unitFlagIn)
      : nSize(nSizeIn),
        mSize(mSizeIn),
        srcStride(srcStrideIn),
        dstStride(dstStrideIn),
        reluEn(reluEnIn),
        quantPre(quantPreIn),
        deqScalar(deqScalarIn),
        ndNum(ndNumIn),
        srcNdStride(srcNdStrideIn),
        dstNdStride(dstNdStrideIn),
        unitFlag(unitFlagIn) {}
  uint16_t nSize = 0;
  uint16_t mSize = 0;
  uint16_t srcStride = 0;
  uint32_t dstStride = 0;
  bool reluEn = false;
  QuantMode_t quantPre = QuantMode_t::NoQuant;
  int64_t deqScalar = 0;
  uint16_t ndNum = 1;
  uint16_t srcNdStride = 0;
  uint16_t dstNdStride = 0;
  uint8_t unitFlag = 0;
  bool isChannelSplit = false;
};

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

constexpr uint32_t kFractalBytes = 512;

template <typename T>
constexpr uint32_t C0() {
  return 32 / sizeof(T);
}

inline void CheckPosition(AscendC::TPosition got, std::initializer_list<AscendC::TPosition> allowed, const char* api,
                          const char* role) {
  for (AscendC::TPosition p : allowed) {
    if (got == p) return;
  }
  std::string names;
  for (AscendC::TPosition p : allowed) names += (names.empty() ? "" : "/") + std::string(PositionName(p));
  Fail(Str(api, ": the ", role, " is a ", PositionName(got), " tensor; it must be ", names));
}

template <typename T>
inline void CheckExtent(const AscendC::LocalTensor<T>& t, uint64_t elements, const char* api, const char* role) {
  if (elements > t.GetSize()) {
    Fail(Str(api, ": the instruction reaches element ", elements, " of the ", role, " (a ", PositionName(t.Position()),
             " tensor of ", t.GetSize(), " elements)"));
  }
}

inline uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

// GM (ND) -> L1 (NZ).
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p) {
  namespace d = vnpu::ascendc::detail;
  const char* api = "DataCopy GM->L1 (Nd2NzParams)";
  d::CheckPosition(dst.Position(), {TPosition::A1, TPosition::B1, TPosition::C1, TPosition::TSCM}, api,
                   "destination");
  constexpr uint32_t c0 = d::C0<T>();
  if (p.ndNum == 0 || p.nValue == 0 || p.dValue == 0) return;
  if (p.srcDValue < p.dValue && p.nValue > 1) {
    d::Fail(d::Str(api, ": srcDValue (", p.srcDValue, ") is smaller than dValue (", p.dValue, ")"));
  }
  const uint64_t cols = d::CeilDiv(p.dValue, c0);
  const uint64_t dstLast = static_cast<uint64_t>(p.ndNum - 1) * p.dstNzMatrixStride +
                           (cols - 1) * p.dstNzC0Stride * c0 + static_cast<uint64_t>(p.nValue - 1) * p.dstNzNStride * c0 + c0;
  d::CheckExtent(dst, dstLast, api, "destination");
  const uint64_t srcLast = static_cast<uint64_t>(p.ndNum - 1) * p.srcNdMatrixStride +
                           static_cast<uint64_t>(p.nValue - 1) * p.srcDValue + p.dValue;
  src.Check(0, srcLast, api);
  const T* s = src.GetPhyAddr();
  T* o = dst.Data();
  for (uint32_t nd = 0; nd < p.ndNum; ++nd) {
    for (uint32_t n = 0; n < p.nValue; ++n) {
      const T* row = s + static_cast<uint64_t>(nd) * p.srcNdMatrixStride + static_cast<uint64_t>(n) * p.srcDValue;
      for (uint64_t c = 0; c < cols; ++c) {
        T* block = o + static_cast<uint64_t>(nd) * p.dstNzMatrixStride + c * p.dstNzC0Stride * c0 +
                   static_cast<uint64_t>(n) * p.dstNzNStride * c0;
        for (uint32_t e = 0; e < c0; ++e) {
          uint64_t col = c * c0 + e;
          block[e] = col < p.dValue ? row[col] : T(0);
        }
      }
    }
  }
}

// L1 -> L0A / L0B, fractal by fractal.
template <typename T>
inline void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p) {
  namespace d = vnpu::ascendc::detail;
  const char* api = "LoadData (2D)";
  d::NoteCubeUse(api);
  d::CheckPosition(src.Position(), {TPosition::A1, TPosition::B1, TPosition::C1, TPosition::TSCM}, api, "source");
  d::CheckPosition(dst.Position(), {TPosition::A2, TPosition::B2}, api, "destination");
  if (p.ifTranspose && sizeof(T) != 2) d::Fail(d::Str(api, ": ifTranspose needs a 16-bit type, not ", d::TypeName<T>()));
  constexpr uint32_t frac = d::kFractalBytes / sizeof(T);
  if (p.repeatTimes == 0) return;
  const uint64_t lastSrc = (p.startIndex + static_cast<uint64_t>(p.repeatTimes - 1) * p.srcStride + 1) * frac;
  const uint64_t lastDst = (static_cast<uint64_t>(p.repeatTimes - 1) * (1 + p.dstGap) + 1) * frac;
  d::CheckExtent(src, lastSrc, api, "source");
  d::CheckExtent(dst, lastDst, api, "destination");
  for (uint32_t r = 0; r < p.repeatTimes; ++r) {
    const T* from = src.Data() + (p.startIndex + static_cast<uint64_t>(r) * p.srcStride) * frac;
    T* to = dst.Data() + static_cast<uint64_t>(r) * (1 + p.dstGap) * frac;
    if (!p.ifTranspose) {
      std::memcpy(to, from, d::kFractalBytes);
    } else {
      for (uint32_t i = 0; i < 16; ++i) {
        for (uint32_t j = 0; j < 16; ++j) to[j * 16 + i] = from[i * 16 + j];
      }
    }
  }
}

namespace vnpu_detail {
template <typename T, typename U, typename S, typename BiasFn>
inline void MmadImpl(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                     const MmadParams& p, BiasFn bias) {
  namespace d = vnpu::ascendc::detail;
  const char* api = "Mmad";
  d::NoteCubeUse(api);
  static_assert(std::is_same<T, float>::value || std::is_same<T, int32_t>::value,
                "Mmad: the L0C result is float (or int32_t for int8_t inputs)");
  d::CheckPosition(fm.Position(), {TPosition::A2}, api, "left matrix (fm)");
  d::CheckPosition(filter.Position(), {TPosition::B2}, api, "right matrix (filter)");
  d::CheckPosition(dst.Position(), {TPosition::CO1}, api, "result (dst)");
  if (p.m == 0 || p.n == 0 || p.k == 0) return;
  constexpr uint32_t c0 = d::C0<U>();
  const uint32_t mB = d::CeilDiv(p.m, 16), nB = d::CeilDiv(p.n, 16), kB = d::CeilDiv(p.k, c0);
  d::CheckExtent(fm, static_cast<uint64_t>(mB) * kB * 16 * c0, api, "left matrix (fm)");
  d::CheckExtent(filter, static_cast<uint64_t>(kB) * nB * 16 * c0, api, "right matrix (filter)");
  d::CheckExtent(dst, static_cast<uint64_t>(nB) * mB * 256, api, "result (dst)");
  using CU = typename d::ComputeType<U>::type;
  using CS = typename d::ComputeType<S>::type;
  const U* a = fm.Data();
  const S* b = filter.Data();
  T* c = dst.Data();
  for (uint32_t m = 0; m < p.m; ++m) {
    for (uint32_t n = 0; n < p.n; ++n) {
      T acc = 0;
      for (uint32_t k = 0; k < p.k; ++k) {
        const U av = a[(static_cast<uint64_t>(m / 16) * kB + k / c0) * 16 * c0 + (m % 16) * c0 + k % c0];
        const S bv = b[(static_cast<uint64_t>(k / c0) * nB + n / 16) * 16 * c0 + (n % 16) * c0 + k % c0];
        acc += static_cast<T>(static_cast<CU>(av)) * static_cast<T>(static_cast<CS>(bv));
      }
      T& out = c[(static_cast<uint64_t>(n / 16) * mB * 16 + m) * 16 + n % 16];
      out = (p.cmatrixInitVal ? bias(n) : out) + acc;
    }
  }
}
}  // namespace vnpu_detail

template <typename T, typename U, typename S>
inline void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                 const MmadParams& mmadParams) {
  vnpu_detail::MmadImpl(dst, fm, filter, mmadParams, [](uint32_t) { return T(0); });
}
template <typename T, typename U, typename S, typename V>
inline void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                 const LocalTensor<V>& bias, const MmadParams& mmadParams) {
  vnpu::ascendc::detail::CheckExtent(bias, mmadParams.n, "Mmad", "bias");
  const V* bv = bias.Data();
  vnpu_detail::MmadImpl(dst, fm, filter, mmadParams,
                        [bv](uint32_t n) { return static_cast<T>(static_cast<float>(bv[n])); });
}

// L0C (NZ) -> GM (ND or NZ) through the fixpipe.
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
inline void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p) {
  namespace d = vnpu::ascendc::detail;
  const char* api = "Fixpipe";
  d::NoteCubeUse(api);
  d::CheckPosition(src.Position(), {TPosition::CO1}, api, "source");
  if (p.nSize == 0 || p.mSize == 0) return;
  if (p.nSize % 16 != 0) d::Fail(d::Str(api, ": nSize is ", p.nSize, ", which must be a multiple of 16"));
  if (p.ndNum > 1) d::Fail(d::Str(api, ": ndNum > 1 is not modelled by vNPU"));
  const bool toHalf = p.quantPre == QuantMode_t::F322F16, toBf16 = p.quantPre == QuantMode_t::F322BF16;
  if (p.quantPre != QuantMode_t::NoQuant && !toHalf && !toBf16) {
    d::Fail(d::Str(api, ": quantPre ", int(p.quantPre), " is not modelled by vNPU (NoQuant, F322F16, F322BF16 are)"));
  }
  if ((toHalf && !std::is_same<T, half>::value) || (toBf16 && !std::is_same<T, bfloat16_t>::value) ||
      (p.quantPre == QuantMode_t::NoQuant && !std::is_same<T, U>::value)) {
    d::Fail(d::Str(api, ": quantPre does not match the types: ", d::TypeName<U>(), " in L0C, ", d::TypeName<T>(),
                   " in GM (use NoQuant for equal types, F322F16 for half, F322BF16 for bfloat16_t)"));
  }
  d::CheckExtent(src, (static_cast<uint64_t>(p.nSize / 16 - 1) * p.srcStride + p.mSize) * 16, api, "source");
  const bool nd = config.format == CO2Layout::ROW_MAJOR;
  const uint64_t dstZStride = nd ? 0 : static_cast<uint64_t>(p.dstStride) * 32 / sizeof(T);
  const uint64_t dstLast = nd ? static_cast<uint64_t>(p.mSize - 1) * p.dstStride + p.nSize
                              : (p.nSize / 16 - 1) * dstZStride + static_cast<uint64_t>(p.mSize) * 16;
  dst.Check(0, dstLast, api);
  const U* c = src.Data();
  std::vector<T> row(16);
  for (uint32_t m = 0; m < p.mSize; ++m) {
    for (uint32_t nb = 0; nb < p.nSize / 16u; ++nb) {
      for (uint32_t e = 0; e < 16; ++e) {
        U v = c[(static_cast<uint64_t>(nb) * p.srcStride + m) * 16 + e];
        if (p.reluEn && v < U(0)) v = U(0);
        if constexpr (std::is_same<T, U>::value) {
          row[e] = v;
        } else {
          row[e] = static_cast<T>(static_cast<float>(v));  // F322F16 / F322BF16: nearest even
        }
      }
      T* to = nd ? dst.GetPhyAddr() + static_cast<uint64_t>(m) * p.dstStride + nb * 16
                 : dst.GetPhyAddr() + nb * dstZStride + static_cast<uint64_t>(m) * 16;
      d::StoreToGm(to, row.data(), 16, api);
    }
  }
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_CUBE_H
