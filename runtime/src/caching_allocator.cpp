#include "vnpu/caching_allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <limits>
#include <unordered_map>
#include <vector>

#include "vnpu/device_memory.h"
#include "vnpu/error.h"
#include "vnpu/stream.h"

namespace vnpu {

// Every field is guarded by the owner's mutex.
struct Block {
  CachingAllocator* owner = nullptr;
  Stream* stream = nullptr;  // the stream its segment belongs to
  bool small = false;        // small or large pool
  char* ptr = nullptr;
  std::size_t size = 0;            // bytes, a multiple of kMinBlockSize
  std::size_t requested_size = 0;  // what the caller asked for, while allocated
  bool allocated = false;
  Block* prev = nullptr;  // neighbours in the segment, in address order
  Block* next = nullptr;
  std::vector<Stream*> stream_uses;                  // record_stream users
  std::vector<CachingAllocator::StreamMark> pending;  // freed: users still to pass these
  std::uint64_t free_seq = 0;   // last task queued on `stream` when it was freed
  std::uint64_t last_used = 0;  // the allocator's clock when it was freed (GC age)

  bool held = false;             // freed and held back from its pool (Note [Held blocks])

  bool is_split() const { return prev != nullptr || next != nullptr; }
  // Free and in its pool (not allocated, not waiting for record_stream users,
  // not held back).
  bool in_pool() const { return !allocated && pending.empty() && !held; }
};

namespace {

// Note [Blocks by address]
// Callers often know a block only by its address: DataPtrs carry their data
// address as context (copy-on-write sharing requires it, and raw deleters
// see nothing else), and so do caching_allocator_alloc's pointers. Every
// handed-out block is registered here from allocation to free, whichever
// allocator made it. The map is split into shards, each with its own mutex,
// so frees on stream workers and allocations on the caller rarely meet
// (torch's CUDA allocator shards its map of allocated blocks the same way).
class LiveBlocks {
 public:
  void add(Block* block) {
    Shard& s = shard(block->ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.spare.empty()) {
      s.blocks[block->ptr] = block;
      return;
    }
    Map::node_type node = std::move(s.spare.back());
    s.spare.pop_back();
    node.key() = block->ptr;
    node.mapped() = block;
    auto result = s.blocks.insert(std::move(node));
    if (!result.inserted) result.position->second = block;
  }
  void remove(const Block* block) { take(block->ptr); }
  Block* find(const void* address) {
    Shard& s = shard(address);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.blocks.find(address);
    return it != s.blocks.end() ? it->second : nullptr;
  }
  // find() and remove() in one step.
  Block* take(const void* address) {
    Shard& s = shard(address);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.blocks.find(address);
    if (it == s.blocks.end()) return nullptr;
    Block* block = it->second;
    Map::node_type node = s.blocks.extract(it);
    if (s.spare.size() < kMaxSpareNodes) s.spare.push_back(std::move(node));
    return block;
  }

