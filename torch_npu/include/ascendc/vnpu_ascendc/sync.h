// Ascend C on the virtual NPU: synchronization inside an AI core.
//
// Models: PipeBarrier<pipe>(), SetFlag/WaitFlag<HardEvent>(id), TQueSync<src, dst> and
// DataSyncBarrier. vNPU runs a block's instructions in program order, so every barrier
// is already satisfied and these calls order nothing; what is checked is the one
// misuse that hangs a device: a WaitFlag with no earlier SetFlag of the same event kind
// and id in the block (a KernelError), and event ids outside EVENT_ID0..EVENT_ID7.
// Does not model: the concurrency the flags guard on the device (a missing SetFlag/
// WaitFlag pair that would be a race on the device is not detected here), inter-core
// synchronization (SyncAll, IBSet/IBWait, CrossCoreSetFlag/CrossCoreWaitFlag: vNPU
// cannot promise that all blocks of a launch run at the same time, so SyncAll is a
// KernelError rather than a possible deadlock).
#ifndef VNPU_ASCENDC_SYNC_H
#define VNPU_ASCENDC_SYNC_H

#include <cstdint>

#include "block_context.h"
#include "events.h"

namespace vnpu {
namespace ascendc {
namespace detail {

inline const char* HardEventName(AscendC::HardEvent e) {
  static const char* const names[] = {
      "MTE2_MTE1", "MTE1_MTE2", "MTE1_M",    "M_MTE1",    "MTE2_V",    "V_MTE2",    "MTE3_V",   "V_MTE3",
      "M_V",       "V_M",       "V_V",       "MTE3_MTE1", "MTE1_MTE3", "MTE1_V",    "MTE2_M",   "M_MTE2",
      "V_MTE1",    "M_FIX",     "FIX_M",     "MTE3_MTE2", "MTE2_MTE3", "S_V",       "V_S",      "S_MTE2",
      "MTE2_S",    "S_MTE3",    "MTE3_S",    "MTE2_FIX",  "FIX_MTE2",  "FIX_S",     "M_S",      "FIX_MTE3",
      "MTE1_FIX",  "FIX_MTE1",  "FIX_FIX"};
  static_assert(sizeof(names) / sizeof(names[0]) == kHardEventCount, "one name per HardEvent");
  int i = static_cast<int>(e);
  return i < kHardEventCount ? names[i] : "MAX";
}

inline int32_t& EventSlot(AscendC::HardEvent e, int32_t id, const char* api) {
  BlockContext& ctx = CurrentBlock(api);
  if (e >= AscendC::HardEvent::MAX) Fail(Str(api, ": HardEvent::MAX is not an event"));
  if (id < 0 || id >= kEventIdsPerKind) {
    Fail(Str(api, "<", HardEventName(e), ">: event id ", id, " is out of range [0, ", kEventIdsPerKind, ")"));
  }
  return ctx.events[static_cast<int>(e)][id];
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

template <pipe_t pipe = PIPE_ALL>
inline void PipeBarrier() {}

enum class MemDsbT : uint8_t { ALL = 0, DDR, UB, SEQ };
template <MemDsbT arg>
inline void DataSyncBarrier() {}

template <HardEvent event>
inline void SetFlag(int32_t eventID) {
  ++vnpu::ascendc::detail::EventSlot(event, eventID, "SetFlag");
}

template <HardEvent event>
inline void WaitFlag(int32_t eventID) {
  int32_t& slot = vnpu::ascendc::detail::EventSlot(event, eventID, "WaitFlag");
  if (slot <= 0) {
    vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(
        "WaitFlag<HardEvent::", vnpu::ascendc::detail::HardEventName(event), ">(", eventID,
        ") has no matching SetFlag before it in this block: on the device the waiting pipe would hang"));
  }
  --slot;
}

// Flags between two positions' pipes, named by positions instead of events.
template <TPosition src, TPosition dst>
class TQueSync {
 public:
  void SetFlag(TEventID id) { ++Slot(id, "TQueSync::SetFlag"); }
  void WaitFlag(TEventID id) {
    int32_t& slot = Slot(id, "TQueSync::WaitFlag");
    if (slot <= 0) {
      vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(
          "TQueSync::WaitFlag(", int(id),
          ") has no matching SetFlag before it in this block: on the device the waiting pipe would hang"));
    }
    --slot;
  }

 private:
  int32_t& Slot(TEventID id, const char* api) {
    if (id < 0 || id >= vnpu::ascendc::detail::kEventIdsPerKind) {
      vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(api, ": event id ", int(id), " is out of range"));
    }
    return slots_[id];
  }
  int32_t slots_[vnpu::ascendc::detail::kEventIdsPerKind] = {};
};

// Flags between the AIC and AIV cores of a mixed kernel: not modelled (mixed kernels
// fail at KERNEL_TASK_TYPE_DEFAULT already; these exist so that such sources compile).
template <uint8_t modeId, pipe_t pipe>
inline void CrossCoreSetFlag(uint16_t flagId) {
  vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(
      "CrossCoreSetFlag(", flagId, "): AIC/AIV cross-core flags are not modelled by vNPU"));
}
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
inline void CrossCoreWaitFlag(uint16_t flagId) {
  vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(
      "CrossCoreWaitFlag(", flagId, "): AIC/AIV cross-core flags are not modelled by vNPU"));
}

// All cores of the launch wait for each other: not modelled (see the file comment).
template <bool isAIVOnly = true>
inline void SyncAll() {
  vnpu::ascendc::detail::Fail(
      "SyncAll: synchronization across cores is not modelled by vNPU (its blocks are not guaranteed to run at the "
      "same time); split the kernel into two launches instead");
}

}  // namespace AscendC

#endif  // VNPU_ASCENDC_SYNC_H
