// CachingAllocator: the stream-aware caching allocator of one virtual NPU.
//
// Note [Caching allocator policy]
// Device memory (DeviceMemory, the stand-in for aclrtMalloc) is reserved in
// segments; the allocator carves blocks out of them and keeps freed blocks
// for reuse instead of returning them.
// - Rounding: a request, plus the allocator's request padding (see
//   DeviceAllocator), is rounded up to a multiple of kMinBlockSize, or,
//   with roundup_power2_divisions, to the next of N equal steps of its
//   power-of-two interval (so varying sizes land on the same few blocks).
// - Pools: requests up to kSmallSize go to the small pool, packed into
//   kSmallBuffer segments; larger ones to the large pool, where requests
//   below kMinLargeAlloc share kLargeBuffer segments and bigger ones get a
//   segment of their own, rounded to kRoundLarge. When device memory has no
//   room for a shared segment, a segment of just the block is tried.
// - Best fit: the smallest cached block of the same stream and pool that
//   fits, lowest address first among equals. Blocks of max_split_size or
//   more are never split, so they only serve requests that are themselves at
//   least max_split_size and at most max_non_split_rounding_mb (default
//   kLargeBuffer) smaller.
// - Splitting and merging: a block bigger than the request is split when the
//   rest is worth keeping (at least kMinBlockSize in the small pool, more
//   than kSmallSize in the large pool). A freed block merges with the free
//   blocks next to it in its segment.
// - Streams: a segment belongs to the stream it was reserved for and its
//   blocks serve only that stream, so reuse is safe by stream order: work
//   queued before the free runs before work queued after the reuse.
//   record_stream(block, s) names another stream that uses the block; the
//   free then waits (without blocking anyone) until s has run everything
//   queued on it so far, and only then returns the block to its pool.
// - Outgrown segments: before a stream's pool grows by a new segment, its
//   idle cached segments smaller than the request go back to device memory.
//   Best fit could not use them, and when sizes vary (sequence lengths) they
//   would pile up as sizes grow, so memory_reserved would follow the history
//   of sizes instead of the working set. (torch_npu keeps them until
//   empty_cache or an OOM; its device memory is costly to reserve again,
//   here it is host memory.)
// - Giving memory back: a cached block may still be read by work queued
//   before it was freed. Each free block remembers the last task queued on
//   its stream at the free; its segment goes back to device memory only once
//   the stream completed that task. empty_cache() and the out-of-memory path
//   wait for that; garbage collection and PYTORCH_NO_NPU_MEMORY_CACHING only
//   release what is already safe and try again at the next call.
// - Out of memory: when device memory (or the per-process memory fraction)
//   refuses a new segment, idle cached segments are released and the
//   reservation retried, then the allocator waits for streams still using
//   cached segments and tries once more; after that it throws
//   Error(kOutOfMemory) with torch_npu's message.
// - garbage_collection_threshold T: before growing beyond T of the allowed
//   memory, idle whole segments are released, least recently used first.
//
// Why stream positions rather than recorded events for record_stream: the
// position "last task queued on s" completes exactly when an event recorded
// there would, but recording an event queues a task, which can block on a
// full launch queue while this allocator's mutex is held (deadlocking the
// worker that frees a tensor), and frees also run on stream workers, where a
// synchronous stream must not be re-entered.
//
// Thread-safety: every method may be called from any thread; one mutex per
// allocator. free() and record_stream() never wait for a stream, so tensors
// may die on stream workers. allocate() (when short of memory) and
// empty_cache() wait for streams without holding the mutex: never call them
// from a stream worker.
// Ownership: blocks belong to the allocator; callers hold them from
// allocate() to free(). The streams and the DeviceMemory must outlive it.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "vnpu/alloc_config.h"
#include "vnpu/allocator_stats.h"