 private:
  using Map = std::unordered_map<const void*, Block*>;
  static constexpr std::size_t kShards = 32;
  // Every tensor's allocation and free passes here: the map's nodes are kept
  // for reuse, as the allocator keeps its own (Note [Recycled nodes]).
  static constexpr std::size_t kMaxSpareNodes = 64;
  struct alignas(64) Shard {
    std::mutex mutex;
    Map blocks;
    std::vector<Map::node_type> spare;
  };
  // Blocks start on 512-byte boundaries: the bits above those pick the shard.
  Shard& shard(const void* address) {
    return shards_[(reinterpret_cast<std::uintptr_t>(address) >> 9) % kShards];
  }
  std::array<Shard, kShards> shards_;
};

// Leaked on purpose: tensors freed during interpreter shutdown still look
// their blocks up after static destructors would have run.
LiveBlocks& live_blocks() {
  static LiveBlocks* blocks = new LiveBlocks;
  return *blocks;
}

std::atomic<BlockTraceHook> g_block_trace_hook{nullptr};

void trace_block(BlockTraceEvent event, const Block* block) {
  BlockTraceHook hook = g_block_trace_hook.load(std::memory_order_relaxed);
  if (hook == nullptr) return;
  // A segment event tells the segment's bytes; a block event what its owner
  // asked for (torch's trace entries do the same).
  const bool segment = event == BlockTraceEvent::kSegmentReserved || event == BlockTraceEvent::kSegmentReleased;
  hook(event, block->ptr, segment ? block->size : block->requested_size, *block->stream, block->owner->pool_id());
}

constexpr std::size_t round_up(std::size_t bytes, std::size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

// Requests beyond this cannot be rounded without overflow; no device has
// that much memory anyway.
constexpr std::size_t kMaxRequestBytes = std::size_t{1} << 60;

void update(StatArray& stat, bool small, std::int64_t amount) {
  Stat& pool = stat[small ? kSmallPoolStat : kLargePoolStat];
  if (amount >= 0) {
    stat[kAggregateStat].increase(amount);
    pool.increase(amount);
  } else {
    stat[kAggregateStat].decrease(-amount);
    pool.decrease(-amount);
  }
}

bool stream_passed(const Stream* stream, std::uint64_t seq) { return stream->last_completed() >= seq; }

}  // namespace

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<const Stream*>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<const char*>()(a->ptr, b->ptr);
}

bool CachingAllocator::AddressLess::operator()(const Block* a, const Block* b) const {
  return std::less<const char*>()(a->ptr, b->ptr);
}

bool CachingAllocator::allocation_containing(const void* address, void** base, std::size_t* bytes) const {
  const char* p = static_cast<const char*>(address);
  std::lock_guard<std::mutex> lock(mutex_);
  // The segment that may hold it: the last one starting at or before it.
  Block key;
  key.ptr = const_cast<char*>(p);
  auto it = segments_.upper_bound(&key);
  if (it == segments_.begin()) return false;
  for (const Block* block = *std::prev(it); block != nullptr; block = block->next) {
    if (p < block->ptr) return false;
    if (p < block->ptr + block->size) {
      if (!block->allocated) return false;
      *base = block->ptr;
      *bytes = block->requested_size;
      return true;
    }
  }
  return false;
}

CachingAllocator::CachingAllocator(DeviceMemory& memory, const AllocConfig& config, bool caching,
                                   std::size_t request_padding)
    : memory_(memory), config_(config), caching_(caching), request_padding_(request_padding) {}

CachingAllocator::~CachingAllocator() {
  for (Block* block : spare_blocks_) delete block;
  for (Block* head : segments_) {
    memory_.release(head->ptr);
    for (Block* block = head; block != nullptr;) {
      Block* next = block->next;
      if (block->allocated) live_blocks().remove(block);
      delete block;
      block = next;
    }
  }
}

void* CachingAllocator::address(const Block* block) { return block->ptr; }

std::size_t CachingAllocator::size(const Block* block) { return block->size; }

CachingAllocator& CachingAllocator::owner(const Block* block) { return *block->owner; }

Block* CachingAllocator::live_block(const void* address) {
  return address != nullptr ? live_blocks().find(address) : nullptr;
}

AllocConfig CachingAllocator::config() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_;
}

void CachingAllocator::set_config(const AllocConfig& config) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool new_split_limit = config.max_split_size_bytes != config_.max_split_size_bytes;
  config_ = config;
  if (new_split_limit) recount_oversize();
}

void CachingAllocator::recount_oversize() {
  // The oversize counters compare sizes with max_split_size at each
  // allocation and free: under a new limit they start again from what is
  // held now, so a later free never takes them below zero.
  std::int64_t segments = 0;
  std::int64_t allocations = 0;
  for (const Block* head : segments_) {
    std::size_t segment_bytes = 0;
    for (const Block* b = head; b != nullptr; b = b->next) {
      segment_bytes += b->size;
      if (b->allocated && b->size >= config_.max_split_size_bytes) ++allocations;
    }
    if (segment_bytes >= config_.max_split_size_bytes) ++segments;
  }
  stats_.oversize_segments.current = segments;
  stats_.oversize_allocations.current = allocations;
  stats_.oversize_segments.peak = std::max(stats_.oversize_segments.peak, segments);
  stats_.oversize_allocations.peak = std::max(stats_.oversize_allocations.peak, allocations);
}

std::size_t CachingAllocator::round_size(std::size_t bytes) const {
  bytes += request_padding_;
  if (bytes < kMinBlockSize) return kMinBlockSize;
  const std::size_t divisions = config_.roundup_divisions(bytes);
  if (divisions > 1 && bytes > kMinBlockSize * divisions) {
    // Steps of the power-of-two interval holding `bytes`; a power of two of
    // at least kMinBlockSize since bytes > kMinBlockSize * divisions.
    const std::size_t floor_pow2 = std::size_t{1} << (63 - __builtin_clzll(bytes));
    return round_up(bytes, floor_pow2 / divisions);
  }
  return round_up(bytes, kMinBlockSize);
}

