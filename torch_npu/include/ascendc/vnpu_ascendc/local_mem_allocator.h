// Ascend C on the virtual NPU: LocalMemAllocator, static allocation of an AI core's memory.
//
// Models: LocalMemAllocator<Hardware> of the newer static-tensor programming style --
// tensors carved from the start of UB / L1 / L0A / L0B / L0C / the bias table in the
// order they are asked for, each rounded up to 32 bytes, with the memory's capacity
// enforced (a KernelError states the requested and available bytes). Alloc<T>()
// without a size takes the rest of the memory.
// Does not model: layouts (Alloc(layout)). Like the device, it knows nothing of TPipe:
// mixing both in one kernel makes their buffers overlap.
#ifndef VNPU_ASCENDC_LOCAL_MEM_ALLOCATOR_H
#define VNPU_ASCENDC_LOCAL_MEM_ALLOCATOR_H

#include <cstdint>

#include "block_context.h"
#include "local_tensor.h"
#include "positions.h"

namespace AscendC {

template <Hardware hard = Hardware::UB>
class LocalMemAllocator {
 public:
  LocalMemAllocator() : ctx_(&vnpu::ascendc::detail::CurrentBlock("LocalMemAllocator")) {}

  uint32_t GetCurAddr() const { return head_; }

  template <TPosition pos, class DataType, uint32_t tileSize>
  LocalTensor<DataType> Alloc() {
    return Take<DataType>(pos, tileSize);
  }
  template <TPosition pos, class DataType>
  LocalTensor<DataType> Alloc(uint32_t tileSize) {
    return Take<DataType>(pos, tileSize);
  }
  template <class DataType, uint32_t tileSize>
  LocalTensor<DataType> Alloc() {
    return Take<DataType>(DefaultPosition(), tileSize);
  }
  template <class DataType>
  LocalTensor<DataType> Alloc(uint32_t tileSize) {
    return Take<DataType>(DefaultPosition(), tileSize);
  }
  template <class DataType>
  LocalTensor<DataType> Alloc() {
    return Take<DataType>(DefaultPosition(), (ctx_->CapacityOf(hard) - head_) / sizeof(DataType));
  }

 private:
  static constexpr TPosition DefaultPosition() {
    return hard == Hardware::L1    ? TPosition::A1
           : hard == Hardware::L0A ? TPosition::A2
           : hard == Hardware::L0B ? TPosition::B2
           : hard == Hardware::L0C ? TPosition::CO1
           : hard == Hardware::BIAS ? TPosition::C2
                                    : TPosition::VECCALC;
  }

  template <class DataType>
  LocalTensor<DataType> Take(TPosition pos, uint64_t count) {
    namespace d = vnpu::ascendc::detail;
    const uint64_t bytes = (count * sizeof(DataType) + 31) / 32 * 32;
    const uint32_t capacity = ctx_->CapacityOf(hard);
    if (head_ + bytes > capacity) {
      d::Fail(d::Str("LocalMemAllocator<", d::HardwareName(hard), ">::Alloc: ", count, " elements of ",
                     d::TypeName<DataType>(), " (", bytes, " bytes) exceed the limit: ", d::HardwareName(hard),
                     " holds ", capacity, " bytes and ", head_, " are already allocated"));
    }
    DataType* p = reinterpret_cast<DataType*>(ctx_->MemoryOf(hard) + head_);
    head_ += static_cast<uint32_t>(bytes);
    return LocalTensor<DataType>(p, static_cast<uint32_t>(count), pos, nullptr);
  }

  vnpu::ascendc::detail::BlockContext* ctx_;
  uint32_t head_ = 0;
};

}  // namespace AscendC

#endif  // VNPU_ASCENDC_LOCAL_MEM_ALLOCATOR_H
