// The ACL runtime's memory functions (acl_rt.h). aclrtMalloc reserves from
// the device's memory directly, apart from torch's caching allocator (as on
// Ascend, where torch's allocator is one client of the same device memory).
// Copies and fills check that each device-side range lies inside one npu
// allocation, so a wrong size or kind fails with a status instead of writing
// past the end. aclrtMemcpy is ordered with the current device's default
// stream (it waits for the work queued there first, like cudaMemcpy).
#include "csrc/api/acl_memory.h"

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "csrc/api/acl_status.h"
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_stream.h"
#include "third_party/acl/inc/acl/acl_rt.h"
#include <vnpu/device_allocator.h>
#include <vnpu/runtime.h>
#include <vnpu/stream.h>

namespace torch_npu {
namespace acl {
namespace {

struct AclBlock {
  std::size_t bytes;
  int device;
};

struct AclAllocations {
  std::mutex mutex;
  std::map<const char*, AclBlock> device;  // aclrtMalloc'd, by start
  std::set<void*> host;                    // aclrtMallocHost'd
};

AclAllocations& allocations() {
  static auto* all = new AclAllocations();  // leaked: freed blocks may come back during exit
  return *all;
}

const char* kind_name(aclrtMemcpyKind kind) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      return "ACL_MEMCPY_HOST_TO_HOST";
    case ACL_MEMCPY_HOST_TO_DEVICE:
      return "ACL_MEMCPY_HOST_TO_DEVICE";
    case ACL_MEMCPY_DEVICE_TO_HOST:
      return "ACL_MEMCPY_DEVICE_TO_HOST";
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
      return "ACL_MEMCPY_DEVICE_TO_DEVICE";
    case ACL_MEMCPY_DEFAULT:
      return "ACL_MEMCPY_DEFAULT";
  }
  return "an unknown aclrtMemcpyKind";
}

// ACL_SUCCESS when [p, p + count) lies inside one npu allocation; otherwise
// the failure, recorded with `what` ("the destination").
aclError check_device_range(const char* api, const char* what, const void* p, std::size_t count) {
  void* base = nullptr;
  std::size_t bytes = 0;
  int device = -1;
  if (!npu_allocation_containing(p, &base, &bytes, &device)) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": " + what +
                                             " is not npu memory (aclrtMalloc or an npu tensor's) though the copy "
                                             "kind says it is");
  }
  const std::size_t offset = static_cast<const char*>(p) - static_cast<const char*>(base);
  if (count > bytes - offset) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": " + what + " range of " + std::to_string(count) +
                                             " bytes at offset " + std::to_string(offset) +
                                             " runs past the end of its npu allocation of " +
                                             std::to_string(bytes) + " bytes");
  }
  return ACL_SUCCESS;
}

bool is_device_pointer(const void* p) { return vnpu::Runtime::instance().device_of_pointer(p) >= 0; }

// Checks a copy's arguments; ACL_SUCCESS or the recorded failure.
aclError check_copy(const char* api, void* dst, std::size_t destMax, const void* src, std::size_t count,
                    aclrtMemcpyKind kind) {
  if (dst == nullptr || src == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": dst and src must not be NULL");
  }
  if (count > destMax) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": count " + std::to_string(count) +
                                             " is larger than destMax " + std::to_string(destMax));
  }
  bool dst_device = false;
  bool src_device = false;
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      break;
    case ACL_MEMCPY_HOST_TO_DEVICE:
      dst_device = true;
      break;
    case ACL_MEMCPY_DEVICE_TO_HOST:
      src_device = true;
      break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
      dst_device = src_device = true;
      break;
    case ACL_MEMCPY_DEFAULT:  // the kind follows from the addresses
      dst_device = is_device_pointer(dst);
      src_device = is_device_pointer(src);
      break;
    default:
      return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": " + kind_name(kind));
  }
  if (dst_device) {
    const aclError status = check_device_range(api, "the destination", dst, count);
    if (status != ACL_SUCCESS) return status;
  } else if (kind != ACL_MEMCPY_DEFAULT && is_device_pointer(dst)) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": the destination is npu memory, but the kind is " +
                                             kind_name(kind));
  }
  if (src_device) {
    const aclError status = check_device_range(api, "the source", src, count);
    if (status != ACL_SUCCESS) return status;
  } else if (kind != ACL_MEMCPY_DEFAULT && is_device_pointer(src)) {
    return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": the source is npu memory, but the kind is " +
                                             kind_name(kind));
  }
  return ACL_SUCCESS;
}

// The runtime stream behind an aclrtStream (NULL: the current device's
// default stream), or nullptr with the failure recorded.
vnpu::Stream* runtime_stream_of(const char* api, aclrtStream handle) {
  std::optional<c10::Stream> stream =
      handle == nullptr ? std::optional<c10::Stream>(default_stream(current_device())) : stream_of_handle(handle);
  if (!stream) {
    fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": the stream is not a stream of the virtual NPU");
    return nullptr;
  }
  return &runtime_stream(*stream);
}

aclError malloc_device(const char* api, void** devPtr, std::size_t size) {
  if (devPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": devPtr is NULL");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, std::string(api) + ": size must be greater than 0");
  return acl_call(api, [&] {
    const c10::DeviceIndex device = current_device();
    void* p = runtime_device(device).memory().allocate(size);
    std::lock_guard<std::mutex> lock(allocations().mutex);
    allocations().device[static_cast<const char*>(p)] = AclBlock{size, device};
    *devPtr = p;
    return ACL_SUCCESS;
  });
}

}  // namespace

