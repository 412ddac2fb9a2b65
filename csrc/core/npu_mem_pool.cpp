#include "csrc/core/npu_mem_pool.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_pluggable_allocator.h"
#include "csrc/core/npu_stream.h"
#include <vnpu/device_allocator.h>

namespace torch_npu {
namespace {

std::mutex g_mutex;
std::map<MempoolId, c10::DeviceIndex> g_pool_devices;              // guarded by g_mutex
std::unordered_map<const vnpu::Stream*, MempoolId> g_capturing;  // guarded by g_mutex
uint64_t g_next_graph_id = 1, g_next_handle_id = 1;              // guarded by g_mutex
// Capture routes plus threads inside use_mem_pool: zero keeps the
// allocation path to one load.
std::atomic<int> g_routes{0};

// use_mem_pool's stack of (device, pool) for this thread.
thread_local std::vector<std::pair<c10::DeviceIndex, MempoolId>> t_pools;

// Guarded by g_mutex.
c10::DeviceIndex device_of(MempoolId id) {
  auto it = g_pool_devices.find(id);
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, it != g_pool_devices.end(), "unknown NPU memory pool (", id.first,
                 ", ", id.second, ")");
  return it->second;
}

// Note [Pools of a pluggable allocator]
// torch.npu.MemPool(allocator) (vLLM's sleep mode builds one): the pool caches
// blocks as every pool does, but its segments come from the user's alloc
// function and go back through their free, called with the pool's device and
// its current stream. The caching allocator asks for a segment when its cache
// cannot serve a request, and returns idle ones when the pool is released or
// the cache emptied; a segment the user's alloc refuses (NULL) is an
// exhausted arena: the allocator frees its cache and retries, then raises its
// out-of-memory error.
class PluggableSegments final : public vnpu::MemoryArena {
 public:
  PluggableSegments(std::shared_ptr<PluggableAllocator> allocator, c10::DeviceIndex device)
      : allocator_(std::move(allocator)), device_(device) {}

  void* map(std::size_t bytes, std::size_t /*alignment*/) override {
    try {
      return allocator_->malloc(bytes, device_, current_stream(device_));
    } catch (const c10::OutOfMemoryError&) {
      return nullptr;
    }
  }
  void unmap(void* ptr, std::size_t /*bytes*/) override { allocator_->free(ptr); }
  const char* name() const override { return "pluggable allocator"; }

 private:
  const std::shared_ptr<PluggableAllocator> allocator_;
  const c10::DeviceIndex device_;
};

// Guarded by g_mutex; the pool exists once device_of found it.
vnpu::CachingAllocator* allocator_of(MempoolId id) { return runtime_allocators(device_of(id)).pool(id); }

}  // namespace

MempoolId create_pool(c10::DeviceIndex device, bool for_graph, std::shared_ptr<PluggableAllocator> segments,
                      bool no_split, bool use_on_oom) {
  ordinary_allocator(device);  // raises the allocator options' errors, as the first allocation does
  vnpu::DeviceAllocator& allocators = runtime_allocators(device);
  std::shared_ptr<vnpu::MemoryArena> arena;
  if (segments) arena = std::make_shared<PluggableSegments>(std::move(segments), device);
  std::lock_guard<std::mutex> lock(g_mutex);
  const MempoolId id = for_graph ? MempoolId{g_next_graph_id++, 0} : MempoolId{0, g_next_handle_id++};
  allocators.create_pool(id, std::move(arena), no_split, use_on_oom);
  g_pool_devices[id] = device;
  return id;
}

void retain_pool(MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  runtime_allocators(device_of(id)).retain_pool(id);
}

void release_pool(MempoolId id) {
  c10::DeviceIndex device = -1;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_pool_devices.find(id);
    if (it == g_pool_devices.end()) return;
    device = it->second;
  }
  // Waits for queued work that still reads its cached blocks (not under g_mutex).
  with_torch_errors([&] { runtime_allocators(device).release_pool(id); });
}

int pool_use_count(MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pool_devices.find(id);
  return it == g_pool_devices.end() ? 0 : runtime_allocators(it->second).pool_use_count(id);
}

c10::DeviceIndex pool_device(MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return device_of(id);
}

// A use of the pool holds a reference to it, as torch.cuda's does
// (pool.use_count() counts it).
void begin_allocate_to_pool(c10::DeviceIndex device, MempoolId id) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const c10::DeviceIndex owner = device_of(id);
    NPU_CHECK_WITH(ValueError, ErrCode::kValue, owner == device, "the memory pool belongs to npu:", owner,
                   ", not to npu:", device);
    runtime_allocators(device).retain_pool(id);
  }
  t_pools.emplace_back(device, id);
  g_routes.fetch_add(1, std::memory_order_relaxed);
}

void end_allocate_to_pool(c10::DeviceIndex device, MempoolId id) {
  auto it = std::find(t_pools.rbegin(), t_pools.rend(), std::make_pair(device, id));
  if (it == t_pools.rend()) return;
  t_pools.erase(std::next(it).base());
  g_routes.fetch_sub(1, std::memory_order_relaxed);
  release_pool(id);
}

void begin_capture_to_pool(vnpu::Stream& stream, MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  device_of(id);
  if (g_capturing.emplace(&stream, id).second) g_routes.fetch_add(1, std::memory_order_relaxed);
}

void end_capture_to_pool(vnpu::Stream& stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_capturing.erase(&stream) > 0) g_routes.fetch_sub(1, std::memory_order_relaxed);
}

vnpu::CachingAllocator* routed_pool(c10::DeviceIndex device, vnpu::Stream& stream) {
  if (g_routes.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto capture = g_capturing.find(&stream);
  if (capture != g_capturing.end()) return allocator_of(capture->second);
  for (auto it = t_pools.rbegin(); it != t_pools.rend(); ++it) {
    if (it->first == device) return allocator_of(it->second);
  }
  return nullptr;
}

std::vector<vnpu::SegmentInfo> pool_segments(MempoolId id) {
  vnpu::CachingAllocator* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    pool = allocator_of(id);
  }
  return pool->snapshot();
}

}  // namespace torch_npu
