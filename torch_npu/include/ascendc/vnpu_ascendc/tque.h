// Ascend C on the virtual NPU: TQue and TQueBind, the queues between pipeline stages.
//
// Models: the buffer protocol of a queue -- AllocTensor takes a free buffer, EnQue
// puts it in a FIFO of at most `depth` tensors, DeQue takes the oldest out, FreeTensor
// returns the buffer -- with CANN's checks turned into KernelErrors: DeQue on an
// empty queue and AllocTensor with no free buffer (both hang a device in a
// single-threaded program), EnQue past the depth, and EnQue / FreeTensor of a tensor
// that is not one of this queue's buffers or is in the wrong state.
// Does not model: the hardware events a queue sets between the producing and the
// consuming pipe (program order makes them unnecessary here, see events.h), and
// depth-0 queues (AllocTensor(LocalTensor&) in place).
#ifndef VNPU_ASCENDC_TQUE_H
#define VNPU_ASCENDC_TQUE_H

#include <cstdint>
#include <vector>

#include "block_context.h"
#include "local_tensor.h"
#include "positions.h"

namespace AscendC {

template <TPosition src, TPosition dst, int32_t depth, auto mask = 0>
class TQueBind {
  static_assert(depth != 0, "must use AllocTensor<LocalTensor&> api while tque's depth is zero "
                            "(vNPU does not model depth-0 queues)");
  using BufRecord = vnpu::ascendc::detail::BufRecord;
  using State = BufRecord::State;

 public:
  static constexpr TPosition srcPosition = src;
  static constexpr TPosition dstPosition = dst;
  static constexpr bool isTQue = true;
  static constexpr Hardware kPool = GetBufferPos(src, dst);
  static constexpr TPosition kTensorPosition = GetPosition(src, dst);

  template <typename T>
  LocalTensor<T> AllocTensor() {
    using vnpu::ascendc::detail::Fail;
    using vnpu::ascendc::detail::Str;
    if (bufs_.empty()) {
      Fail(Str(VnpuName(), "::AllocTensor: the queue has no buffers; call TPipe::InitBuffer(que, num, len) first"));
    }
    for (size_t i = 0; i < bufs_.size(); ++i) {
      BufRecord& b = bufs_[(cursor_ + i) % bufs_.size()];
      if (b.state == State::kFree) {
        cursor_ = (cursor_ + i + 1) % bufs_.size();
        b.state = State::kOccupied;
        return ToTensor<T>(b);
      }
    }
    Fail(Str(VnpuName(), "::AllocTensor: all ", bufs_.size(),
             " buffers of the queue are in use (allocated and not yet freed with FreeTensor); on the device "
             "this AllocTensor would wait forever"));
  }

  template <typename T>
  bool EnQue(const LocalTensor<T>& tensor) {
    using vnpu::ascendc::detail::Fail;
    using vnpu::ascendc::detail::Str;
    BufRecord* b = Own(tensor.Buffer(), "EnQue");
    if (count_ >= depth) {
      Fail(Str(VnpuName(), "::EnQue: usedCount is ", count_, ", which exceed depth limits ", depth,
               " (DeQue a tensor before enqueuing another)"));
    }
    if (b->state == State::kFree) {
      Fail(Str(VnpuName(), "::EnQue: the tensor's buffer is free (it was FreeTensor'ed or never allocated)"));
    }
    if (b->state == State::kEnque) {
      Fail(Str(VnpuName(), "::EnQue: the tensor is already in the queue"));
    }
    b->state = State::kEnque;
    fifo_[(head_ + count_) % depth] = b;
    ++count_;
    return true;
  }

  template <typename T>
  LocalTensor<T> DeQue() {
    using vnpu::ascendc::detail::Fail;
    using vnpu::ascendc::detail::Str;
    if (count_ == 0) {
      Fail(Str(VnpuName(), "::DeQue: the queue is empty (usedCount is 0); EnQue a tensor first -- on the device "
                           "this DeQue would wait forever"));
    }
    BufRecord* b = fifo_[head_];
    head_ = (head_ + 1) % depth;
    --count_;
    b->state = State::kDeque;
    return ToTensor<T>(*b);
  }

