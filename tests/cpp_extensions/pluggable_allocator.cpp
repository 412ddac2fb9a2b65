// A pluggable allocator for tests/test_pluggable_allocator.py: device memory
// from the ACL runtime, with counters the test reads through ctypes.
#include <sys/types.h>

#include <atomic>

#include "acl/acl.h"
#include "torch_npu/csrc/core/npu/NPUCachingAllocator.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace {
std::atomic<int> g_allocs{0};
std::atomic<int> g_frees{0};
std::atomic<long> g_live_bytes{0};
std::atomic<int> g_stream_checks{0};  // allocations whose stream was the current one
std::atomic<int> g_record_streams{0};
std::atomic<int> g_peak_resets{0};
}  // namespace

extern "C" {

void* test_alloc(ssize_t size, int device, aclrtStream stream) {
  void* ptr = nullptr;
  if (aclrtSetDevice(device) != ACL_SUCCESS) return nullptr;
  if (aclrtMallocAlign32(&ptr, size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return nullptr;
  if (stream == c10_npu::getCurrentNPUStream(device).stream()) ++g_stream_checks;
  ++g_allocs;
  g_live_bytes += size;
  return ptr;
}

void test_free(void* ptr, ssize_t size, int device, aclrtStream stream) {
  aclrtFree(ptr);
  ++g_frees;
  g_live_bytes -= size;
}

// Allocations above this many bytes fail (the out-of-memory test).
void* test_alloc_small_only(ssize_t size, int device, aclrtStream stream) {
  return size > (1 << 20) ? nullptr : test_alloc(size, device, stream);
}

c10_npu::NPUCachingAllocator::DeviceStats test_device_stats(c10::DeviceIndex device) {
  c10_npu::NPUCachingAllocator::DeviceStats stats;
  stats.num_alloc_retries = 7;
  stats.allocated_bytes[0].current = g_live_bytes.load();
  return stats;
}

void test_reset_peak(c10::DeviceIndex device) { ++g_peak_resets; }

void test_record_stream(void* ptr, c10_npu::NPUStream stream) {
  if (ptr != nullptr && stream.stream() != nullptr) ++g_record_streams;
}

void test_erase_stream(void* ptr, c10_npu::NPUStream stream) {
  if (ptr != nullptr && stream.stream() != nullptr) --g_record_streams;
}

int test_allocs() { return g_allocs; }
int test_frees() { return g_frees; }
int test_stream_checks() { return g_stream_checks; }
int test_record_streams() { return g_record_streams; }
int test_peak_resets() { return g_peak_resets; }
}
