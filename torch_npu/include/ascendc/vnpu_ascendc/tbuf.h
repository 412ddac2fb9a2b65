// Ascend C on the virtual NPU: TBuf, a scratch buffer outside the queue protocol.
//
// Models: TBuf<pos> (VECCALC by default) given memory by TPipe::InitBuffer(buf, len),
// and Get<T>() / Get<T>(count) / GetWithOffset<T>(count, byteOffset) with CANN's
// limits: the view must fit in the buffer and the offset must be 32-byte aligned.
// Does not model: nothing else -- a TBuf has no states; its tensors cannot be
// enqueued (a TQue rejects them as foreign).
#ifndef VNPU_ASCENDC_TBUF_H
#define VNPU_ASCENDC_TBUF_H

#include <cstdint>

#include "block_context.h"
#include "local_tensor.h"
#include "positions.h"

namespace AscendC {

template <TPosition pos = TPosition::VECCALC>
class TBuf {
 public:
  static constexpr TPosition srcPosition = pos;
  static constexpr TPosition dstPosition = pos;
  static constexpr bool isTQue = false;

  template <typename T>
  LocalTensor<T> Get() {
    return View<T>(Len() / static_cast<uint32_t>(sizeof(T)), 0, "Get");
  }
  template <typename T>
  LocalTensor<T> Get(uint32_t count) {
    return View<T>(count, 0, "Get");
  }
  template <typename T>
  LocalTensor<T> GetWithOffset(uint32_t count, uint32_t bufOffset) {
    if (bufOffset % 32 != 0) {
      vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(
          "TBuf::GetWithOffset: bufOffset is ", bufOffset, " bytes, which must be 32-byte aligned"));
    }
    return View<T>(count, bufOffset, "GetWithOffset");
  }

  // vNPU: takes `len` bytes at `base` (from TPipe::InitBuffer).
  void VnpuAttach(uint8_t* base, uint32_t len) {
    rec_.addr = base;
    rec_.len = len;
    rec_.owner = this;
    rec_.state = vnpu::ascendc::detail::BufRecord::State::kOccupied;
  }
  const char* VnpuName() const { return "TBuf"; }

 private:
  uint32_t Len() const {
    if (rec_.addr == nullptr) {
      vnpu::ascendc::detail::Fail("TBuf::Get: the buffer has no memory; call TPipe::InitBuffer(buf, len) first");
    }
    return rec_.len;
  }

  template <typename T>
  LocalTensor<T> View(uint32_t count, uint32_t offset, const char* api) {
    uint64_t need = static_cast<uint64_t>(count) * sizeof(T) + offset;
    if (need > Len()) {
      vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(
          "TBuf::", api, ": ", count, " elements of ", vnpu::ascendc::detail::TypeName<T>(), " at byte offset ", offset,
          " need ", need, " bytes, but the buffer has ", rec_.len, " (its InitBuffer length)"));
    }
    return LocalTensor<T>(reinterpret_cast<T*>(rec_.addr + offset), count, pos, &rec_);
  }

  vnpu::ascendc::detail::BufRecord rec_;
};

}  // namespace AscendC

#endif  // VNPU_ASCENDC_TBUF_H
