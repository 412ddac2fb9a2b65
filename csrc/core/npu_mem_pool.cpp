#include "csrc/core/npu_mem_pool.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

struct Pool {
  c10::DeviceIndex device = 0;
  vnpu::CachingAllocator* allocator = nullptr;  // never destroyed (see the header)
  int users = 0;
};

std::mutex g_mutex;
std::map<MempoolId, Pool> g_pools;                                // guarded by g_mutex
std::unordered_map<const vnpu::Stream*, MempoolId> g_capturing;  // guarded by g_mutex
uint64_t g_next_graph_id = 1, g_next_handle_id = 1;              // guarded by g_mutex
// Capture routes plus threads inside use_mem_pool: zero keeps the
// allocation path to one load.
std::atomic<int> g_routes{0};

// use_mem_pool's stack of (device, pool) for this thread.
thread_local std::vector<std::pair<c10::DeviceIndex, MempoolId>> t_pools;

Pool& find(MempoolId id) {
  auto it = g_pools.find(id);
  NPU_CHECK_WITH(ValueError, ErrCode::kValue, it != g_pools.end(), "unknown NPU memory pool (", id.first, ", ",
                 id.second, ")");
  return it->second;
}

}  // namespace

MempoolId create_pool(c10::DeviceIndex device, bool for_graph) {
  vnpu::CachingAllocator& main = device_caching_allocator(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  const MempoolId id = for_graph ? MempoolId{g_next_graph_id++, 0} : MempoolId{0, g_next_handle_id++};
  Pool& pool = g_pools[id];
  pool.device = device;
  pool.allocator = new vnpu::CachingAllocator(main.memory(), main.config());
  pool.users = 1;
  return id;
}

void retain_pool(MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  find(id).users += 1;
}

void release_pool(MempoolId id) {
  vnpu::CachingAllocator* idle = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_pools.find(id);
    if (it == g_pools.end() || it->second.users == 0) return;
    if (--it->second.users == 0) idle = it->second.allocator;
  }
  // Waits for queued work that still reads its cached blocks.
  if (idle != nullptr) with_torch_errors([&] { idle->empty_cache(); });
}

int pool_use_count(MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pools.find(id);
  return it == g_pools.end() ? 0 : it->second.users;
}

c10::DeviceIndex pool_device(MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return find(id).device;
}

void begin_allocate_to_pool(c10::DeviceIndex device, MempoolId id) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const c10::DeviceIndex owner = find(id).device;
    NPU_CHECK_WITH(ValueError, ErrCode::kValue, owner == device, "the memory pool belongs to npu:", owner,
                   ", not to npu:", device);
  }
  t_pools.emplace_back(device, id);
  g_routes.fetch_add(1, std::memory_order_relaxed);
}

void end_allocate_to_pool(c10::DeviceIndex device, MempoolId id) {
  auto it = std::find(t_pools.rbegin(), t_pools.rend(), std::make_pair(device, id));
  if (it == t_pools.rend()) return;
  t_pools.erase(std::next(it).base());
  g_routes.fetch_sub(1, std::memory_order_relaxed);
}

void begin_capture_to_pool(vnpu::Stream& stream, MempoolId id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  find(id);
  if (g_capturing.emplace(&stream, id).second) g_routes.fetch_add(1, std::memory_order_relaxed);
}

void end_capture_to_pool(vnpu::Stream& stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_capturing.erase(&stream) > 0) g_routes.fetch_sub(1, std::memory_order_relaxed);
}

namespace {
std::array<std::atomic<vnpu::CachingAllocator*>, kMaxDevices> g_workspaces{};
}  // namespace

vnpu::CachingAllocator& workspace_allocator(c10::DeviceIndex device) {
  auto& workspaces = g_workspaces;
  vnpu::CachingAllocator* workspace = workspaces[device].load(std::memory_order_acquire);
  if (workspace != nullptr) return *workspace;
  static std::mutex creation;
  std::lock_guard<std::mutex> lock(creation);
  workspace = workspaces[device].load(std::memory_order_relaxed);
  if (workspace == nullptr) {
    const MempoolId id = create_pool(device, /*for_graph=*/false);  // kept (users = 1) for good
    std::lock_guard<std::mutex> pools(g_mutex);
    workspace = g_pools.at(id).allocator;
    workspaces[device].store(workspace, std::memory_order_release);
  }
  return *workspace;
}

