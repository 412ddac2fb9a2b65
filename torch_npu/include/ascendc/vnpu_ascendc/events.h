// Ascend C on the virtual NPU: the names of pipes and of the events between them.
//
// Models: pipe_t (the instruction queues of an AI core: scalar, vector, cube, the
// memory-transfer engines MTE1/2/3 and the fixpipe), HardEvent (a "producer pipe ->
// consumer pipe" event kind) and the event ids EVENT_ID0..7, with CANN's names.
// Does not model: the pipes running concurrently. vNPU executes a block's
// instructions in program order, so every barrier and event is already satisfied;
// sync.h only checks that waits are matched by earlier sets (an unmatched wait
// would hang the device).
#ifndef VNPU_ASCENDC_EVENTS_H
#define VNPU_ASCENDC_EVENTS_H

#include <cstdint>

enum pipe_t : uint8_t {
  PIPE_S = 0,
  PIPE_V,
  PIPE_M,
  PIPE_MTE1,
  PIPE_MTE2,
  PIPE_MTE3,
  PIPE_ALL,
  PIPE_MTE4,
  PIPE_MTE5,
  PIPE_V2,
  PIPE_FIX,
};

enum event_t : uint8_t {
  EVENT_ID0 = 0,
  EVENT_ID1,
  EVENT_ID2,
  EVENT_ID3,
  EVENT_ID4,
  EVENT_ID5,
  EVENT_ID6,
  EVENT_ID7,
};

namespace AscendC {

using TEventID = int8_t;

// Event kinds, named source_destination (CANN order).
enum class HardEvent : uint8_t {
  MTE2_MTE1,
  MTE1_MTE2,
  MTE1_M,
  M_MTE1,
  MTE2_V,
  V_MTE2,
  MTE3_V,
  V_MTE3,
  M_V,
  V_M,
  V_V,
  MTE3_MTE1,
  MTE1_MTE3,
  MTE1_V,
  MTE2_M,
  M_MTE2,
  V_MTE1,
  M_FIX,
  FIX_M,
  MTE3_MTE2,
  MTE2_MTE3,
  S_V,
  V_S,
  S_MTE2,
  MTE2_S,
  S_MTE3,
  MTE3_S,
  MTE2_FIX,
  FIX_MTE2,
  FIX_S,
  M_S,
  FIX_MTE3,
  MTE1_FIX,
  FIX_MTE1,
  FIX_FIX,
  MAX,
};

}  // namespace AscendC

namespace vnpu {
namespace ascendc {
namespace detail {

constexpr int kHardEventCount = static_cast<int>(AscendC::HardEvent::MAX);
// Event ids per event kind an AI core has (EVENT_ID0..EVENT_ID7).
constexpr int kEventIdsPerKind = 8;

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

#endif  // VNPU_ASCENDC_EVENTS_H