std::size_t CachingAllocator::segment_size(std::size_t size) const {
  if (!caching_ || no_split_) return size;
  if (size <= kSmallSize) return kSmallBuffer;
  // large_segment_size_mb, when set, sizes the 1-10 MiB requests before
  // anything else (torch_npu: it takes priority over segment_size_mb).
  if (size < kMinLargeAlloc && config_.large_segment_size_bytes) return config_.large_segment_size_bytes;
  if (config_.expandable_segments) {
    // Note [Expandable segments' granules]: an expandable segment grows by
    // mapping granules of segment_size_mb (20 MiB by default); the virtual
    // device's segments cannot grow, but each takes whole granules, so
    // memory_reserved() reads as on the chip.
    const std::size_t granule = config_.segment_size_mb ? config_.segment_size_mb << 20 : kLargeBuffer;
    return round_up(size, granule);
  }
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

std::uint64_t CachingAllocator::allowed_bytes() const {
  return static_cast<std::uint64_t>(fraction_ * static_cast<double>(memory_.capacity()));
}

Block* CachingAllocator::allocate(std::size_t bytes, Stream& stream) {
  return allocate_block(bytes, stream, /*may_wait=*/true);
}

Block* CachingAllocator::allocate_for_running_task(std::size_t bytes, Stream& stream) {
  return allocate_block(bytes, stream, /*may_wait=*/false);
}

Block* CachingAllocator::allocate_block(std::size_t bytes, Stream& stream, bool may_wait) {
  if (bytes == 0) return nullptr;
  constexpr std::size_t kOneExbibyte = std::size_t{1} << 60;
  if (bytes >= kOneExbibyte) {
    // torch_npu's own refusal, before any pool is looked at (its stats do not count it).
    throw Error(ErrorCode::kOutOfMemory, "NPU out of memory. Tried to allocate more than 1EB memory.");
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const std::size_t size = round_size(std::min(bytes, kMaxRequestBytes));  // reads config_
  const std::size_t segment_bytes = segment_size(size);
  Pool& pool = pool_for(size);
  if (config_.throw_on_npumalloc_oom &&
      static_cast<std::uint64_t>(stats_.allocated_bytes[kAggregateStat].current) + size > allowed_bytes()) {
    // Refused before anything is released or retried: the request alone
    // would pass the process's share.
    stats_.num_ooms += 1;
    stats_.num_oom_rejections += 1;
    throw Error(ErrorCode::kOutOfMemory, out_of_memory_message(size));
  }
  if (!deferred_.empty() || !unreleased_.empty()) process_deferred();
  ++clock_;
  if (held_count_ > 0) {
    if (Block* held = take_held(size, stream)) return hand_out(held, bytes);
    return_held_blocks();
  }

  Block* block = caching_ ? find_free_block(pool, stream, size) : nullptr;
  if (block == nullptr) {
    release_outgrown_segments(pool, stream, size);
    if (config_.garbage_collection_threshold > 0.0) garbage_collect();
    block = reserve_segment(pool, stream, size, segment_bytes);
  }
  if (block == nullptr) {
    stats_.num_alloc_retries += 1;
    if (may_wait) {
      block = retry_after_releasing_cache(lock, pool, stream, size, segment_bytes);
    } else {
      // A running task must not wait for its own stream: only what is idle.
      release_idle_segments();
      block = reserve_segment(pool, stream, size, segment_bytes);
    }
  }
  if (block == nullptr && may_wait && oom_fallback_) {
    // Last, a MemPool(use_on_oom=True)'s cache (its own lock): its block
    // stays its pool's, and returns there when freed.
    lock.unlock();
    if (Block* borrowed = oom_fallback_(bytes, stream)) return borrowed;
    lock.lock();
  }
  if (block == nullptr) {
    stats_.num_ooms += 1;
    throw Error(ErrorCode::kOutOfMemory, out_of_memory_message(size));
  }
  return take_block(block, size, bytes);
}

Block* CachingAllocator::retry_after_releasing_cache(std::unique_lock<std::mutex>& lock, Pool& pool,
                                                     Stream& stream, std::size_t size,
                                                     std::size_t segment_bytes) {
  // What the cache holds idle goes back first.
  release_idle_segments();
  if (Block* block = reserve_segment(pool, stream, size, segment_bytes)) return block;
  // Then the segments queued work still reads, once it has run.
  if (wait_until_cache_is_idle(lock)) {
    if (caching_) {
      if (Block* block = find_free_block(pool, stream, size)) return block;
    }
    release_idle_segments();
    if (Block* block = reserve_segment(pool, stream, size, segment_bytes)) return block;
  }
  // Last, what the device's other allocators (the ordinary cache, idle
  // pools) hold idle.
  if (!release_peers_) return nullptr;
  lock.unlock();
  release_peers_(*this);
  lock.lock();
  return_held_blocks();
  return reserve_segment(pool, stream, size, segment_bytes);
}

bool CachingAllocator::wait_until_cache_is_idle(std::unique_lock<std::mutex>& lock) {
  // The furthest position per stream is enough: streams complete in order.
  std::unordered_map<Stream*, std::uint64_t> furthest;
  auto note = [&](Stream* stream, std::uint64_t seq) {
    if (stream_passed(stream, seq)) return;
    std::uint64_t& at = furthest[stream];
    at = std::max(at, seq);
  };
  for (const Pool* pool : {&small_pool_, &large_pool_}) {
    for (const Block* block : pool->blocks) note(block->stream, block->free_seq);
  }
  for (const Block* block : deferred_) {
    note(block->stream, block->free_seq);
    for (const StreamMark& mark : block->pending) note(mark.stream, mark.seq);
  }
  for (const Block* block : unreleased_) note(block->stream, block->free_seq);
  if (furthest.empty()) return false;

  stats_.num_sync_all_streams += 1;
  lock.unlock();  // the streams' workers may need the mutex to free tensors
  for (const auto& [stream, seq] : furthest) stream->wait_completed(seq);
  lock.lock();
  return_held_blocks();  // freed by other threads meanwhile
  process_deferred();
  return true;
}

Block* CachingAllocator::find_free_block(Pool& pool, Stream& stream, std::size_t size) {
  Block key;
  key.stream = &stream;
  key.size = size;
  const auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != &stream) return nullptr;
  Block* block = *it;
  if (!fits(block, size)) return nullptr;
  pool_erase(pool, it);
  return block;
}

bool CachingAllocator::fits(const Block* block, std::size_t size) const {
  if (no_split_) return block->size - size <= kRoundLarge;  // handed out whole
  // Blocks of max_split_size or more are never split: handing one to a much
  // smaller request would waste the difference for as long as it lives.
  const std::size_t max_split = config_.max_split_size_bytes;
  if (size < max_split && block->size >= max_split) return false;
  if (size >= max_split && block->size >= size + config_.max_non_split_rounding_bytes) return false;
  return true;
}

Block* CachingAllocator::reserve_segment(Pool& pool, Stream& stream, std::size_t size,
                                         std::size_t segment_bytes) {
  auto block = std::make_unique<Block>();
  block->ptr = static_cast<char*>(try_reserve(segment_bytes));
  if (block->ptr == nullptr && segment_bytes > size) {
    // No room for a shared segment, maybe for one that holds just this block.
    segment_bytes = size;
    block->ptr = static_cast<char*>(try_reserve(segment_bytes));
  }
  if (block->ptr == nullptr) return nullptr;
  block->owner = this;
  block->stream = &stream;
  block->small = pool.is_small;
  block->size = segment_bytes;
  segments_.insert(block.get());
  trace_block(BlockTraceEvent::kSegmentReserved, block.get());
  update(stats_.segment, pool.is_small, 1);
  update(stats_.reserved_bytes, pool.is_small, static_cast<std::int64_t>(segment_bytes));
  if (segment_bytes >= config_.max_split_size_bytes) stats_.oversize_segments.increase(1);
  stats_.num_device_alloc += 1;
  return block.release();
}

void* CachingAllocator::try_reserve(std::size_t bytes) {
  const auto signed_bytes = static_cast<std::int64_t>(bytes);
  // With a device-wide count, the bytes are claimed in it first, so that two
  // allocators reserving at once cannot both pass the limit.
  const std::int64_t reserved_before = shared_reserved_ != nullptr ? shared_reserved_->fetch_add(signed_bytes)
                                                                    : stats_.reserved_bytes[kAggregateStat].current;
  auto unclaim = [&] {
    if (shared_reserved_ != nullptr) shared_reserved_->fetch_sub(signed_bytes);
  };
  if (static_cast<std::uint64_t>(reserved_before) + bytes > allowed_bytes()) {
    unclaim();
    return nullptr;
  }
  try {
    return memory_.allocate(bytes);
  } catch (const Error& e) {
    unclaim();
    if (e.code() == ErrorCode::kOutOfMemory) return nullptr;
    throw;
  }
}

Block* CachingAllocator::take_block(Block* block, std::size_t size, std::size_t requested) {
  const bool small = block->small;
  if (block->is_split()) {
    update(stats_.inactive_split, small, -1);
    update(stats_.inactive_split_bytes, small, -static_cast<std::int64_t>(block->size));
  }
  const std::size_t rest = block->size - size;
  const bool split = !no_split_ && (small ? rest >= kMinBlockSize
                                          : size < config_.max_split_size_bytes && rest > kSmallSize);
  if (split) {
    Block* remaining = new_block();
    remaining->owner = this;
    remaining->stream = block->stream;
    remaining->small = small;
    remaining->ptr = block->ptr + size;
    remaining->size = rest;
    remaining->prev = block;
    remaining->next = block->next;
    remaining->free_seq = block->free_seq;
    remaining->last_used = block->last_used;
    if (block->next != nullptr) block->next->prev = remaining;
    block->next = remaining;
    block->size = size;
    pool_insert(small ? small_pool_ : large_pool_, remaining);
    update(stats_.inactive_split, small, 1);
    update(stats_.inactive_split_bytes, small, static_cast<std::int64_t>(rest));
  }
  return hand_out(block, requested);
}

Block* CachingAllocator::hand_out(Block* block, std::size_t requested) {
  const bool small = block->small;
  block->allocated = true;
  block->requested_size = requested;
  const auto bytes = static_cast<std::int64_t>(block->size);
  update(stats_.allocation, small, 1);
  update(stats_.allocated_bytes, small, bytes);
  update(stats_.active, small, 1);
  update(stats_.active_bytes, small, bytes);
  update(stats_.requested_bytes, small, static_cast<std::int64_t>(requested));
  if (block->size >= config_.max_split_size_bytes) stats_.oversize_allocations.increase(1);
  live_blocks().add(block);
  trace_block(BlockTraceEvent::kHandedOut, block);
  return block;
}

Block* CachingAllocator::allocate_cached(std::size_t bytes, Stream& stream) {
  if (bytes == 0 || !caching_) return nullptr;
  std::unique_lock<std::mutex> lock(mutex_);
  const std::size_t size = round_size(std::min(bytes, kMaxRequestBytes));
  return_held_blocks();
  if (!deferred_.empty() || !unreleased_.empty()) process_deferred();
  Block* block = find_free_block(pool_for(size), stream, size);
  if (block == nullptr) return nullptr;
  ++clock_;
  return take_block(block, size, bytes);
}

Block* CachingAllocator::take_live_block(const void* address) {
  return address != nullptr ? live_blocks().take(address) : nullptr;
}

void CachingAllocator::free(Block* block) {
  if (block == nullptr) return;
  live_blocks().remove(block);  // before the lock: the registry never waits for an allocator
  free_taken(block);
}

void CachingAllocator::free_taken(Block* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A second free would count the block twice (the statistics go negative)
  // and hand it out to two owners.
  VNPU_ASSERT(block->allocated, "CachingAllocator::free of a block that is not allocated (double free?)");
  VNPU_ASSERT(block->owner == this, "CachingAllocator::free of a block owned by another allocator");
  trace_block(BlockTraceEvent::kFreeRequested, block);
  const bool small = block->small;
  update(stats_.allocation, small, -1);
  update(stats_.allocated_bytes, small, -static_cast<std::int64_t>(block->size));
  update(stats_.requested_bytes, small, -static_cast<std::int64_t>(block->requested_size));
  if (block->size >= config_.max_split_size_bytes) stats_.oversize_allocations.decrease(1);
  block->allocated = false;
  // Everything that used the block on its stream was queued by now.
  block->free_seq = block->stream->last_enqueued();
  if (!block->stream_uses.empty()) {
    for (Stream* user : block->stream_uses) block->pending.push_back({user, user->last_enqueued()});
    block->stream_uses.clear();
    deferred_.push_back(block);
    return;
  }
  finish_free(block, /*may_hold=*/true);
  if (!unreleased_.empty()) process_deferred();
}

void CachingAllocator::record_stream(Block* block, Stream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (&stream == block->stream) return;  // ordered by its own stream already
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), &stream) == block->stream_uses.end()) {
    block->stream_uses.push_back(&stream);
  }
}