namespace vnpu {

class DeviceMemory;
class Stream;

// A range of a segment handed out by allocate(); opaque to callers.
struct Block;

class CachingAllocator {
 public:
  static constexpr std::size_t kMinBlockSize = 512;              // bytes; every block is a multiple
  static constexpr std::size_t kSmallSize = 1024 * 1024;         // bytes; largest small-pool request
  static constexpr std::size_t kSmallBuffer = 2 * 1024 * 1024;   // bytes; small-pool segment size
  static constexpr std::size_t kLargeBuffer = 20 * 1024 * 1024;  // bytes; shared large segment size
  static constexpr std::size_t kMinLargeAlloc = 10 * 1024 * 1024;  // bytes; from here: own segment
  static constexpr std::size_t kRoundLarge = 2 * 1024 * 1024;    // bytes; own segments round to this

  // `caching` false (PYTORCH_NO_NPU_MEMORY_CACHING=1): every block is its own
  // segment and goes back to device memory as soon as its stream allows.
  // `request_padding` bytes are added to every request before it is rounded.
  CachingAllocator(DeviceMemory& memory, const AllocConfig& config, bool caching = true,
                   std::size_t request_padding = 0);
  // Returns every segment to device memory; no block may be in use by
  // queued work any more.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` bytes for work on `stream`; nullptr for 0.
  // Throws Error(kOutOfMemory) with torch_npu's message when neither the
  // cache nor device memory can serve it. May wait for streams (see above).
  Block* allocate(std::size_t bytes, Stream& stream);

  // For a workspace allocator, whose blocks only tasks running on a stream
  // (its worker, or a run_on_caller caller) use and free before they end:
  // no queued work ever reads a free block, so the best fit among `stream`'s
  // free blocks is taken whatever the stream's position, else a new segment.
  // Never waits (a task waiting for its own stream would deadlock): throws
  // Error(kOutOfMemory) when neither the cache nor device memory can serve.
  Block* allocate_for_running_task(std::size_t bytes, Stream& stream);

  // Returns a block to the cache. Never waits.
  void free(Block* block);

  // Marks `block` as used by work on `stream` as well (record_stream). Never waits.
  void record_stream(Block* block, Stream& stream);

  // Waits until no queued work uses a cached block, then returns every
  // fully free segment to device memory.
  void empty_cache();

  // `dead` is about to be destroyed (aclrtDestroyStream) and its queued
  // work has run: every block of a segment made for it now belongs to
  // `heir`, and record_stream uses of it are dropped, so that no block keeps
  // a pointer to the destroyed stream. Never waits.
  void retire_stream(Stream& dead, Stream& heir);

  // Limits reservations to fraction * capacity (0 <= fraction <= 1; the
  // caller validates). Also makes out-of-memory messages show the limit.
  void set_memory_fraction(double fraction);
  double memory_fraction() const;

  AllocatorStats stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();

  // Every segment with its blocks, in address order.
  std::vector<SegmentInfo> snapshot() const;

  // The rounded size a request of `bytes` occupies.
  std::size_t round_size(std::size_t bytes) const;

  static void* address(const Block* block);
  // The block's size (its request rounded up).
  static std::size_t size(const Block* block);
  static CachingAllocator& owner(const Block* block);
  // The block some allocator handed out at `address` and nobody has freed
  // yet; nullptr otherwise (Note [Blocks by address]).
  static Block* live_block(const void* address);
  // free() in two steps, for a caller that knows a block only by its
  // address and must act between finding it and freeing it: the live block
  // that starts at `address`, taken out of the registry (nullptr, and
  // nothing done, when there is none), then free_taken() of its owner. One
  // registry lookup instead of live_block() then free(). Never waits.
  static Block* take_live_block(const void* address);
  void free_taken(Block* block);
  // The allocated block that contains `address` (anywhere inside it), as
  // [*base, *base + *bytes) with the size its caller requested; false when
  // `address` is in no block this allocator has handed out. Takes the
  // allocator's mutex; for bounds checks, not for hot paths.
  bool allocation_containing(const void* address, void** base, std::size_t* bytes) const;

  // Called, without this allocator's mutex, when neither its cache nor
  // device memory can serve a request after its own idle segments went
  // back: its owner returns what the device's other allocators hold idle,
  // and the request is retried once (as CUDA's release_cached_blocks spans
  // every pool). Set before the allocator is first used.
  void set_release_peers(std::function<void(CachingAllocator&)> release) { release_peers_ = std::move(release); }

