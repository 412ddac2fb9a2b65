// AllocConfig: the caching allocator's options, parsed from the text of
// PYTORCH_NPU_ALLOC_CONF (or PYTORCH_ALLOC_CONF), e.g.
//   "max_split_size_mb:128,garbage_collection_threshold:0.8"
//   "roundup_power2_divisions:[256:1,512:2,>:8]"
//
// Keys (as in torch_npu / torch.cuda):
// - max_split_size_mb:N (integer MiB, > 20): cached blocks of at least this
//   size are never split, so large blocks are not carved up by small requests.
// - garbage_collection_threshold:T (0 < T < 1): before the allocator grows
//   past T of the memory it may use, it releases idle cached segments, least
//   recently used first.
// - roundup_power2_divisions:N (0 or a power of two) or a list
//   [S:N, ..., >:N] of MiB bounds S (powers of two): each power-of-two size
//   interval is split into N steps and requests round up to the next step, so
//   varying sizes (e.g. sequence lengths) reuse the same blocks. As torch
//   reads the list: "S:N" sets the interval [S, 2S) MiB, the first entry
//   also every interval below it, ">:N" every interval after the previous
//   entry's; intervals no entry names are rounded plainly.
// - expandable_segments:True|False: the virtual NPU has no virtual memory
//   mapping to grow segments in place; with True its large segments take
//   whole granules of segment_size_mb (20 MiB by default), the size an
//   expandable segment maps at a time, so the reserved memory reads as on
//   the chip (Note [Expandable segments' granules], caching_allocator.cpp).
// - per_process_memory_fraction:F (0 <= F <= 1): as
//   torch.npu.set_per_process_memory_fraction(F) on every device.
// - large_segment_size_mb:N (integer MiB, > 10): the segment a request
//   between 1 MiB and 10 MiB gets (20 MiB by default), torch's option.
// - pinned_max_round_threshold_mb:N, pinned_max_cached_size_mb:N (integer
//   MiB, >= 1): the pinned host allocator's (csrc/core/host_allocator.h)
//   requests above the first are not rounded up to a power of two, and
//   freed blocks above the second go back to the system instead of its
//   cache (torch's pinned options, which real torch_npu reads here).
// - pinned_reserve_segment_size_mb:N (integer MiB, 0 = off): the pinned
//   host allocator reserves N MiB at its first allocation and carves
//   requests out of it (4 KiB steps) until it is used up, as torch_npu's.
// - torch_npu's tuning options for Ascend memory, validated as torch_npu
//   validates them and accepted without effect (the virtual NPU's memory has
//   no pages, address alignment or driver lock to tune):
//   multi_stream_lazy_reclaim, base_addr_aligned_kb (0..16), page_size (1g),
//   pin_memory_expandable_segments,
//   pinned_mem_register, release_lock_on_npumalloc (the adaptor turns the
//   two pinned ones off with torch_npu's warning for CANN before 8.5).
//
// Errors surface when the allocator is created (the first allocation), as
// in torch_npu, not when the environment is read: a bad allocator option
// must not make the device look absent.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace vnpu {

struct Environment;

struct AllocConfig {
  // Power-of-two size intervals with their own division count: [0, 2) MiB,
  // [2, 4) MiB, ... [2^15 MiB, inf).
  static constexpr std::size_t kRoundupIntervals = 16;

  // Blocks of at least this many bytes are never split ("no limit" default).
  std::size_t max_split_size_bytes = std::numeric_limits<std::size_t>::max();
  // A cached unsplittable block serves a request of max_split_size or more
  // only if it is less than this much bigger (max_non_split_rounding_mb;
  // torch's default is the 20 MiB large segment).
  std::size_t max_non_split_rounding_bytes = 20 * 1024 * 1024;
  // Fraction of the allowed memory above which idle segments are collected;
  // 0 disables garbage collection.
  double garbage_collection_threshold = 0.0;
  // Divisions per interval; 0 or 1: plain rounding to the block size.
  std::array<std::size_t, kRoundupIntervals> roundup_power2_divisions{};
  // Requested (True): ordinary segments of whole segment_size_mb granules;
  // the adaptor warns once.
  bool expandable_segments = false;
  // Negative: not given (the allocator keeps its default of 1.0).
  double per_process_memory_fraction = -1.0;
  // Accepted for compatibility with torch_npu; no effect (see above).
  bool multi_stream_lazy_reclaim = false;
  std::size_t base_addr_aligned_kb = 16;
  bool page_size_1g = false;
  // The granule of an expandable segment (MiB); 0: 20 MiB.
  std::size_t segment_size_mb = 0;
  // Segment of a request of (kSmallSize, kMinLargeAlloc) bytes; 0: the
  // allocator's default (kLargeBuffer, 20 MiB).
  std::size_t large_segment_size_bytes = 0;
  bool pin_memory_expandable_segments = false;
  bool pinned_mem_register = false;
  bool release_lock_on_npumalloc = false;
  // The pinned host allocator's limits, in bytes ("no limit" default).
  std::size_t pinned_max_round_threshold_bytes = std::numeric_limits<std::size_t>::max();
  std::size_t pinned_max_cached_size_bytes = std::numeric_limits<std::size_t>::max();
  std::size_t pinned_reserve_segment_bytes = 0;  // 0: no reserve segment
  // torch's pinned_use_background_threads: a helper thread collects freed
  // pinned blocks as their streams complete, instead of the next allocation.
  bool pinned_use_background_threads = false;
  // torch_npu's throw_on_npumalloc_oom: a request that would take the
  // allocated bytes past the per-process fraction is refused at once with
  // out-of-memory (counted as num_oom_rejections), before the cache is
  // released and retried.
  bool throw_on_npumalloc_oom = false;

  // Division count that applies to a request of `bytes`.
  std::size_t roundup_divisions(std::size_t bytes) const;
};

// Parses `text` ("key:value,key:value"; blanks around tokens are ignored).
// `variable` names the source in messages, e.g. "PYTORCH_NPU_ALLOC_CONF".
// Throws Error(kInvalidValue) for an unknown key or a malformed value, and
// no error for expandable_segments:True (ordinary segments, see above).
AllocConfig parse_alloc_config(const std::string& text, const std::string& variable);

// `base` with the options `text` names changed (the others keep their
// values); throws as parse_alloc_config does, leaving nothing half-applied.
AllocConfig apply_alloc_config(AllocConfig base, const std::string& text, const std::string& variable);

// The option names `text` sets, in order (for callers that restrict them).
std::vector<std::string> alloc_config_keys(const std::string& text);

// Whether `key` is an option this parser knows.
bool is_alloc_config_key(const std::string& key);

// The options `env` asks for: PYTORCH_NPU_ALLOC_CONF or PYTORCH_ALLOC_CONF
// (blank values count as unset). Throws as parse_alloc_config does, and
// Error(kInvalidValue) when both are set.
AllocConfig alloc_config_from(const Environment& env);

}  // namespace vnpu