void CachingAllocator::finish_free(Block* block, bool may_hold) {
  update(stats_.active, block->small, -1);
  update(stats_.active_bytes, block->small, -static_cast<std::int64_t>(block->size));
  block->last_used = clock_;
  trace_block(BlockTraceEvent::kReturned, block);  // before a merge can change the block
  block->requested_size = 0;
  if (may_hold && caching_ && block->small && held_count_ < kHeldBlocks) {
    block->held = true;  // Note [Held blocks]
    held_[held_count_++] = block;
  } else if (caching_) {
    return_to_pool(block);
  } else if (stream_passed(block->stream, block->free_seq)) {
    release_segment(block);
  } else {
    unreleased_.push_back(block);
  }
}

void CachingAllocator::return_to_pool(Block* block) {
  Pool& pool = block->small ? small_pool_ : large_pool_;
  if (block->prev != nullptr && block->prev->in_pool()) block = merge(block, block->prev, pool);
  if (block->next != nullptr && block->next->in_pool()) block = merge(block, block->next, pool);
  if (block->is_split()) {
    update(stats_.inactive_split, block->small, 1);
    update(stats_.inactive_split_bytes, block->small, static_cast<std::int64_t>(block->size));
  }
  pool_insert(pool, block);
}

// Note [Held blocks]
// A small op's output is carved from a 2 MiB segment, and when it dies it is
// merged back with its free neighbour, only for the next op's output, of the
// same size, to be split off again: per op a tree erase and insert each way
// and a split-off Block, most of the caching allocator's cost on the launch
// path (docs/architecture.md, "Where a small op's host time goes"). So the
// last few small blocks freed directly (not through record_stream's
// deferral) are held back from their pool, unmerged, with every statistic
// but the inactive-split pair already counted as freed. An allocation of
// exactly a held block's size on its stream takes it back as it is; any
// other request first returns every held block to its pool (merging as a
// free would have), and so do all the allocator's other operations: the
// statistics, snapshots and releases see the pools as if nothing had been
// held. Which address a request gets may differ, as CUDA's promises nothing
// about addresses either.
Block* CachingAllocator::take_held(std::size_t size, Stream& stream) {
  for (std::size_t i = held_count_; i-- > 0;) {
    Block* block = held_[i];
    if (block->size != size || block->stream != &stream) continue;
    for (std::size_t j = i + 1; j < held_count_; ++j) held_[j - 1] = held_[j];
    --held_count_;
    block->held = false;
    return block;
  }
  return nullptr;
}

