// Ascend C on the virtual NPU: the high-level Matmul API on the Cube unit.
//
// Models: Matmul<A_TYPE, B_TYPE, C_TYPE, BIAS_TYPE, MM_CFG> with MatmulType<position,
// CubeFormat, T, isTrans> for the basic ND cases -- A and B in GM (or UB/L1 local
// tensors), fp16 / bf16 / fp32 / int8 inputs, fp32 (int32 for int8) accumulation in
// L0C, C written to GM or UB as float, half, bfloat16_t or int32_t, optional bias per
// column -- and its kernel-side calls: REGIST_MATMUL_OBJ / Init, SetOrgShape,
// SetSingleShape, SetTail, SetTensorA / SetTensorB (with transposition), SetBias /
// DisableBias, IterateAll, Iterate + GetTensorC (iterateOrder, enSequentialWrite,
// enAtomic), End.
// Faithful: C[i, j] = bias[j] + sum_k A[i, k] * B[k, j] computed per baseM x baseN
// block with K consumed baseK at a time into a float accumulator, then converted once
// (round to nearest even) to C's type, as the fixpipe does; the tiling is checked
// against 910B's limits (L0A / L0B / L0C / L1 / bias-table sizes, 16-element
// alignment of baseM / baseN / baseK, positive depths) and the L1/L0 buffers are taken
// from the TPipe like the real API does, so later InitBuffer calls see them used; GM
// reads and writes are bounds-checked; the first Matmul use of a block checks blockDim
// against the AIC cores.
// Does not model: NZ formats, batch / MDL / IBShare / split-K templates, quantization,
// callbacks, asynchronous iteration (sync = false runs synchronously), the Cube's
// internal summation order within a baseK chunk, and mixed-mode AIV/AIC messaging
// (vNPU computes the product on the core that asks for it).
#ifndef VNPU_ASCENDC_MATMUL_H
#define VNPU_ASCENDC_MATMUL_H

#include <cstdint>
#include <type_traits>
#include <vector>

#include "atomic.h"
#include "block_context.h"
#include "cube_tiling.h"
#include "global_tensor.h"
#include "local_tensor.h"
#include "positions.h"
#include "system.h"
#include "tpipe.h"
#include "types.h"

// Data layouts of the matrices (only ND is modelled).
enum class CubeFormat : uint8_t { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR, ROW_MAJOR = ND, COLUMN_MAJOR = NZ };
enum class LayoutMode : uint8_t { NONE = 0, BSNGD, SBNGD, BNGS1S2, NORMAL };

