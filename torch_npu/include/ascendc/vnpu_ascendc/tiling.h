// Ascend C on the virtual NPU: tiling data, the parameters the host computes for a kernel.
//
// Models: the host-side definition macros (BEGIN_TILING_DATA_DEF, TILING_DATA_FIELD_DEF,
// TILING_DATA_FIELD_DEF_ARR, TILING_DATA_FIELD_DEF_STRUCT, END_TILING_DATA_DEF,
// REGISTER_TILING_DATA_CLASS, REGISTER_TILING_DEFAULT) and the kernel-side readers
// (GET_TILING_DATA, GET_TILING_DATA_WITH_STRUCT, GET_TILING_DATA_MEMBER,
// GET_TILING_DATA_PTR_WITH_STRUCT). One definition serves both sides: a plain struct
// whose fields are laid out in declaration order with natural alignment (what CANN
// generates for the kernel side), with set_<field>() / get_<field>() / SaveToBuffer() /
// GetDataSize() for the host. The kernel reads it from GM with a checked copy.
// Does not model: tiling keys (TILING_KEY_IS), and more than one registered default
// tiling class per translation unit (GET_TILING_DATA takes the one registered; use
// GET_TILING_DATA_WITH_STRUCT to name another).
#ifndef VNPU_ASCENDC_TILING_H
#define VNPU_ASCENDC_TILING_H

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "block_context.h"
#include "global_tensor.h"
#include "keywords.h"

namespace optiling {
// The argument GET_TILING_DATA finds the registered tiling class with (by
// argument-dependent lookup into this namespace, where the samples register it).
struct VnpuTilingTag {};
}  // namespace optiling

namespace vnpu {
namespace ascendc {
namespace detail {

// Copies sizeof(T) bytes of tiling data from GM, checked like any GM read.
template <typename T>
inline void CopyTilingFromGm(T* out, const void* gm, const char* what) {
  if (gm == nullptr) Fail(Str(what, ": the tiling pointer is null"));
  CheckGmRange(LookUpGmRegion(gm), gm, sizeof(T), what);
  std::memcpy(static_cast<void*>(out), gm, sizeof(T));
}

}  // namespace detail
}  // namespace ascendc
}  // namespace vnpu

// ---- host side: defining a tiling structure ----
#define BEGIN_TILING_DATA_DEF(class_name) \
  struct class_name {                     \
    using VnpuSelf = class_name;

#define TILING_DATA_FIELD_DEF(data_type, field_name)                 \
  data_type field_name = 0;                                          \
  void set_##field_name(data_type value) { field_name = value; }     \
  data_type get_##field_name() const { return field_name; }

#define TILING_DATA_FIELD_DEF_ARR(data_type, arr_size, field_name)                              \
  data_type field_name[arr_size] = {};                                                          \
  void set_##field_name(const data_type* value) {                                               \
    std::memcpy(field_name, value, sizeof(field_name));                                         \
  }                                                                                             \
  const data_type* get_##field_name() const { return field_name; }

#define TILING_DATA_FIELD_DEF_STRUCT(struct_type, field_name) struct_type field_name;

#define END_TILING_DATA_DEF                                                              \
  size_t GetDataSize() const { return sizeof(VnpuSelf); }                                \
  void SaveToBuffer(void* buffer, size_t capacity) const {                               \
    if (capacity < sizeof(VnpuSelf)) {                                                   \
      throw std::invalid_argument("SaveToBuffer: the buffer is smaller than the tiling data"); \
    }                                                                                    \
    std::memcpy(buffer, static_cast<const void*>(this), sizeof(VnpuSelf));               \
  }                                                                                      \
  }

// Registers `class_name` as the tiling data of operator `op_type` (and as the default
// GET_TILING_DATA reads).
#define REGISTER_TILING_DATA_CLASS(op_type, class_name) \
  class_name VnpuRegisteredTilingData(::optiling::VnpuTilingTag);
#define REGISTER_TILING_DEFAULT(class_name) class_name VnpuRegisteredTilingData(::optiling::VnpuTilingTag);

// ---- kernel side: reading it ----
#define GET_TILING_DATA_WITH_STRUCT(struct_type, var, tiling_arg) \
  struct_type var;                                                \
  ::vnpu::ascendc::detail::CopyTilingFromGm(&var, (tiling_arg), "GET_TILING_DATA")

#define GET_TILING_DATA(var, tiling_arg) \
  GET_TILING_DATA_WITH_STRUCT(decltype(VnpuRegisteredTilingData(::optiling::VnpuTilingTag{})), var, tiling_arg)

#define GET_TILING_DATA_PTR_WITH_STRUCT(struct_type, var, tiling_arg) \
  const struct_type* var = reinterpret_cast<const struct_type*>(tiling_arg)

#define GET_TILING_DATA_MEMBER(struct_type, member, var, tiling_arg)                                   \
  decltype(struct_type::member) var;                                                                 \
  ::vnpu::ascendc::detail::CopyTilingFromGm(                                                         \
      &var, reinterpret_cast<const uint8_t*>(tiling_arg) + offsetof(struct_type, member), "GET_TILING_DATA_MEMBER")

#endif  // VNPU_ASCENDC_TILING_H
