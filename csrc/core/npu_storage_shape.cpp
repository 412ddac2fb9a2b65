#include "csrc/core/npu_storage_shape.h"

#include <c10/util/Exception.h>

namespace torch_npu {
namespace {

constexpr int64_t kNC1HWC0 = 3;
constexpr int64_t kFractalZ = 4;
constexpr int64_t kFractalNz = 29;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bits per element of an aclDataType (acl_base.h's numbers, and torch_npu's
// dtype constants, which are 256 + those: torch_npu.int32 == 259).
int64_t acl_dtype_bits(int64_t dtype) {
  switch (dtype >= 256 ? dtype - 256 : dtype) {
    case 2: case 4: case 12: case 34: case 35: case 36: case 37: return 8;  // int8, uint8, bool, the 8-bit floats
    case 1: case 6: case 7: case 27: return 16;                                 // float16, int16, uint16, bfloat16
    case 0: case 3: case 8: case 33: return 32;                                 // float, int32, uint32, complex32
    case 9: case 10: case 11: case 16: return 64;                               // int64, uint64, double, complex64
    case 29: case 40: return 4;                                                 // int4, float4_e2m1 (two per byte)
    default:
      TORCH_CHECK(false, "npu_format_cast: customize_dtype ", dtype, " is not a data type vNPU knows: pass an "
                  "aclDataType (ACL_INT32 = 3, ...) or a torch_npu dtype constant (torch_npu.int32, torch_npu.int4, ...).");
  }
}

}  // namespace

int64_t cube_c0(int64_t element_size, std::optional<int64_t> customize_dtype) {
  if (customize_dtype.has_value()) return 32 * 8 / acl_dtype_bits(*customize_dtype);
  return element_size == 1 ? 32 : 16;
}

std::vector<int64_t> npu_storage_sizes(c10::IntArrayRef sizes, int64_t acl_format, int64_t c0) {
  std::vector<int64_t> out(sizes.begin(), sizes.end());
  if (acl_format == kFractalNz && out.size() >= 2) {
    const int64_t m = out[out.size() - 2];
    const int64_t n = out[out.size() - 1];
    out.resize(out.size() - 2);
    for (int64_t dim : {ceil_div(n, c0), ceil_div(m, 16), int64_t{16}, c0}) out.push_back(dim);
  } else if (acl_format == kNC1HWC0 && out.size() == 4) {
    out = {out[0], ceil_div(out[1], c0), out[2], out[3], c0};
  } else if (acl_format == kFractalZ && out.size() == 4) {
    out = {ceil_div(out[1], c0) * out[2] * out[3], ceil_div(out[0], 16), 16, c0};
  }
  return out;
}

}  // namespace torch_npu