namespace AscendC {

template <TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false,
          LayoutMode LAYOUT = LayoutMode::NONE, bool IBSHARE = false, TPosition SRCPOS = TPosition::GM>
struct MatmulType {
  constexpr static TPosition pos = POSITION;
  constexpr static CubeFormat format = FORMAT;
  using T = TYPE;
  constexpr static bool isTrans = ISTRANS;
  constexpr static LayoutMode layout = LAYOUT;
  constexpr static bool ibShare = IBSHARE;
  constexpr static TPosition srcPos = SRCPOS;
};

// Matmul template configurations: accepted; vNPU computes every one the same way.
struct MatmulConfig {
  bool doNorm = true;
  bool doBasicBlock = false;
  bool doMultiDataLoad = false;
  uint32_t basicM = 0;
  uint32_t basicN = 0;
  uint32_t basicK = 0;
  bool intrinsicsCheck = false;
  bool isNBatch = false;
  bool enVecND2NZ = false;
  bool doSpecialBasicBlock = false;
  uint32_t doMTE2Preload = 0;
  uint32_t singleCoreM = 0;
  uint32_t singleCoreN = 0;
  uint32_t singleCoreK = 0;
  uint32_t stepM = 0;
  uint32_t stepN = 0;
  uint32_t baseMN = 0;
  uint32_t singleCoreMN = 0;
  bool enUnitFlag = true;
  bool isPerTensor = false;
  bool hasAntiQuantOffset = false;
  bool doIBShareNorm = false;
  bool doSpecialMDL = false;
  bool enableInit = true;
  int32_t batchMode = 0;
  bool enableEnd = true;
  bool enableGetTensorC = true;
  bool enableSetOrgShape = true;
  bool enableSetBias = true;
  bool enableSetTail = true;
  bool enableQuantVector = true;
  bool enableSetDefineData = true;
  uint8_t iterateMode = 0;
  bool enableReuse = true;
};
constexpr MatmulConfig CFG_NORM = MatmulConfig{};
constexpr MatmulConfig CFG_MDL = [] {
  MatmulConfig c;
  c.doNorm = false;
  c.doMultiDataLoad = true;
  return c;
}();
constexpr MatmulConfig CFG_IBSHARE_NORM = [] {
  MatmulConfig c;
  c.doIBShareNorm = true;
  return c;
}();
constexpr MatmulConfig GetNormalConfig(bool = false, bool = false, bool = false, int32_t = 0, bool = true) {
  return CFG_NORM;
}
constexpr MatmulConfig GetMDLConfig(bool = false, bool = false, uint32_t = 0, bool = false, bool = false,
                                    bool = false, bool = true) {
  return CFG_MDL;
}

template <void* a = nullptr, void* b = nullptr, void* c = nullptr>
struct MatmulCallBackFunc {};

namespace vnpu_detail {
// The accumulator type of the Cube unit for input type T.
template <typename T>
using L0cType = typename std::conditional<std::is_same<T, int8_t>::value, int32_t, float>::type;
}  // namespace vnpu_detail

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto& MM_CFG = CFG_NORM,
          class MM_CB = MatmulCallBackFunc<>, class... POLICY>
class Matmul {
  using SrcAT = typename A_TYPE::T;
  using SrcBT = typename B_TYPE::T;
  using DstT = typename C_TYPE::T;
  using BiasT = typename BIAS_TYPE::T;
  using Acc = vnpu_detail::L0cType<SrcAT>;
  static_assert(std::is_same<vnpu_detail::L0cType<SrcAT>, vnpu_detail::L0cType<SrcBT>>::value,
                "Matmul: A and B must both be integer (int8_t) or both be floating");
  static_assert(A_TYPE::format == CubeFormat::ND && B_TYPE::format == CubeFormat::ND &&
                    C_TYPE::format == CubeFormat::ND,
                "Matmul: vNPU models the ND format only");

 public:
  using AType = A_TYPE;
  using BType = B_TYPE;
  using CType = C_TYPE;

  // Reads the tiling, checks it against the chip and takes L1/L0 buffers from `tpipe`.
  void Init(const TCubeTiling* tiling, TPipe* tpipe = nullptr) {
    namespace d = vnpu::ascendc::detail;
    d::NoteCubeUse("Matmul");
    if (tiling == nullptr) d::Fail("Matmul::Init: the tiling is null");
    tiling_ = *tiling;
    pipe_ = tpipe != nullptr ? tpipe : GetTPipePtr();
    if (pipe_ == nullptr) d::Fail("Matmul::Init: no TPipe: pass one to REGIST_MATMUL_OBJ / Init, or construct one first");
    CheckTiling();
    orgM_ = tiling_.M;
    orgN_ = tiling_.N;
    orgKa_ = tiling_.Ka;
    orgKb_ = tiling_.Kb;
    singleM_ = tiling_.singleCoreM;
    singleN_ = tiling_.singleCoreN;
    singleK_ = tiling_.singleCoreK;
    hasBias_ = false;
    ResetIteration();
  }

  void SetOrgShape(int orgM, int orgN, int orgK) { SetOrgShape(orgM, orgN, orgK, orgK); }
  void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0) {
    (void)orgKc;
    orgM_ = orgM;
    orgN_ = orgN;
    orgKa_ = orgKa;
    orgKb_ = orgKb;
  }
  void SetSingleShape(int singleM, int singleN, int singleK) {
    singleM_ = singleM;
    singleN_ = singleN;
    singleK_ = singleK;
    ResetIteration();
  }
  void SetTail(int tailM = -1, int tailN = -1, int tailK = -1) {
    if (tailM > 0) singleM_ = tailM;
    if (tailN > 0) singleN_ = tailN;
    if (tailK > 0) singleK_ = tailK;
    ResetIteration();
  }