  template <typename T>
  void FreeTensor(const LocalTensor<T>& tensor) {
    using vnpu::ascendc::detail::Fail;
    using vnpu::ascendc::detail::Str;
    BufRecord* b = Own(tensor.Buffer(), "FreeTensor");
    if (b->state == State::kFree) {
      Fail(Str(VnpuName(), "::FreeTensor: the tensor's buffer is already free (FreeTensor called twice?)"));
    }
    if (b->state == State::kEnque) {
      Fail(Str(VnpuName(), "::FreeTensor: the tensor is still in the queue; DeQue it before freeing it"));
    }
    b->state = State::kFree;
  }

  bool VacantInQue() const { return count_ < depth; }
  bool HasTensorInQue() const { return count_ > 0; }
  int32_t GetTensorCountInQue() const { return count_; }
  bool HasIdleBuffer() const {
    for (const BufRecord& b : bufs_) {
      if (b.state == State::kFree) return true;
    }
    return false;
  }
  void FreeAllEvent() {}

  // vNPU: takes `num` buffers of `len` bytes starting at `base` (from TPipe::InitBuffer).
  void VnpuAttach(uint8_t* base, uint8_t num, uint32_t len) {
    bufs_.assign(num, BufRecord{});
    for (uint8_t i = 0; i < num; ++i) {
      bufs_[i].addr = base + static_cast<size_t>(i) * len;
      bufs_[i].len = len;
      bufs_[i].owner = this;
    }
    fifo_.assign(depth, nullptr);
    head_ = count_ = 0;
    cursor_ = 0;
  }
  const char* VnpuName() const { return kName; }

 private:
  static constexpr const char* kName = src == dst                 ? "TQue<VECCALC>"
                                       : dst == TPosition::VECIN  ? "TQue<VECIN>"
                                       : src == TPosition::VECOUT ? "TQue<VECOUT>"
                                       : dst == TPosition::A1     ? "TQue<A1>"
                                       : dst == TPosition::A2     ? "TQue<A2>"
                                       : dst == TPosition::B1     ? "TQue<B1>"
                                       : dst == TPosition::B2     ? "TQue<B2>"
                                       : dst == TPosition::C1     ? "TQue<C1>"
                                       : dst == TPosition::C2     ? "TQue<C2>"
                                       : src == TPosition::CO1    ? "TQue<CO1>"
                                       : src == TPosition::CO2    ? "TQue<CO2>"
                                                                  : "TQueBind";

  template <typename T>
  LocalTensor<T> ToTensor(BufRecord& b) {
    return LocalTensor<T>(reinterpret_cast<T*>(b.addr), b.len / static_cast<uint32_t>(sizeof(T)), kTensorPosition,
                          &b);
  }

  BufRecord* Own(BufRecord* b, const char* api) {
    if (b == nullptr || b->owner != this) {
      vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(
          VnpuName(), "::", api,
          ": the tensor does not belong to this queue (it came from another TQue or a TBuf, or was never "
          "allocated from a queue)"));
    }
    return b;
  }

  std::vector<BufRecord> bufs_;
  std::vector<BufRecord*> fifo_;
  int32_t head_ = 0;
  int32_t count_ = 0;
  size_t cursor_ = 0;
};

namespace vnpu_detail {
// The source and destination a TQue at `pos` moves data between.
constexpr TPosition QueSrc(TPosition pos) {
  switch (pos) {
    case TPosition::VECIN:
    case TPosition::A1:
    case TPosition::B1:
    case TPosition::C1:
      return TPosition::GM;
    case TPosition::A2:
      return TPosition::A1;
    case TPosition::B2:
      return TPosition::B1;
    case TPosition::C2:
      return TPosition::C1;
    default:
      return pos;
  }
}
constexpr TPosition QueDst(TPosition pos) {
  switch (pos) {
    case TPosition::VECOUT:
    case TPosition::CO2:
      return TPosition::GM;
    case TPosition::CO1:
      return TPosition::CO2;
    default:
      return pos;
  }
}
}  // namespace vnpu_detail

template <TPosition pos, int32_t depth, auto mask = 0>
class TQue : public TQueBind<vnpu_detail::QueSrc(pos), vnpu_detail::QueDst(pos), depth, mask> {};

}  // namespace AscendC

#endif  // VNPU_ASCENDC_TQUE_H