void CachingAllocator::return_held_blocks() {
  while (held_count_ > 0) {
    Block* block = held_[--held_count_];
    block->held = false;
    return_to_pool(block);
  }
}

void CachingAllocator::return_held_blocks() const {
  // Logically const: returning held blocks changes nothing a caller can
  // observe except through the statistics and snapshot it is about to read.
  const_cast<CachingAllocator*>(this)->return_held_blocks();
}

Block* CachingAllocator::merge(Block* block, Block* neighbour, Pool& pool) {
  pool_erase(pool, pool.blocks.find(neighbour));
  update(stats_.inactive_split, neighbour->small, -1);
  update(stats_.inactive_split_bytes, neighbour->small, -static_cast<std::int64_t>(neighbour->size));
  // The lower block survives, so a segment's first block (the one kept in
  // segments_) never changes.
  Block* lower = block->prev == neighbour ? neighbour : block;
  Block* upper = lower == block ? neighbour : block;
  lower->size += upper->size;
  lower->next = upper->next;
  if (upper->next != nullptr) upper->next->prev = lower;
  lower->free_seq = std::max(lower->free_seq, upper->free_seq);
  lower->last_used = std::max(lower->last_used, upper->last_used);
  recycle_block(upper);
  return lower;
}

// Note [Recycled nodes]
// A small op's output is carved from a 2 MiB segment and merged back when it
// dies: each alloc/free pair erases and inserts two pool entries and creates
// and deletes the split-off Block, four mallocs and four frees on the op's
// critical path. The tree nodes and Blocks released by the hot path are kept
// (a few dozen at most) and reused by the next insert and split. Only the
// allocation of that memory changes; the pools' contents and order do not.
namespace {
constexpr std::size_t kMaxSpare = 64;
}  // namespace