  void SetTensorA(const GlobalTensor<SrcAT>& gm, bool isTransposeA = false) {
    a_.gm = gm;
    a_.local = nullptr;
    a_.trans = isTransposeA || A_TYPE::isTrans;
    a_.set = true;
  }
  void SetTensorA(const LocalTensor<SrcAT>& local, bool isTransposeA = false) {
    a_.local = local.Data();
    a_.local_size = local.GetSize();
    a_.trans = isTransposeA || A_TYPE::isTrans;
    a_.set = true;
  }
  void SetTensorB(const GlobalTensor<SrcBT>& gm, bool isTransposeB = false) {
    b_.gm = gm;
    b_.local = nullptr;
    b_.trans = isTransposeB || B_TYPE::isTrans;
    b_.set = true;
  }
  void SetTensorB(const LocalTensor<SrcBT>& local, bool isTransposeB = false) {
    b_.local = local.Data();
    b_.local_size = local.GetSize();
    b_.trans = isTransposeB || B_TYPE::isTrans;
    b_.set = true;
  }
  void SetBias(const GlobalTensor<BiasT>& gm) {
    bias_.gm = gm;
    bias_.local = nullptr;
    hasBias_ = true;
  }
  void SetBias(const LocalTensor<BiasT>& local) {
    bias_.local = local.Data();
    bias_.local_size = local.GetSize();
    hasBias_ = true;
  }
  void DisableBias() { hasBias_ = false; }
  void ClearBias() { hasBias_ = false; }
  void SetLocalWorkspace(const LocalTensor<uint8_t>& /*tmpBuffer*/) {}
  template <typename W>
  void SetWorkspace(W /*workspace*/, int /*size*/ = 0) {}
  void SetHF32(bool /*enableHF32*/ = false, int32_t /*transMode*/ = 0) {}
  void SetSubBlockIdx(uint8_t /*subBlockIdx*/) {}

  // Computes the whole singleCoreM x singleCoreN C of this core into `gm`.
  template <bool sync = true>
  void IterateAll(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                  bool waitIterateAll = false, bool fakeMsg = false) {
    (void)enSequentialWrite, (void)waitIterateAll;
    if (fakeMsg) return;
    ResetIteration();
    while (Iterate<sync>()) GetTensorC<sync>(gm, enAtomic, false);
  }
  // ... into a local tensor, rows of singleCoreN elements.
  template <bool sync = true>
  void IterateAll(const LocalTensor<DstT>& local, uint8_t enAtomic = 0) {
    (void)enAtomic;
    ResetIteration();
    while (Iterate<sync>()) {
      StoreBlock(local.Data(), local.GetSize(), static_cast<uint64_t>(curM_) * tiling_.baseM * singleN_ +
                                                    static_cast<uint64_t>(curN_) * tiling_.baseN,
                 singleN_, "Matmul::IterateAll");
    }
  }

  // Computes the next baseM x baseN block of C; false when all are done.
  template <bool sync = true>
  bool Iterate(bool enPartialSum = false) {
    namespace d = vnpu::ascendc::detail;
    if (!a_.set || !b_.set) d::Fail("Matmul::Iterate: call SetTensorA and SetTensorB first");
    const int mBlocks = CeilDiv(singleM_, tiling_.baseM), nBlocks = CeilDiv(singleN_, tiling_.baseN);
    if (next_ >= mBlocks * nBlocks) return false;
    if (tiling_.iterateOrder == 1) {  // N first
      curM_ = next_ / nBlocks;
      curN_ = next_ % nBlocks;
    } else {  // M first
      curM_ = next_ % mBlocks;
      curN_ = next_ / mBlocks;
    }
    ++next_;
    ComputeBlock(enPartialSum);
    return true;
  }

