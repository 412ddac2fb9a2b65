// Ascend C on the virtual NPU: logical positions (TPosition) and the memories they live in.
//
// Models: TPosition / QuePosition as kernels name them, and the 910B (dav-c220) map
// from a queue's positions to the physical buffer that holds it: VECIN, VECOUT and
// VECCALC share the Unified Buffer; A1, B1, C1 and TSCM share L1; A2 is L0A, B2 is
// L0B, CO1 is L0C, C2 is the bias table; CO2 is global memory on 910B (the Cube core
// writes L0C straight to GM through the fixpipe), so it cannot hold a queue.
// Does not model: the logical-to-physical maps of other chips.
#ifndef VNPU_ASCENDC_POSITIONS_H
#define VNPU_ASCENDC_POSITIONS_H

#include <cstdint>

namespace AscendC {

enum class TPosition : uint8_t {
  GM,
  A1,
  A2,
  B1,
  B2,
  C1,
  C2,
  CO1,
  CO2,
  VECIN,
  VECOUT,
  VECCALC,
  LCM = VECCALC,
  SPM,
  SHM = SPM,
  TSCM,
  C2PIPE2GM,
  C2PIPE2LOCAL,
  MAX,
};
using QuePosition = TPosition;

// Physical memories of an AI core.
enum class Hardware : uint8_t { GM, UB, L1, L0A, L0B, L0C, BIAS, FIXBUF, MAX };

// Where a logical position lives on 910B.
constexpr Hardware GetPhyType(TPosition pos) {
  switch (pos) {
    case TPosition::GM:
    case TPosition::CO2:
      return Hardware::GM;
    case TPosition::A1:
    case TPosition::B1:
    case TPosition::C1:
    case TPosition::SHM:
    case TPosition::TSCM:
      return Hardware::L1;
    case TPosition::A2:
      return Hardware::L0A;
    case TPosition::B2:
      return Hardware::L0B;
    case TPosition::CO1:
      return Hardware::L0C;
    case TPosition::C2:
      return Hardware::BIAS;
    case TPosition::C2PIPE2GM:
      return Hardware::FIXBUF;
    default:
      return Hardware::UB;
  }
}

// The memory a queue from src to dst allocates its buffers in: the destination's,
// unless the destination is GM (or CO2, which is GM here), then the source's.
constexpr Hardware GetBufferPos(TPosition src, TPosition dst) {
  return (dst == TPosition::GM || dst == TPosition::CO2) ? GetPhyType(src) : GetPhyType(dst);
}

// The position a queue's tensors report: the destination, or the source when the
// destination is GM/CO2 (a VECOUT queue's tensors are VECOUT tensors).
constexpr TPosition GetPosition(TPosition src, TPosition dst) {
  return (dst == TPosition::GM || dst == TPosition::CO2) ? src : dst;
}

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

inline const char* PositionName(AscendC::TPosition p) {
  using AscendC::TPosition;
  switch (p) {
    case TPosition::GM: return "GM";
    case TPosition::A1: return "A1";
    case TPosition::A2: return "A2";
    case TPosition::B1: return "B1";
    case TPosition::B2: return "B2";
    case TPosition::C1: return "C1";
    case TPosition::C2: return "C2";
    case TPosition::CO1: return "CO1";
    case TPosition::CO2: return "CO2";
    case TPosition::VECIN: return "VECIN";
    case TPosition::VECOUT: return "VECOUT";
    case TPosition::VECCALC: return "VECCALC";
    case TPosition::SPM: return "SPM";
    case TPosition::TSCM: return "TSCM";
    case TPosition::C2PIPE2GM: return "C2PIPE2GM";
    case TPosition::C2PIPE2LOCAL: return "C2PIPE2LOCAL";
    default: return "MAX";
  }
}

inline const char* HardwareName(AscendC::Hardware h) {
  using AscendC::Hardware;
  switch (h) {
    case Hardware::GM: return "GM";
    case Hardware::UB: return "UB";
    case Hardware::L1: return "L1";
    case Hardware::L0A: return "L0A";
    case Hardware::L0B: return "L0B";
    case Hardware::L0C: return "L0C";
    case Hardware::BIAS: return "the bias table";
    case Hardware::FIXBUF: return "the fixpipe buffer";
    default: return "MAX";
  }
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

#endif  // VNPU_ASCENDC_POSITIONS_H