  // No splitting (torch.npu.MemPool(no_split=True)): each segment is made
  // for one request, at its rounded size, and holds that one block; a
  // cached block is reused whole, and only when it is at most kRoundLarge
  // bigger than the request. Set by the owner before first use.
  void set_no_split(bool no_split) { no_split_ = no_split; }

  // The bytes the device's allocators hold reserved together (ordinary,
  // workspace and pools over the device's memory): the per-process memory
  // fraction limits their sum, as CUDA's limits a device's (every pool's
  // segments count). Without it, the fraction limits this allocator's own.
  // Set by the owner before first use.
  void set_shared_reserved(std::atomic<std::int64_t>* reserved) { shared_reserved_ = reserved; }

  // Called, without this allocator's mutex, when a request cannot be served
  // at all (the last step before OutOfMemoryError): a block it returns, from
  // another allocator's cache (a MemPool(use_on_oom=True)), serves the
  // request. Set by the owner before first use.
  void set_oom_fallback(std::function<Block*(std::size_t, Stream&)> fallback) {
    oom_fallback_ = std::move(fallback);
  }
  // A block for `bytes` from what this allocator holds cached, never a new
  // segment; nullptr if none fits. Another allocator's OOM fallback.
  Block* allocate_cached(std::size_t bytes, Stream& stream);

  // The private pool this allocator serves ({0, 0}: none); set by its owner
  // before first use. Trace events and snapshots carry it.
  void set_pool_id(PoolId id) { pool_id_ = id; }
  PoolId pool_id() const { return pool_id_; }

  DeviceMemory& memory() const { return memory_; }
  // The options in force (a copy: set_config may change them).
  AllocConfig config() const;
  // Changes the options for the requests that follow (the blocks already
  // cached keep their sizes). Thread-safe; does not block on queued work.
  void set_config(const AllocConfig& config);

 private:
  friend struct Block;
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using BlockSet = std::set<Block*, BlockLess>;
  struct Pool {
    BlockSet blocks;
    bool is_small;
  };
  struct AddressLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  // A stream and the sequence number of its last task at some point.
  struct StreamMark {
    Stream* stream;
    std::uint64_t seq;
  };

  Pool& pool_for(std::size_t size) { return size <= kSmallSize ? small_pool_ : large_pool_; }
  std::size_t segment_size(std::size_t size) const;
  std::uint64_t allowed_bytes() const;

  // allocate() and allocate_for_running_task(): the latter may not wait.
  Block* allocate_block(std::size_t bytes, Stream& stream, bool may_wait);
  Block* find_free_block(Pool& pool, Stream& stream, std::size_t size);
  bool fits(const Block* block, std::size_t size) const;
  Block* reserve_segment(Pool& pool, Stream& stream, std::size_t size, std::size_t segment_bytes);
  void* try_reserve(std::size_t bytes);
  // Hands out `size` bytes of the free `block` (splitting off the rest), for
  // a request of `requested` bytes: counted, registered by address, traced.
  Block* take_block(Block* block, std::size_t size, std::size_t requested);
  // take_block's second half: marks `block` allocated for `requested` bytes,
  // counted, registered and traced.
  Block* hand_out(Block* block, std::size_t requested);
  // A freed block back under the allocator's control: to its pool, or, with
  // `may_hold`, possibly held back (Note [Held blocks]).
  void finish_free(Block* block, bool may_hold = false);
  // Note [Held blocks]: the held block of exactly `size` bytes on `stream`,
  // taken out of the held set (nullptr: none); every held block to its pool.
  Block* take_held(std::size_t size, Stream& stream);
  void return_held_blocks();
  void return_held_blocks() const;
  void return_to_pool(Block* block);
  Block* merge(Block* block, Block* neighbour, Pool& pool);
  void release_segment(Block* head);
  bool is_idle_segment(const Block* block) const;
  void release_idle_segments();
  void release_outgrown_segments(Pool& pool, Stream& stream, std::size_t size);
  void garbage_collect();
  void process_deferred();
  // Note [Recycled nodes]: the hot path's pool updates and block splits
  // reuse tree nodes and Block objects instead of allocating new ones.
  void pool_insert(Pool& pool, Block* block);
  void pool_erase(Pool& pool, BlockSet::iterator it);
  Block* new_block();
  void recycle_block(Block* block);
  Block* retry_after_releasing_cache(std::unique_lock<std::mutex>& lock, Pool& pool, Stream& stream,
                                     std::size_t size, std::size_t segment_bytes);
  // Waits, without holding the mutex, until no queued work reads a cached
  // block any more. False when there was nothing to wait for.
  bool wait_until_cache_is_idle(std::unique_lock<std::mutex>& lock);
  std::string out_of_memory_message(std::size_t size) const;
  void recount_oversize();  // mutex_ held

