// Ascend C on the virtual NPU: LocalTensor, a typed view of an AI core's local memory.
//
// Models: a tensor in UB / L1 / L0A / L0B / L0C handed out by a TQue or TBuf, with
// GetValue / SetValue / operator() / operator[] / GetSize / SetSize / GetLength /
// GetPhyAddr / GetPosition / ReinterpretCast / SetAddrWithOffset / user tags. Every
// tensor remembers the queue buffer it came from, so a queue can tell its own
// tensors from others (TQue::EnQue / FreeTensor check it). Element reads and writes
// through GetValue / SetValue are checked against GetSize().
// Does not model: local-memory addresses as small integers. GetPhyAddr() returns the
// host address of the element, which is what a kernel needs to dereference it; code
// that does arithmetic assuming UB starts at 0 is not supported.
#ifndef VNPU_ASCENDC_LOCAL_TENSOR_H
#define VNPU_ASCENDC_LOCAL_TENSOR_H

#include <cstdint>
#include <cstdio>

#include "block_context.h"
#include "positions.h"
#include "types.h"

namespace vnpu {
namespace ascendc {
namespace detail {

// One buffer of a TQue or TBuf: where it is and what state the queue protocol has it in.
struct BufRecord {
  enum class State : uint8_t { kFree, kOccupied, kEnque, kDeque };
  uint8_t* addr = nullptr;
  uint32_t len = 0;  // bytes
  State state = State::kFree;
  const void* owner = nullptr;  // the TQue/TBuf that owns this buffer
};

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

namespace AscendC {

template <typename T>
class LocalTensor {
 public:
  using PrimType = T;

  LocalTensor() = default;

  // vNPU: a tensor of `size` elements at `addr` in position `pos`, part of buffer `buf`.
  LocalTensor(T* addr, uint32_t size, TPosition pos, vnpu::ascendc::detail::BufRecord* buf)
      : address_(addr), size_(size), position_(pos), buf_(buf) {}

  T GetValue(uint32_t index) const {
    CheckIndex(index, "LocalTensor::GetValue");
    return address_[index];
  }
  template <typename V>
  void SetValue(uint32_t index, V value) const {
    CheckIndex(index, "LocalTensor::SetValue");
    address_[index] = static_cast<T>(value);
  }
  T& operator()(uint32_t index) const {
    CheckIndex(index, "LocalTensor::operator()");
    return address_[index];
  }

  // The tensor starting `offset` elements further, up to the end of this one.
  LocalTensor operator[](uint32_t offset) const {
    LocalTensor r = *this;
    r.address_ = address_ + offset;
    r.size_ = size_ > offset ? size_ - offset : 0;
    return r;
  }

  uint32_t GetSize() const { return size_; }
  void SetSize(uint32_t size) { size_ = size; }
  uint32_t GetLength() const { return size_ * static_cast<uint32_t>(sizeof(T)); }
  void SetBufferLen(uint32_t dataLen) { size_ = dataLen / static_cast<uint32_t>(sizeof(T)); }
  uint64_t GetPhyAddr() const { return reinterpret_cast<uint64_t>(address_); }
  uint64_t GetPhyAddr(uint32_t offset) const { return reinterpret_cast<uint64_t>(address_ + offset); }
  int32_t GetPosition() const { return static_cast<int32_t>(position_); }
  void SetUserTag(int32_t tag) { user_tag_ = tag; }
  int32_t GetUserTag() const { return user_tag_; }

  template <typename U>
  LocalTensor<U> ReinterpretCast() const {
    return LocalTensor<U>(reinterpret_cast<U*>(address_),
                          static_cast<uint32_t>(static_cast<uint64_t>(size_) * sizeof(T) / sizeof(U)), position_,
                          buf_);
  }

  // Points this tensor `offset` elements (of S) past `src`, keeping src's buffer.
  template <typename S>
  void SetAddrWithOffset(LocalTensor<S>& src, uint32_t offset) {
    address_ = reinterpret_cast<T*>(src.Data() + offset);
    size_ = static_cast<uint32_t>((static_cast<uint64_t>(src.GetSize()) - offset) * sizeof(S) / sizeof(T));
    position_ = src.Position();
    buf_ = src.Buffer();
  }

  void Print() const { Print(size_); }
  void Print(uint32_t len) const {
    for (uint32_t i = 0; i < len && i < size_; ++i) {
      std::printf("%g%s", static_cast<double>(static_cast<float>(address_[i])), (i + 1) % 16 == 0 ? "\n" : " ");
    }
    std::printf("\n");
  }
  void ToFile(const char* /*fileName*/) const {}

  // vNPU accessors (not Ascend C API).
  T* Data() const { return address_; }
  TPosition Position() const { return position_; }
  vnpu::ascendc::detail::BufRecord* Buffer() const { return buf_; }

 private:
  void CheckIndex(uint32_t index, const char* what) const {
    if (index >= size_) {
      vnpu::ascendc::detail::Fail(vnpu::ascendc::detail::Str(what, ": index ", index, " is out of range for a ",
                                                             vnpu::ascendc::detail::PositionName(position_),
                                                             " tensor of ", size_, " elements"));
    }
  }

  T* address_ = nullptr;
  uint32_t size_ = 0;
  TPosition position_ = TPosition::VECCALC;
  vnpu::ascendc::detail::BufRecord* buf_ = nullptr;
  int32_t user_tag_ = -1;
};

}  // namespace AscendC

#endif  // VNPU_ASCENDC_LOCAL_TENSOR_H