bool npu_allocation_containing(const void* address, void** base, std::size_t* bytes, int* device) {
  const int owner = vnpu::Runtime::instance().device_of_pointer(address);
  if (owner < 0) return false;
  {
    AclAllocations& all = allocations();
    std::lock_guard<std::mutex> lock(all.mutex);
    auto it = all.device.upper_bound(static_cast<const char*>(address));
    if (it != all.device.begin()) {
      --it;
      if (static_cast<const char*>(address) < it->first + it->second.bytes) {
        *base = const_cast<char*>(it->first);
        *bytes = it->second.bytes;
        *device = it->second.device;
        return true;
      }
    }
  }
  if (!runtime_allocators(static_cast<c10::DeviceIndex>(owner)).allocation_containing(address, base, bytes)) {
    return false;
  }
  *device = owner;
  return true;
}

}  // namespace acl
}  // namespace torch_npu

using torch_npu::acl::acl_call;
using torch_npu::acl::fail;

extern "C" {

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return torch_npu::acl::malloc_device("aclrtMalloc", devPtr, size);
}

aclError aclrtMallocAlign32(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  // Device memory is handed out on 512-byte boundaries, so 32 holds.
  return torch_npu::acl::malloc_device("aclrtMallocAlign32", devPtr, size);
}

aclError aclrtFree(void* devPtr) {
  return acl_call("aclrtFree", [&] {
    torch_npu::acl::AclBlock block{};
    {
      auto& all = torch_npu::acl::allocations();
      std::lock_guard<std::mutex> lock(all.mutex);
      auto it = all.device.find(static_cast<const char*>(devPtr));
      if (it == all.device.end()) {
        return fail(ACL_ERROR_INVALID_PARAM,
                    "aclrtFree: the pointer was not returned by aclrtMalloc, or was freed already (memory of npu "
                    "tensors belongs to torch's allocator)");
      }
      block = it->second;
      all.device.erase(it);
    }
    // Work queued before the free may still use it: free once the device is idle.
    torch_npu::runtime_device(static_cast<c10::DeviceIndex>(block.device)).synchronize();
    torch_npu::runtime_device(static_cast<c10::DeviceIndex>(block.device)).memory().release(devPtr);
    return ACL_SUCCESS;
  });
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  if (hostPtr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size must be greater than 0");
  void* p = std::aligned_alloc(64, (size + 63) / 64 * 64);
  if (p == nullptr) return fail(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost: out of host memory");
  auto& all = torch_npu::acl::allocations();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.host.insert(p);
  *hostPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtFreeHost(void* hostPtr) {
  auto& all = torch_npu::acl::allocations();
  {
    std::lock_guard<std::mutex> lock(all.mutex);
    if (all.host.erase(hostPtr) == 0) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: the pointer was not returned by aclrtMallocHost");
    }
  }
  std::free(hostPtr);
  return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  return acl_call("aclrtMemcpy", [&] {
    const aclError status = torch_npu::acl::check_copy("aclrtMemcpy", dst, destMax, src, count, kind);
    if (status != ACL_SUCCESS) return status;
    vnpu::Stream* stream = torch_npu::acl::runtime_stream_of("aclrtMemcpy", nullptr);
    stream->synchronize();  // ordered after the default stream's work, like cudaMemcpy
    if (count > 0) std::memmove(dst, src, count);
    return ACL_SUCCESS;
  });
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  return acl_call("aclrtMemcpyAsync", [&] {
    const aclError status = torch_npu::acl::check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind);
    if (status != ACL_SUCCESS) return status;
    vnpu::Stream* s = torch_npu::acl::runtime_stream_of("aclrtMemcpyAsync", stream);
    if (s == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (count > 0) s->enqueue(vnpu::TaskKind::kCopy, "aclrtMemcpyAsync", [dst, src, count] { std::memmove(dst, src, count); });
    return ACL_SUCCESS;
  });
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  return acl_call("aclrtMemset", [&] {
    if (count > maxCount) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: count " + std::to_string(count) +
                                               " is larger than maxCount " + std::to_string(maxCount));
    }
    const aclError status = torch_npu::acl::check_device_range("aclrtMemset", "the destination", devPtr, count);
    if (status != ACL_SUCCESS) return status;
    torch_npu::acl::runtime_stream_of("aclrtMemset", nullptr)->synchronize();
    std::memset(devPtr, value, count);
    return ACL_SUCCESS;
  });
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
  return acl_call("aclrtMemsetAsync", [&] {
    if (count > maxCount) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemsetAsync: count " + std::to_string(count) +
                                               " is larger than maxCount " + std::to_string(maxCount));
    }
    const aclError status = torch_npu::acl::check_device_range("aclrtMemsetAsync", "the destination", devPtr, count);
    if (status != ACL_SUCCESS) return status;
    vnpu::Stream* s = torch_npu::acl::runtime_stream_of("aclrtMemsetAsync", stream);
    if (s == nullptr) return ACL_ERROR_INVALID_PARAM;
    s->enqueue(vnpu::TaskKind::kCopy, "aclrtMemsetAsync", [devPtr, value, count] { std::memset(devPtr, value, count); });
    return ACL_SUCCESS;
  });
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: a pointer is NULL");
  return acl_call("aclrtGetMemInfo", [&] {
    const auto [free_bytes, total_bytes] = torch_npu::device_memory_info(torch_npu::current_device());
    *free = free_bytes;
    *total = total_bytes;
    return ACL_SUCCESS;
  });
}

}  // extern "C"
