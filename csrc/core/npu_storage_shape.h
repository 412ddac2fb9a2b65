// The shape a storage format gives a tensor's storage on the chip.
//
// Ascend's private formats tile the last dimensions into cubes and pad each
// tile: FRACTAL_NZ stores an (m, n) matrix as (ceil(n / C0), ceil(m / 16),
// 16, C0). vNPU keeps the values in ND order, but a tensor cast to such a
// format gets a storage of the padded size, so memory statistics,
// untyped_storage().size() and torch_npu.get_storage_size() read what they
// read on the chip.
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace torch_npu {

// C0, the elements of a 32-byte cube row. By default 32 for 1-byte types and
// 16 otherwise (the chip lays float32 out as it does float16); a
// customize_dtype (an aclDataType) sets it to 32 bytes / its size.
int64_t cube_c0(int64_t element_size, std::optional<int64_t> customize_dtype = std::nullopt);

// The storage's dimensions in the given format; the tensor's own sizes for
// the base formats and for a rank the format does not apply to.
std::vector<int64_t> npu_storage_sizes(c10::IntArrayRef sizes, int64_t acl_format, int64_t c0);

}  // namespace torch_npu