void CachingAllocator::pool_insert(Pool& pool, Block* block) {
  if (spare_nodes_.empty()) {
    pool.blocks.insert(block);
    return;
  }
  BlockSet::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.value() = block;
  pool.blocks.insert(std::move(node));
}

void CachingAllocator::pool_erase(Pool& pool, BlockSet::iterator it) {
  if (spare_nodes_.size() < kMaxSpare) {
    spare_nodes_.push_back(pool.blocks.extract(it));
  } else {
    pool.blocks.erase(it);
  }
}

Block* CachingAllocator::new_block() {
  if (spare_blocks_.empty()) return new Block();
  Block* block = spare_blocks_.back();
  spare_blocks_.pop_back();
  return block;
}

void CachingAllocator::recycle_block(Block* block) {
  if (spare_blocks_.size() >= kMaxSpare) {
    delete block;
    return;
  }
  *block = Block();  // a pooled block has no stream uses or pending marks left to free
  spare_blocks_.push_back(block);
}

void CachingAllocator::release_segment(Block* head) {
  trace_block(BlockTraceEvent::kSegmentReleased, head);
  segments_.erase(head);
  memory_.release(head->ptr);
  if (shared_reserved_ != nullptr) shared_reserved_->fetch_sub(static_cast<std::int64_t>(head->size));
  update(stats_.segment, head->small, -1);
  update(stats_.reserved_bytes, head->small, -static_cast<std::int64_t>(head->size));
  if (head->size >= config_.max_split_size_bytes) stats_.oversize_segments.decrease(1);
  stats_.num_device_free += 1;
  delete head;
}

