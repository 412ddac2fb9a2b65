// Device memory as the ACL runtime API sees it: aclrtMalloc'd blocks and the
// allocations of torch's caching allocator, found by any address inside them.
#pragma once

#include <cstddef>

namespace torch_npu {
namespace acl {

// The npu allocation (aclrtMalloc, or a block the caching allocator handed
// out) that contains `address`: its start, its size in bytes and its device.
// False for any other address. Thread-safe; takes locks (not for hot paths).
bool npu_allocation_containing(const void* address, void** base, std::size_t* bytes, int* device);

}  // namespace acl
}  // namespace torch_npu
