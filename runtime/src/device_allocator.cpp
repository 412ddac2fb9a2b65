#include "vnpu/device_allocator.h"

#include "vnpu/device_memory.h"

#include <limits>
#include <string>

#include "vnpu/error.h"

namespace vnpu {
namespace {

void add(Stat& into, const Stat& s) {
  into.current += s.current;
  into.peak += s.peak;
  into.allocated += s.allocated;
  into.freed += s.freed;
}

void add(StatArray& into, const StatArray& s) {
  for (std::size_t i = 0; i < into.size(); ++i) add(into[i], s[i]);
}

// Sums everything but max_split_size, which is the ordinary allocator's.
void add(AllocatorStats& into, const AllocatorStats& s) {
  for (auto member : {&AllocatorStats::allocation, &AllocatorStats::segment, &AllocatorStats::active,
                      &AllocatorStats::inactive_split, &AllocatorStats::allocated_bytes,
                      &AllocatorStats::reserved_bytes, &AllocatorStats::active_bytes,
                      &AllocatorStats::inactive_split_bytes, &AllocatorStats::requested_bytes}) {
    add(into.*member, s.*member);
  }
  into.num_alloc_retries += s.num_alloc_retries;
  into.num_ooms += s.num_ooms;
  into.num_sync_all_streams += s.num_sync_all_streams;
  into.num_oom_rejections += s.num_oom_rejections;
  into.num_device_alloc += s.num_device_alloc;
  into.num_device_free += s.num_device_free;
  add(into.oversize_allocations, s.oversize_allocations);
  add(into.oversize_segments, s.oversize_segments);
}

std::string pool_name(PoolId id) {
  return "(" + std::to_string(id.first) + ", " + std::to_string(id.second) + ")";
}

}  // namespace

DeviceAllocator::DeviceAllocator(DeviceMemory& memory, const AllocSettings& settings, bool caching)
    : memory_(memory), settings_(settings), caching_(caching) {}

CachingAllocator& DeviceAllocator::ordinary() {
  if (CachingAllocator* made = ordinary_if_created()) return *made;
  std::lock_guard<std::mutex> lock(mutex_);
  if (CachingAllocator* made = ordinary_.load(std::memory_order_relaxed)) return *made;
  const AllocConfig config = settings_.get();  // throws while the settings are invalid
  owned_.push_back(std::make_unique<CachingAllocator>(memory_, config, caching_, kRequestPaddingBytes));
  CachingAllocator* made = owned_.back().get();
  made->set_release_peers([this](CachingAllocator& asking) { release_peers_of(asking); });
  made->set_shared_reserved(&reserved_);
  made->set_oom_fallback([this](std::size_t bytes, Stream& stream) { return allocate_from_oom_pools(bytes, stream); });
  if (config.per_process_memory_fraction >= 0.0) made->set_memory_fraction(config.per_process_memory_fraction);
  ordinary_.store(made, std::memory_order_release);
  return *made;
}

CachingAllocator& DeviceAllocator::workspace() {
  if (CachingAllocator* made = workspace_.load(std::memory_order_acquire)) return *made;
  std::lock_guard<std::mutex> lock(mutex_);
  if (CachingAllocator* made = workspace_.load(std::memory_order_relaxed)) return *made;
  owned_.push_back(std::make_unique<CachingAllocator>(memory_, settings_.get()));
  owned_.back()->set_shared_reserved(&reserved_);  // counted, not limited: kernels' scratch
  workspace_.store(owned_.back().get(), std::memory_order_release);
  return *owned_.back();
}

void DeviceAllocator::create_pool(PoolId id, std::shared_ptr<MemoryArena> segments, bool no_split,
                                  bool use_on_oom) {
  const AllocConfig config = settings_.get();
  std::lock_guard<std::mutex> lock(mutex_);
  if (pools_.count(id) != 0) {
    throw Error(ErrorCode::kInvalidValue, "the NPU memory pool " + pool_name(id) + " exists already");
  }
  Pool& pool = pools_[id];
  DeviceMemory* memory = &memory_;
  if (segments) {
    pool.memory = std::make_unique<DeviceMemory>(memory_.device_index(), memory_.capacity());
    pool.memory->set_arena(std::move(segments));
    memory = pool.memory.get();
  }
  pool.allocator = std::make_unique<CachingAllocator>(*memory, config, /*caching=*/true, kRequestPaddingBytes);
  pool.allocator->set_release_peers([this](CachingAllocator& asking) { release_peers_of(asking); });
  pool.allocator->set_pool_id(id);
  pool.allocator->set_no_split(no_split);
  if (!segments) pool.allocator->set_shared_reserved(&reserved_);
  const double fraction = fraction_ >= 0.0 ? fraction_ : config.per_process_memory_fraction;
  if (fraction >= 0.0) pool.allocator->set_memory_fraction(fraction);
  pool.users = 1;
  pool.use_on_oom = use_on_oom;
}

Block* DeviceAllocator::allocate_from_oom_pools(std::size_t bytes, Stream& stream) {
  std::vector<CachingAllocator*> candidates;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, pool] : pools_) {
      // A deleted MemPool (no users) lends nothing, as CUDA's pool
      // destructor takes it off use_on_oom_pools.
      if (pool.use_on_oom && pool.users > 0) candidates.push_back(pool.allocator.get());
    }
  }
  for (CachingAllocator* allocator : candidates) {
    if (Block* block = allocator->allocate_cached(bytes, stream)) return block;
  }
  return nullptr;
}