bool CachingAllocator::is_idle_segment(const Block* block) const {
  return block->in_pool() && !block->is_split() && stream_passed(block->stream, block->free_seq);
}

void CachingAllocator::release_idle_segments() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
      Block* block = *it;
      if (!is_idle_segment(block)) {
        ++it;
        continue;
      }
      it = pool->blocks.erase(it);
      release_segment(block);
    }
  }
}

void CachingAllocator::release_outgrown_segments(Pool& pool, Stream& stream, std::size_t size) {
  Block key;
  key.stream = &stream;
  for (auto it = pool.blocks.lower_bound(&key);
       it != pool.blocks.end() && (*it)->stream == &stream && (*it)->size < size;) {
    Block* block = *it;
    if (!is_idle_segment(block)) {
      ++it;
      continue;
    }
    it = pool.blocks.erase(it);
    release_segment(block);
  }
}

void CachingAllocator::garbage_collect() {
  const double limit = config_.garbage_collection_threshold * static_cast<double>(allowed_bytes());
  auto reserved = [this] { return static_cast<double>(stats_.reserved_bytes[kAggregateStat].current); };
  if (reserved() <= limit) return;
  std::vector<Block*> idle;
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (Block* block : pool->blocks) {
      if (is_idle_segment(block)) idle.push_back(block);
    }
  }
  std::sort(idle.begin(), idle.end(), [](const Block* a, const Block* b) { return a->last_used < b->last_used; });
  for (Block* block : idle) {
    if (reserved() <= limit) break;
    (block->small ? small_pool_ : large_pool_).blocks.erase(block);
    release_segment(block);
  }
}

void CachingAllocator::process_deferred() {
  for (std::size_t i = 0; i < deferred_.size();) {
    Block* block = deferred_[i];
    const bool done = std::all_of(block->pending.begin(), block->pending.end(),
                                  [](const StreamMark& m) { return stream_passed(m.stream, m.seq); });
    if (!done) {
      ++i;
      continue;
    }
    block->pending.clear();
    deferred_[i] = deferred_.back();
    deferred_.pop_back();
    finish_free(block);
  }
  for (std::size_t i = 0; i < unreleased_.size();) {
    Block* block = unreleased_[i];
    if (!stream_passed(block->stream, block->free_seq)) {
      ++i;
      continue;
    }
    unreleased_[i] = unreleased_.back();
    unreleased_.pop_back();
    release_segment(block);
  }
}

void CachingAllocator::empty_cache() {
  std::unique_lock<std::mutex> lock(mutex_);
  return_held_blocks();
  process_deferred();
  wait_until_cache_is_idle(lock);
  release_idle_segments();
}