  // Writes the current block into `gm`: at its place in C, or packed at gm's start
  // (rows of baseN elements) with enSequentialWrite.
  template <bool sync = true>
  void GetTensorC(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false) {
    namespace d = vnpu::ascendc::detail;
    uint64_t offset = 0, rowStride = 0;
    if (enSequentialWrite) {
      rowStride = tiling_.baseN;
    } else {
      rowStride = orgN_;
      offset = static_cast<uint64_t>(curM_) * tiling_.baseM * orgN_ + static_cast<uint64_t>(curN_) * tiling_.baseN;
    }
    gm.Check(offset, (blockM_ - 1) * rowStride + blockN_, "Matmul::GetTensorC");
    d::BlockContext& ctx = d::CurrentBlock("Matmul::GetTensorC");
    const d::AtomicOp savedOp = ctx.atomic_op;
    const char* savedType = ctx.atomic_type;
    if (enAtomic != 0) {
      ctx.atomic_op = enAtomic == 1 ? d::AtomicOp::kAdd : enAtomic == 2 ? d::AtomicOp::kMax : d::AtomicOp::kMin;
      ctx.atomic_type = d::TypeName<DstT>();
    }
    std::vector<DstT> row(blockN_);
    for (int i = 0; i < blockM_; ++i) {
      for (int j = 0; j < blockN_; ++j) row[j] = Convert(acc_[static_cast<size_t>(i) * blockN_ + j]);
      d::StoreToGm(gm.GetPhyAddr() + offset + i * rowStride, row.data(), blockN_, "Matmul::GetTensorC");
    }
    ctx.atomic_op = savedOp;
    ctx.atomic_type = savedType;
  }
  // Writes the current block packed (rows of baseN elements) into a local tensor.
  template <bool sync = true, bool doPad = false>
  void GetTensorC(const LocalTensor<DstT>& local, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                  uint32_t height = 0, uint32_t width = 0, uint32_t srcGap = 0, uint32_t dstGap = 0) {
    (void)enAtomic, (void)enSequentialWrite, (void)height, (void)width, (void)srcGap, (void)dstGap;
    StoreBlock(local.Data(), local.GetSize(), 0, tiling_.baseN, "Matmul::GetTensorC");
  }

  void End() {}

 private:
  template <typename T>
  struct Operand {
    GlobalTensor<T> gm;
    const T* local = nullptr;
    uint32_t local_size = 0;
    bool trans = false;
    bool set = false;
  };

  static int CeilDiv(int a, int b) { return (a + b - 1) / b; }

  void CheckTiling() {
    namespace d = vnpu::ascendc::detail;
    const TCubeTiling& t = tiling_;
    d::BlockContext& ctx = d::CurrentBlock("Matmul::Init");
    auto need = [](bool ok, const std::string& what) {
      if (!ok) d::Fail("Matmul::Init: invalid tiling: " + what);
    };
    need(t.M > 0 && t.N > 0 && t.Ka > 0 && t.Kb > 0, d::Str("M, N, Ka, Kb must be positive (", t.M, ", ", t.N,
                                                          ", ", t.Ka, ", ", t.Kb, ")"));
    need(t.Ka == t.Kb, d::Str("Ka (", t.Ka, ") and Kb (", t.Kb, ") differ"));
    need(t.singleCoreM > 0 && t.singleCoreN > 0 && t.singleCoreK > 0, "singleCoreM/N/K must be positive");
    need(t.baseM > 0 && t.baseN > 0 && t.baseK > 0, "baseM/N/K must be positive");
    need(t.baseM % 16 == 0 && t.baseN % 16 == 0,
         d::Str("baseM (", t.baseM, ") and baseN (", t.baseN, ") must be multiples of 16"));
    need((t.baseK * sizeof(SrcAT)) % 32 == 0,
         d::Str("baseK (", t.baseK, ") * sizeof(A) must be a multiple of 32 bytes"));
    need(t.depthA1 > 0 && t.depthB1 > 0, "depthA1 and depthB1 must be positive");
    const int dbA = t.dbL0A > 1 ? 2 : 1, dbB = t.dbL0B > 1 ? 2 : 1, dbC = t.dbL0C > 1 ? 2 : 1;
    const uint64_t l0a = static_cast<uint64_t>(t.baseM) * t.baseK * sizeof(SrcAT) * dbA;
    const uint64_t l0b = static_cast<uint64_t>(t.baseN) * t.baseK * sizeof(SrcBT) * dbB;
    const uint64_t l0c = static_cast<uint64_t>(t.baseM) * t.baseN * sizeof(Acc) * dbC;
    const uint64_t a1 = static_cast<uint64_t>(t.baseM) * t.baseK * t.depthA1 * sizeof(SrcAT);
    const uint64_t b1 = static_cast<uint64_t>(t.baseN) * t.baseK * t.depthB1 * sizeof(SrcBT);
    need(l0a <= ctx.env->l0a_bytes, d::Str("baseM * baseK * sizeof(A) * dbL0A = ", l0a, " bytes exceeds L0A (",
                                           ctx.env->l0a_bytes, ")"));
    need(l0b <= ctx.env->l0b_bytes, d::Str("baseN * baseK * sizeof(B) * dbL0B = ", l0b, " bytes exceeds L0B (",
                                           ctx.env->l0b_bytes, ")"));
    need(l0c <= ctx.env->l0c_bytes, d::Str("baseM * baseN * sizeof(L0C type) * dbL0C = ", l0c,
                                           " bytes exceeds L0C (", ctx.env->l0c_bytes, ")"));
    need(static_cast<uint64_t>(t.baseN) * sizeof(BiasT) <= d::kBiasTableBytes || !t.isBias,
         d::Str("baseN * sizeof(bias) exceeds the ", d::kBiasTableBytes, "-byte bias table"));
    // The buffers the real API takes from the pipe (checked against what is left).
    pipe_->Allocate(Hardware::L1, 1, static_cast<uint32_t>(a1 + b1), "Matmul A1+B1");
    pipe_->Allocate(Hardware::L0A, 1, static_cast<uint32_t>(l0a), "Matmul A2");
    pipe_->Allocate(Hardware::L0B, 1, static_cast<uint32_t>(l0b), "Matmul B2");
    pipe_->Allocate(Hardware::L0C, 1, static_cast<uint32_t>(l0c), "Matmul CO1");
  }