void DeviceAllocator::retain_pool(PoolId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(id);
  if (it == pools_.end()) throw Error(ErrorCode::kInvalidValue, "unknown NPU memory pool " + pool_name(id));
  it->second.users += 1;
}

void DeviceAllocator::release_pool(PoolId id) {
  CachingAllocator* idle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pools_.find(id);
    if (it == pools_.end() || it->second.users == 0) return;
    if (--it->second.users == 0) idle = it->second.allocator.get();
  }
  if (idle != nullptr) idle->empty_cache();  // waits without holding mutex_
}

int DeviceAllocator::pool_use_count(PoolId id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(id);
  return it == pools_.end() ? 0 : it->second.users;
}

CachingAllocator* DeviceAllocator::pool(PoolId id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(id);
  return it == pools_.end() ? nullptr : it->second.allocator.get();
}

std::vector<CachingAllocator*> DeviceAllocator::all_allocators() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CachingAllocator*> all;
  for (const auto& owned : owned_) all.push_back(owned.get());
  for (const auto& [id, pool] : pools_) all.push_back(pool.allocator.get());
  return all;
}

AllocatorStats DeviceAllocator::stats() const {
  AllocatorStats total;
  const CachingAllocator* ordinary = ordinary_if_created();
  if (ordinary != nullptr) {
    total = ordinary->stats();
  } else {
    // Never allocated: zeros, and the split limit it will have.
    total.max_split_size = -1;
    const std::optional<AllocConfig> config = settings_.peek();
    if (config && config->max_split_size_bytes != std::numeric_limits<std::size_t>::max()) {
      total.max_split_size = static_cast<std::int64_t>(config->max_split_size_bytes);
    }
  }
  for (const CachingAllocator* allocator : all_allocators()) {
    if (allocator != ordinary) add(total, allocator->stats());
  }
  return total;
}

void DeviceAllocator::reset_peak_stats() {
  for (CachingAllocator* allocator : all_allocators()) allocator->reset_peak_stats();
}

void DeviceAllocator::reset_accumulated_stats() {
  for (CachingAllocator* allocator : all_allocators()) allocator->reset_accumulated_stats();
}

std::vector<SegmentInfo> DeviceAllocator::snapshot() const {
  std::vector<SegmentInfo> segments;
  const CachingAllocator* ordinary = ordinary_if_created();
  if (ordinary != nullptr) segments = ordinary->snapshot();  // first, as before the pools
  for (const CachingAllocator* allocator : all_allocators()) {
    if (allocator == ordinary) continue;
    std::vector<SegmentInfo> more = allocator->snapshot();
    segments.insert(segments.end(), more.begin(), more.end());
  }
  return segments;
}

bool DeviceAllocator::allocation_containing(const void* address, void** base, std::size_t* bytes) const {
  for (const CachingAllocator* allocator : all_allocators()) {
    if (allocator->allocation_containing(address, base, bytes)) return true;
  }
  return false;
}

std::vector<CachingAllocator*> DeviceAllocator::idle_allocators() const {
  std::vector<CachingAllocator*> idle;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& owned : owned_) idle.push_back(owned.get());
  for (const auto& [id, pool] : pools_) {
    if (pool.users == 0) idle.push_back(pool.allocator.get());
  }
  return idle;
}

void DeviceAllocator::empty_cache() {
  for (CachingAllocator* allocator : idle_allocators()) allocator->empty_cache();  // may wait: no lock held
}

void DeviceAllocator::release_peers_of(CachingAllocator& asking) {
  for (CachingAllocator* allocator : idle_allocators()) {
    if (allocator != &asking) allocator->empty_cache();
  }
}

void DeviceAllocator::retire_stream(Stream& dead, Stream& heir) {
  for (CachingAllocator* allocator : all_allocators()) allocator->retire_stream(dead, heir);
}

void DeviceAllocator::set_memory_fraction(double fraction) {
  ordinary();  // created, so that the fraction is kept
  apply_memory_fraction(fraction);
}

void DeviceAllocator::apply_memory_fraction(double fraction) {
  std::vector<CachingAllocator*> limited;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fraction_ = fraction;
    if (CachingAllocator* ordinary = ordinary_.load(std::memory_order_relaxed)) limited.push_back(ordinary);
    for (const auto& [id, pool] : pools_) limited.push_back(pool.allocator.get());
  }
  for (CachingAllocator* allocator : limited) allocator->set_memory_fraction(fraction);
}

double DeviceAllocator::memory_fraction() const {
  if (const CachingAllocator* ordinary = ordinary_if_created()) return ordinary->memory_fraction();
  const std::optional<AllocConfig> config = settings_.peek();
  return config && config->per_process_memory_fraction >= 0.0 ? config->per_process_memory_fraction : 1.0;
}

void DeviceAllocator::set_config(const AllocConfig& config) {
  for (CachingAllocator* allocator : all_allocators()) allocator->set_config(config);
  if (ordinary_if_created() != nullptr && config.per_process_memory_fraction >= 0.0) {
    apply_memory_fraction(config.per_process_memory_fraction);
  }
}

}  // namespace vnpu
