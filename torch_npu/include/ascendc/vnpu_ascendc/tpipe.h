// Ascend C on the virtual NPU: TPipe, which hands out an AI core's local memories.
//
// Models: TPipe::InitBuffer for queues (num buffers of len bytes, len rounded up to
// 32 bytes) and for TBuf, carving each buffer from the physical memory its position
// maps to (positions.h); the capacity of each memory is the device's
// (VnpuKernelEnv: 192 KiB of UB on 910B, shared by VECIN, VECOUT and VECCALC), and
// InitBuffer past it fails with the requested and available byte counts. Also
// CANN's limit of 64 buffers per TPipe, Reset (start allocating from zero again),
// Destroy, event-id allocation and GetTPipePtr().
// Does not model: the event flags a real TPipe threads through its queues (vNPU runs
// a block in program order, see events.h); several live TPipes are allowed, and --
// as on the device -- each allocates from offset 0, so their buffers overlap.
#ifndef VNPU_ASCENDC_TPIPE_H
#define VNPU_ASCENDC_TPIPE_H

#include <cstdint>

#include "block_context.h"
#include "events.h"
#include "local_tensor.h"
#include "positions.h"

namespace AscendC {

template <TPosition pos>
class TBuf;

// CANN's limit on the buffers one TPipe manages.
constexpr int32_t QBUF_MAX_LEN = 64;
// Local-memory allocations are made in 32-byte blocks.
constexpr uint32_t ONE_BLK_SIZE = 32;

class TPipe {
 public:
  TPipe() { Init(); }
  ~TPipe() {
    if (ctx_ != nullptr && ctx_->tpipe == this) ctx_->tpipe = nullptr;
  }
  TPipe(const TPipe&) = delete;
  TPipe& operator=(const TPipe&) = delete;

  // (Re)starts this pipe: it becomes the block's current pipe with empty pools.
  void Init() {
    ctx_ = &vnpu::ascendc::detail::CurrentBlock("TPipe");
    ctx_->tpipe = this;
    Reset();
  }

  // Gives `que` `num` buffers of `len` bytes each.
  template <class T>
  bool InitBuffer(T& que, uint8_t num, uint32_t len) {
    static_assert(T::isTQue, "TPipe::InitBuffer(T& que, uint8_t num, uint32_t len) takes a TQue; use "
                             "InitBuffer(buf, len) for a TBuf");
    const char* what = que.VnpuName();
    uint8_t* base = Allocate(T::kPool, num, len, what);
    que.VnpuAttach(base, num, RoundUp(len));
    return true;
  }

  // Gives `buf` `len` bytes.
  template <TPosition bufPos>
  bool InitBuffer(TBuf<bufPos>& buf, uint32_t len) {
    uint8_t* base = Allocate(GetPhyType(bufPos), 1, len, buf.VnpuName());
    buf.VnpuAttach(base, RoundUp(len));
    return true;
  }

  // Frees every buffer: later InitBuffer calls start from the beginning of each memory.
  void Reset() {
    for (uint32_t& u : used_) u = 0;
    buffers_ = 0;
  }
  void Destroy() {
    Reset();
    if (ctx_ != nullptr && ctx_->tpipe == this) ctx_->tpipe = nullptr;
  }
  void DestroyWithoutPipeAll() { Destroy(); }

  template <HardEvent evt>
  TEventID AllocEventID() {
    TEventID id = static_cast<TEventID>(next_event_ % vnpu::ascendc::detail::kEventIdsPerKind);
    ++next_event_;
    return id;
  }
  template <HardEvent evt>
  void ReleaseEventID(TEventID /*id*/) {}
  template <HardEvent evt>
  TEventID FetchEventID() {
    return AllocEventID<evt>();
  }
  TEventID FetchEventID(HardEvent /*evt*/) { return AllocEventID<HardEvent::MAX>(); }

  // vNPU: bytes of `pool` this pipe has handed out.
  uint32_t VnpuUsed(Hardware pool) const { return used_[static_cast<int>(pool)]; }

  // vNPU: carves num * len bytes (len rounded up to 32) from `pool`; `what` names the caller.
  uint8_t* Allocate(Hardware pool, uint32_t num, uint32_t len, const char* what) {
    using vnpu::ascendc::detail::Fail;
    using vnpu::ascendc::detail::Str;
    if (pool == Hardware::GM) {
      Fail(Str("TPipe::InitBuffer(", what, "): this position is global memory on ", ctx_->env->soc_version,
               " (CO2 is GM on 910B: move L0C results with Fixpipe), it has no local buffer"));
    }
    if (num < 1 || num > QBUF_MAX_LEN) {
      Fail(Str("TPipe::InitBuffer(", what, "): num is ", num, ", which should be in range [1, ", QBUF_MAX_LEN, "]"));
    }
    if (len == 0) {
      Fail(Str("TPipe::InitBuffer(", what, "): buffer length is 0, which should be larger than 0"));
    }
    if (buffers_ + num > static_cast<uint32_t>(QBUF_MAX_LEN)) {
      Fail(Str("TPipe::InitBuffer(", what, "): Total buffer num managed by TPipe is ", buffers_ + num,
               ", should be in range (0, ", QBUF_MAX_LEN, "]"));
    }
    uint64_t bytes = static_cast<uint64_t>(num) * RoundUp(len);
    uint32_t& used = used_[static_cast<int>(pool)];
    uint32_t capacity = ctx_->CapacityOf(pool);
    if (used + bytes > capacity) {
      Fail(Str("TPipe::InitBuffer(", what, ", num ", num, ", len ", len, "): buffer size is ", bytes,
               " bytes, exceeds the limit: ", vnpu::ascendc::detail::HardwareName(pool), " holds ", capacity,
               " bytes per AI core on ", ctx_->env->soc_version, " and earlier InitBuffer calls use ", used,
               " of them",
               pool == Hardware::UB ? " (VECIN, VECOUT and VECCALC share the UB)" : ""));
    }
    uint8_t* base = ctx_->MemoryOf(pool) + used;
    used += static_cast<uint32_t>(bytes);
    buffers_ += num;
    return base;
  }

 private:
  static uint32_t RoundUp(uint32_t len) { return (len + ONE_BLK_SIZE - 1) / ONE_BLK_SIZE * ONE_BLK_SIZE; }

  vnpu::ascendc::detail::BlockContext* ctx_ = nullptr;
  uint32_t used_[static_cast<int>(Hardware::MAX)] = {};
  uint32_t buffers_ = 0;
  uint32_t next_event_ = 0;
};

// The current block's TPipe (the last one constructed and not destroyed), or nullptr.
inline TPipe* GetTPipePtr() { return static_cast<TPipe*>(vnpu::ascendc::detail::CurrentBlock("GetTPipePtr").tpipe); }

}  // namespace AscendC

#endif  // VNPU_ASCENDC_TPIPE_H