  void ResetIteration() {
    next_ = 0;
    curM_ = curN_ = 0;
  }

  template <typename T>
  const T* ElementsOf(const Operand<T>& op, uint64_t extent, const char* what) const {
    namespace d = vnpu::ascendc::detail;
    if (op.local != nullptr) {
      if (extent > op.local_size) {
        d::Fail(d::Str(what, ": the local matrix has ", op.local_size, " elements, the tiling reads ", extent));
      }
      return op.local;
    }
    op.gm.Check(0, extent, what);
    return op.gm.GetPhyAddr();
  }

  // acc = bias + A[m rows of block] * B[n cols of block], K in baseK chunks.
  void ComputeBlock(bool enPartialSum) {
    const int m0 = curM_ * tiling_.baseM, n0 = curN_ * tiling_.baseN;
    const int bm = singleM_ - m0 < tiling_.baseM ? singleM_ - m0 : tiling_.baseM;
    const int bn = singleN_ - n0 < tiling_.baseN ? singleN_ - n0 : tiling_.baseN;
    const int K = singleK_;
    // Element (i, k) of A and (k, j) of B in their ND layouts.
    const uint64_t aLd = a_.trans ? orgM_ : orgKa_, bLd = b_.trans ? orgKb_ : orgN_;
    const uint64_t aExtent = a_.trans ? (K - 1) * aLd + singleM_ : (singleM_ - 1) * aLd + K;
    const uint64_t bExtent = b_.trans ? (singleN_ - 1) * bLd + K : (K - 1) * bLd + singleN_;
    const SrcAT* A = ElementsOf(a_, aExtent, "Matmul (A)");
    const SrcBT* B = ElementsOf(b_, bExtent, "Matmul (B)");
    if (!enPartialSum || acc_.size() != static_cast<size_t>(bm) * bn) acc_.assign(static_cast<size_t>(bm) * bn, Acc(0));
    blockM_ = bm;
    blockN_ = bn;
    if (hasBias_ && !enPartialSum) {
      const BiasT* bias = ElementsOf(bias_, n0 + bn, "Matmul (bias)");
      for (int i = 0; i < bm; ++i) {
        for (int j = 0; j < bn; ++j) acc_[static_cast<size_t>(i) * bn + j] = static_cast<Acc>(static_cast<float>(bias[n0 + j]));
      }
    }
    // One Mmad per baseK chunk: the chunk's products summed, then added to L0C.
    std::vector<Acc> a(static_cast<size_t>(bm) * tiling_.baseK), b(static_cast<size_t>(tiling_.baseK) * bn),
        part(bn);
    for (int k0 = 0; k0 < K; k0 += tiling_.baseK) {
      const int bk = K - k0 < tiling_.baseK ? K - k0 : tiling_.baseK;
      for (int i = 0; i < bm; ++i) {
        for (int k = 0; k < bk; ++k) {
          uint64_t idx = a_.trans ? static_cast<uint64_t>(k0 + k) * aLd + m0 + i
                                  : static_cast<uint64_t>(m0 + i) * aLd + k0 + k;
          a[static_cast<size_t>(i) * bk + k] = static_cast<Acc>(static_cast<typename vnpu::ascendc::detail::ComputeType<SrcAT>::type>(A[idx]));
        }
      }
      for (int k = 0; k < bk; ++k) {
        for (int j = 0; j < bn; ++j) {
          uint64_t idx = b_.trans ? static_cast<uint64_t>(n0 + j) * bLd + k0 + k
                                  : static_cast<uint64_t>(k0 + k) * bLd + n0 + j;
          b[static_cast<size_t>(k) * bn + j] = static_cast<Acc>(static_cast<typename vnpu::ascendc::detail::ComputeType<SrcBT>::type>(B[idx]));
        }
      }
      for (int i = 0; i < bm; ++i) {
        for (int j = 0; j < bn; ++j) part[j] = Acc(0);
        for (int k = 0; k < bk; ++k) {
          const Acc av = a[static_cast<size_t>(i) * bk + k];
          const Acc* brow = &b[static_cast<size_t>(k) * bn];
          for (int j = 0; j < bn; ++j) part[j] += av * brow[j];
        }
        Acc* crow = &acc_[static_cast<size_t>(i) * bn];
        for (int j = 0; j < bn; ++j) crow[j] += part[j];
      }
    }
  }