vnpu::CachingAllocator* routed_pool(c10::DeviceIndex device, vnpu::Stream& stream) {
  if (g_routes.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto capture = g_capturing.find(&stream);
  if (capture != g_capturing.end()) return find(capture->second).allocator;
  for (auto it = t_pools.rbegin(); it != t_pools.rend(); ++it) {
    if (it->first == device) return find(it->second).allocator;
  }
  return nullptr;
}

namespace {
std::vector<vnpu::CachingAllocator*> pools_of(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<vnpu::CachingAllocator*> out;
  for (const auto& [id, pool] : g_pools) {
    if (pool.device == device) out.push_back(pool.allocator);
  }
  return out;
}
}  // namespace

namespace {
void add(vnpu::Stat& into, const vnpu::Stat& s) {
  into.current += s.current;
  into.peak += s.peak;
  into.allocated += s.allocated;
  into.freed += s.freed;
}
void add(vnpu::StatArray& into, const vnpu::StatArray& s) {
  for (size_t i = 0; i < into.size(); ++i) add(into[i], s[i]);
}
}  // namespace

void add_pool_stats(c10::DeviceIndex device, vnpu::AllocatorStats& stats) {
  for (const vnpu::CachingAllocator* pool : pools_of(device)) {
    const vnpu::AllocatorStats s = pool->stats();
    for (auto member : {&vnpu::AllocatorStats::allocation, &vnpu::AllocatorStats::segment,
                        &vnpu::AllocatorStats::active, &vnpu::AllocatorStats::inactive_split,
                        &vnpu::AllocatorStats::allocated_bytes, &vnpu::AllocatorStats::reserved_bytes,
                        &vnpu::AllocatorStats::active_bytes, &vnpu::AllocatorStats::inactive_split_bytes,
                        &vnpu::AllocatorStats::requested_bytes}) {
      add(stats.*member, s.*member);
    }
    stats.num_alloc_retries += s.num_alloc_retries;
    stats.num_ooms += s.num_ooms;
    stats.num_sync_all_streams += s.num_sync_all_streams;
    stats.num_device_alloc += s.num_device_alloc;
    stats.num_device_free += s.num_device_free;
    add(stats.oversize_allocations, s.oversize_allocations);
    add(stats.oversize_segments, s.oversize_segments);
  }
}

std::vector<vnpu::SegmentInfo> pool_segments(c10::DeviceIndex device) {
  std::vector<vnpu::SegmentInfo> out;
  for (const auto* pool : pools_of(device)) {
    auto segments = pool->snapshot();
    out.insert(out.end(), segments.begin(), segments.end());
  }
  return out;
}

std::vector<vnpu::SegmentInfo> pool_segments(MempoolId id) {
  const vnpu::CachingAllocator* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    pool = find(id).allocator;
  }
  return pool->snapshot();
}

void reset_pool_peaks(c10::DeviceIndex device) {
  for (auto* pool : pools_of(device)) pool->reset_peak_stats();
}

void reset_pool_accumulated(c10::DeviceIndex device) {
  for (auto* pool : pools_of(device)) pool->reset_accumulated_stats();
}

void empty_released_pools() {
  for (auto& workspace : g_workspaces) {
    if (auto* w = workspace.load(std::memory_order_acquire)) with_torch_errors([&] { w->empty_cache(); });
  }
  std::vector<vnpu::CachingAllocator*> idle;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto& [id, pool] : g_pools) {
      if (pool.users == 0) idle.push_back(pool.allocator);
    }
  }
  for (auto* pool : idle) with_torch_errors([&] { pool->empty_cache(); });
}

}  // namespace torch_npu