void CachingAllocator::retire_stream(Stream& dead, Stream& heir) {
  std::lock_guard<std::mutex> lock(mutex_);
  return_held_blocks();
  for (Block* head : segments_) {
    for (Block* block = head; block != nullptr; block = block->next) {
      if (block->stream == &dead) {
        // The pools are ordered by stream first: take a free block out
        // before its key changes. `dead` has run everything, so nothing
        // queued still reads it (free_seq 0 has passed on any stream).
        Pool& pool = block->small ? small_pool_ : large_pool_;
        const bool pooled = pool.blocks.erase(block) > 0;
        block->stream = &heir;
        block->free_seq = 0;
        if (pooled) pool.blocks.insert(block);
      }
      auto& uses = block->stream_uses;
      uses.erase(std::remove(uses.begin(), uses.end(), &dead), uses.end());
      for (StreamMark& mark : block->pending) {
        if (mark.stream == &dead) mark = {&heir, 0};
      }
    }
  }
  process_deferred();
}

void CachingAllocator::set_memory_fraction(double fraction) {
  std::lock_guard<std::mutex> lock(mutex_);
  fraction_ = fraction;
  fraction_set_ = true;
}

double CachingAllocator::memory_fraction() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fraction_;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return_held_blocks();
  AllocatorStats stats = stats_;
  const std::size_t max_split = config_.max_split_size_bytes;
  stats.max_split_size =
      max_split == std::numeric_limits<std::size_t>::max() ? -1 : static_cast<std::int64_t>(max_split);
  return stats;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return_held_blocks();  // the inactive-split peaks as if nothing were held
  for (StatArray* array : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                           &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                           &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& stat : *array) stat.peak = stat.current;
  }
  stats_.oversize_allocations.peak = stats_.oversize_allocations.current;
  stats_.oversize_segments.peak = stats_.oversize_segments.current;
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* array : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                           &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                           &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& stat : *array) stat.allocated = stat.freed = 0;
  }
  for (Stat* stat : {&stats_.oversize_allocations, &stats_.oversize_segments}) stat->allocated = stat->freed = 0;
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_oom_rejections = 0;
  stats_.num_sync_all_streams = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return_held_blocks();
  std::vector<SegmentInfo> segments;
  segments.reserve(segments_.size());
  for (const Block* head : segments_) {
    SegmentInfo segment;
    segment.address = reinterpret_cast<std::uintptr_t>(head->ptr);
    segment.stream_index = head->stream->stream_index();
    segment.is_large = !head->small;
    segment.pool = pool_id_;
    for (const Block* block = head; block != nullptr; block = block->next) {
      BlockInfo info;
      info.address = reinterpret_cast<std::uintptr_t>(block->ptr);
      info.size = block->size;
      info.requested_size = block->allocated ? block->requested_size : 0;
      info.allocated = block->allocated;
      info.active = block->allocated || !block->pending.empty();
      segment.total_size += info.size;
      segment.requested_size += info.requested_size;
      if (info.allocated) segment.allocated_size += info.size;
      if (info.active) segment.active_size += info.size;
      segment.blocks.push_back(info);
    }
    segments.push_back(std::move(segment));
  }
  return segments;
}

std::string CachingAllocator::out_of_memory_message(std::size_t size) const {
  // torch_npu's text, word for word (including the missing space after ").").
  const std::string allowed = fraction_set_ ? format_size(allowed_bytes()) + " allowed; " : "";
  return "NPU out of memory. Tried to allocate " + format_size(size) + " (NPU " +
         std::to_string(memory_.device_index()) + "; " + format_size(memory_.capacity()) +
         " total capacity; " + format_size(stats_.allocated_bytes[kAggregateStat].current) +
         " already allocated; " + format_size(stats_.active_bytes[kAggregateStat].current) +
         " current active; " + format_size(memory_.free_bytes()) + " free; " + allowed +
         format_size(stats_.reserved_bytes[kAggregateStat].current) +
         " reserved in total by PyTorch).If reserved memory is >> allocated memory try setting "
         "max_split_size_mb to avoid fragmentation.";
}

void set_block_trace_hook(BlockTraceHook hook) { g_block_trace_hook.store(hook, std::memory_order_release); }

std::string format_size(std::uint64_t bytes) {
  char text[64];
  if (bytes <= 1024) {
    std::snprintf(text, sizeof(text), "%llu bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes <= 1024ull * 1024) {
    std::snprintf(text, sizeof(text), "%.2f KiB", bytes / 1024.0);
  } else if (bytes <= 1024ull * 1024 * 1024) {
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / 1073741824.0);
  }
  return text;
}

}  // namespace vnpu