  // The fixpipe's conversion of an accumulator value to C's type.
  static DstT Convert(Acc v) {
    if constexpr (std::is_same<DstT, bfloat16_t>::value) {
      return bfloat16_t(static_cast<float>(v));
    } else {
      return static_cast<DstT>(v);
    }
  }

  void StoreBlock(DstT* dst, uint32_t dstSize, uint64_t offset, uint64_t rowStride, const char* what) {
    namespace d = vnpu::ascendc::detail;
    uint64_t extent = offset + (blockM_ - 1) * rowStride + blockN_;
    if (extent > dstSize) {
      d::Fail(d::Str(what, ": the local C tensor has ", dstSize, " elements, the block needs ", extent));
    }
    for (int i = 0; i < blockM_; ++i) {
      for (int j = 0; j < blockN_; ++j) dst[offset + i * rowStride + j] = Convert(acc_[static_cast<size_t>(i) * blockN_ + j]);
    }
  }

  TCubeTiling tiling_;
  TPipe* pipe_ = nullptr;
  int orgM_ = 0, orgN_ = 0, orgKa_ = 0, orgKb_ = 0;
  int singleM_ = 0, singleN_ = 0, singleK_ = 0;
  Operand<SrcAT> a_;
  Operand<SrcBT> b_;
  Operand<BiasT> bias_;
  bool hasBias_ = false;
  int next_ = 0, curM_ = 0, curN_ = 0, blockM_ = 0, blockN_ = 0;
  std::vector<Acc> acc_;
};

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

inline void RegistMatmulObj(AscendC::TPipe*, GM_ADDR) {}
template <typename MM, typename... Rest>
inline void RegistMatmulObj(AscendC::TPipe* pipe, GM_ADDR workspace, MM& mm, const TCubeTiling* tiling,
                            Rest&&... rest) {
  mm.Init(tiling, pipe);
  RegistMatmulObj(pipe, workspace, std::forward<Rest>(rest)...);
}
// A Matmul object without a tiling (the tiling is given to Init later).
template <typename MM>
inline void RegistMatmulObj(AscendC::TPipe*, GM_ADDR, MM&) {}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

// Registers Matmul objects and their tilings: REGIST_MATMUL_OBJ(&pipe, workspace, mm, &tiling, ...).
#define REGIST_MATMUL_OBJ(tpipe, workspace, ...) \
  ::vnpu::ascendc::detail::RegistMatmulObj((tpipe), (workspace), __VA_ARGS__)

// The older spelling: matmul::Matmul, matmul::MatmulType (and, transitively, AscendC).
namespace matmul {
using namespace AscendC;
}  // namespace matmul

#endif  // VNPU_ASCENDC_MATMUL_H