  DeviceMemory& memory_;
  AllocConfig config_;  // guarded by mutex_
  const bool caching_;
  const std::size_t request_padding_;
  std::function<void(CachingAllocator&)> release_peers_;  // set before first use
  std::function<Block*(std::size_t, Stream&)> oom_fallback_;  // set before first use
  std::atomic<std::int64_t>* shared_reserved_ = nullptr;   // set before first use
  PoolId pool_id_{0, 0};                                   // set before first use
  bool no_split_ = false;                                  // set before first use

  mutable std::mutex mutex_;  // guards everything below
  Pool small_pool_{{}, true};
  Pool large_pool_{{}, false};
  std::set<Block*, AddressLess> segments_;  // the first block of every segment
  std::vector<Block*> deferred_;            // freed, waiting for record_stream users
  std::vector<Block*> unreleased_;          // no caching: freed, waiting for their stream
  AllocatorStats stats_;
  double fraction_ = 1.0;
  bool fraction_set_ = false;
  std::uint64_t clock_ = 0;  // counts allocations; ages cached blocks for GC
  static constexpr std::size_t kHeldBlocks = 4;
  std::array<Block*, kHeldBlocks> held_{};  // Note [Held blocks], oldest first
  std::size_t held_count_ = 0;
  std::vector<BlockSet::node_type> spare_nodes_;  // Note [Recycled nodes]
  std::vector<Block*> spare_blocks_;
};

// Block lifetime tracing: the hook a race detector (torch_npu.npu._sanitizer,
// docs/sanitizer.md) and the memory history (torch.npu.memory.
// _record_memory_history) plug into. With a hook installed, every allocator
// calls it when it hands a block out (kHandedOut: allocate and
// allocate_for_running_task), when its owner frees it (kFreeRequested), and
// when a freed block is back under its control (kReturned: returned to its
// pool, or released when caching is off): for a block freed while
// record_stream users still ran, that is when they have passed, not at
// free(). kSegmentReserved / kSegmentReleased: a segment taken from or given
// back to device memory (address and bytes are the segment's; for the
// other events the bytes its owner asked for). `stream` is
// the block's (segment's) stream.
// Thread-safety: set_block_trace_hook() may be called at any time from any
// thread. The hook runs on whichever thread allocates or frees (stream
// workers included), with the allocator's mutex held: it must be cheap and
// thread-safe, and must not allocate from, free to, or wait for anything.
enum class BlockTraceEvent : std::uint8_t { kHandedOut, kReturned, kFreeRequested, kSegmentReserved, kSegmentReleased };
// `pool`: the private pool the allocator serves ({0, 0} for the ordinary
// allocator and the workspace), as torch's trace entries name it.
using BlockTraceHook = void (*)(BlockTraceEvent event, const void* address, std::size_t bytes,
                                const Stream& stream, const PoolId& pool);
// nullptr turns it off (one relaxed atomic load per allocation and free).
void set_block_trace_hook(BlockTraceHook hook);

// torch's size text: "512 bytes", "2.00 KiB", "1.50 MiB", "3.00 GiB".
std::string format_size(std::uint64_t bytes);

}  // namespace vnpu
