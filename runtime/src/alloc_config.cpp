#include "vnpu/alloc_config.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "vnpu/environment.h"
#include "vnpu/error.h"

namespace vnpu {
namespace {

constexpr std::size_t kMiB = 1024 * 1024;
// max_split_size_mb must exceed the large-pool segment size (20 MiB): smaller
// limits would stop the allocator from splitting its own segments.
constexpr std::uint64_t kMinMaxSplitSizeMiB = 20;
// pinned_max_*_mb: up to 2^40 MiB, so that the byte count cannot overflow.
constexpr std::uint64_t kMaxPinnedMb = std::uint64_t{1} << 40;

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const auto begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

int floor_log2(std::uint64_t v) {
  int log = 0;
  while (v >>= 1) ++log;
  return log;
}

// Splits on `separator` outside square brackets (lists hold commas too).
std::vector<std::string> split_top_level(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == separator && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

class Parser {
 public:
  explicit Parser(std::string variable) : variable_(std::move(variable)) {}

  [[noreturn]] void fail(const std::string& what, ErrorCode code = ErrorCode::kInvalidValue) const {
    throw Error(code, variable_ + ": " + what);
  }

  std::uint64_t parse_unsigned(const std::string& key, const std::string& raw) const {
    const std::string s = trim(raw);
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) {
      fail("option " + key + " expects a non-negative integer, got '" + raw + "'");
    }
    errno = 0;
    const unsigned long long value = std::strtoull(s.c_str(), nullptr, 10);
    if (errno == ERANGE) fail("option " + key + " value '" + raw + "' is too large");
    return value;
  }

  double parse_double(const std::string& key, const std::string& raw) const {
    const std::string s = trim(raw);
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
      fail("option " + key + " expects a number, got '" + raw + "'");
    }
    return value;
  }

  void max_split_size(const std::string& raw, AllocConfig& config) const {
    const std::uint64_t mb = parse_unsigned("max_split_size_mb", raw);
    if (mb <= kMinMaxSplitSizeMiB) {
      fail("max_split_size_mb too small, must be > " + std::to_string(kMinMaxSplitSizeMiB) + ", got " +
           std::to_string(mb));
    }
    config.max_split_size_bytes = mb > std::numeric_limits<std::size_t>::max() / kMiB
                                      ? std::numeric_limits<std::size_t>::max()
                                      : static_cast<std::size_t>(mb) * kMiB;
  }

  // torch's own bound: a rounding allowance below the large segment could
  // never be met by a block cut for a large request anyway.
  void max_non_split_rounding(const std::string& raw, AllocConfig& config) const {
    const std::uint64_t mb = parse_unsigned("max_non_split_rounding_mb", raw);
    if (mb < kMinMaxSplitSizeMiB) {
      fail("max_non_split_rounding_mb too small, must be >= " + std::to_string(kMinMaxSplitSizeMiB) + ", got " +
           std::to_string(mb));
    }
    config.max_non_split_rounding_bytes = mb > std::numeric_limits<std::size_t>::max() / kMiB
                                              ? std::numeric_limits<std::size_t>::max()
                                              : static_cast<std::size_t>(mb) * kMiB;
  }

  void gc_threshold(const std::string& raw, AllocConfig& config) const {
    const double t = parse_double("garbage_collection_threshold", raw);
    if (!(t > 0.0 && t < 1.0)) {
      fail("garbage_collection_threshold is invalid, set it in (0.0, 1.0), got '" + trim(raw) + "'");
    }
    config.garbage_collection_threshold = t;
  }

  std::size_t divisions(const std::string& raw) const {
    const std::uint64_t n = parse_unsigned("roundup_power2_divisions", raw);
    if (n != 0 && !is_power_of_two(n)) {
      fail("roundup_power2_divisions must be 0 or a power of two, got " + std::to_string(n));
    }
    return static_cast<std::size_t>(n);
  }

  void roundup(const std::string& raw, AllocConfig& config) const {
    const std::string s = trim(raw);
    auto& table = config.roundup_power2_divisions;
    if (s.empty() || s.front() != '[') {
      table.fill(divisions(s));
      return;
    }
    if (s.back() != ']') fail("roundup_power2_divisions list must end with ']', got '" + s + "'");
    // torch's reading of the list (c10's AcceleratorAllocatorConfig, which
    // torch_npu uses): "S:N" sets the interval [S, 2S) MiB; the first entry
    // also sets every interval below it; ">:N" sets every interval after the
    // previous entry's; intervals no entry names keep 0 (plain rounding).
    table.fill(0);
    bool first = true;
    std::size_t last = 0;
    for (const std::string& entry : split_top_level(s.substr(1, s.size() - 2), ',')) {
      const auto colon = entry.find(':');
      if (colon == std::string::npos) {
        fail("roundup_power2_divisions entries are 'MiB:divisions' or '>:divisions', got '" +
             trim(entry) + "'");
      }
      const std::string bound = trim(entry.substr(0, colon));
      const std::size_t n = divisions(entry.substr(colon + 1));
      if (bound == ">") {
        for (std::size_t i = last + 1; i < table.size(); ++i) table[i] = n;
        continue;
      }
      const std::uint64_t mb = parse_unsigned("roundup_power2_divisions", bound);
      if (!is_power_of_two(mb)) {
        fail("roundup_power2_divisions bounds must be powers of two (MiB), got " + bound);
      }
      const std::size_t index = std::min<std::size_t>(floor_log2(mb), table.size() - 1);
      if (first) {
        for (std::size_t i = 0; i < index; ++i) table[i] = n;
        first = false;
      }
      table[index] = n;
      last = index;
    }
  }

  void expandable(const std::string& raw, AllocConfig& config) const {
    const std::string s = trim(raw);
    if (s == "False") {
      config.expandable_segments = false;
    } else if (s == "True") {
      // Requested, and accepted as CUDA accepts it where it cannot honour it:
      // the adaptor warns once and allocates ordinary segments (the virtual
      // device's memory cannot be remapped to grow a segment).
      config.expandable_segments = true;
    } else {
      fail("expandable_segments expects True or False, got '" + raw + "'");
    }
  }

  bool boolean(const std::string& key, const std::string& raw) const {
    const std::string s = trim(raw);
    if (s != "True" && s != "False") fail("Expected a single True/False argument for " + key + ", got '" + raw + "'");
    return s == "True";
  }

  std::size_t bounded(const std::string& key, const std::string& raw, std::uint64_t low, std::uint64_t high) const {
    const std::uint64_t v = parse_unsigned(key, raw);
    if (v < low || v > high) {
      fail("CachingAllocator option " + key + " error, must be [" + std::to_string(low) + ", " +
           std::to_string(high) + "], got " + std::to_string(v));
    }
    return static_cast<std::size_t>(v);
  }

  void fraction(const std::string& raw, AllocConfig& config) const {
    const double f = parse_double("per_process_memory_fraction", raw);
    if (!(f >= 0.0 && f <= 1.0)) fail("per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
    config.per_process_memory_fraction = f;
  }

  void large_segment_size(const std::string& raw, AllocConfig& config) const {
    // torch's rule: larger than the 10 MiB from which requests get a segment
    // of their own size; capped where the byte count would overflow.
    constexpr std::uint64_t kMinMb = 10;
    const std::uint64_t mb = parse_unsigned("large_segment_size_mb", raw);
    if (mb <= kMinMb) {
      fail("CachingAllocator option large_segment_size_mb must be > " + std::to_string(kMinMb) + " MB, got " +
           std::to_string(mb));
    }
    config.large_segment_size_bytes =
        static_cast<std::size_t>(std::min<std::uint64_t>(mb, std::numeric_limits<std::size_t>::max() / kMiB)) * kMiB;
  }

  void page_size(const std::string& raw, AllocConfig& config) const {
    if (trim(raw) != "1g") fail("Unsupported page_size value: " + trim(raw) + " (page_size:1g is the only one)");
    config.page_size_1g = true;
  }

 private:
  std::string variable_;
};

}  // namespace

std::size_t AllocConfig::roundup_divisions(std::size_t bytes) const {
  const std::size_t mb = bytes / kMiB;
  const std::size_t interval = mb < 2 ? 0 : static_cast<std::size_t>(floor_log2(mb));
  return roundup_power2_divisions[std::min(interval, kRoundupIntervals - 1)];
}

namespace {

// "key:value" entries of `text`, blanks trimmed, empty entries skipped.
std::vector<std::pair<std::string, std::string>> entries_of(const std::string& text, const Parser& parser) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (const std::string& raw_entry : split_top_level(text, ',')) {
    const std::string entry = trim(raw_entry);
    if (entry.empty()) continue;  // "a:1," and "" are fine
    const auto colon = entry.find(':');
    if (colon == std::string::npos) parser.fail("expected 'key:value', got '" + entry + "'");
    entries.emplace_back(trim(entry.substr(0, colon)), entry.substr(colon + 1));
  }
  return entries;
}

}  // namespace

namespace {

// Every option apply_alloc_config knows, in the order its messages list them.
constexpr const char* kKeys[] = {
    "max_split_size_mb", "max_non_split_rounding_mb", "garbage_collection_threshold", "roundup_power2_divisions",
    "expandable_segments", "per_process_memory_fraction", "multi_stream_lazy_reclaim", "base_addr_aligned_kb",
    "page_size", "segment_size_mb", "large_segment_size_mb", "pin_memory_expandable_segments", "pinned_mem_register",
    "pinned_max_round_threshold_mb", "pinned_max_cached_size_mb", "pinned_reserve_segment_size_mb",
    "pinned_use_background_threads",
    "release_lock_on_npumalloc",
    "throw_on_npumalloc_oom"};

}  // namespace

bool is_alloc_config_key(const std::string& key) {
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* name) { return key == name; });
}

AllocConfig apply_alloc_config(AllocConfig config, const std::string& text, const std::string& variable) {
  const Parser parser(variable);
  for (const auto& [key, value] : entries_of(text, parser)) {
    if (key == "max_split_size_mb") {
      parser.max_split_size(value, config);
    } else if (key == "max_non_split_rounding_mb") {
      parser.max_non_split_rounding(value, config);
    } else if (key == "garbage_collection_threshold") {
      parser.gc_threshold(value, config);
    } else if (key == "roundup_power2_divisions") {
      parser.roundup(value, config);
    } else if (key == "expandable_segments") {
      parser.expandable(value, config);
    } else if (key == "per_process_memory_fraction") {
      parser.fraction(value, config);
    } else if (key == "multi_stream_lazy_reclaim") {
      config.multi_stream_lazy_reclaim = parser.boolean(key, value);
    } else if (key == "base_addr_aligned_kb") {
      config.base_addr_aligned_kb = parser.bounded(key, value, 0, 16);
    } else if (key == "page_size") {
      parser.page_size(value, config);
    } else if (key == "segment_size_mb") {
      config.segment_size_mb = parser.bounded(key, value, 20, 512);
    } else if (key == "large_segment_size_mb") {
      parser.large_segment_size(value, config);
    } else if (key == "pin_memory_expandable_segments") {
      config.pin_memory_expandable_segments = parser.boolean(key, value);
    } else if (key == "pinned_mem_register") {
      config.pinned_mem_register = parser.boolean(key, value);
    } else if (key == "pinned_use_background_threads") {
      config.pinned_use_background_threads = parser.boolean(key, value);
    } else if (key == "pinned_max_round_threshold_mb") {
      config.pinned_max_round_threshold_bytes = parser.bounded(key, value, 1, kMaxPinnedMb) * kMiB;
    } else if (key == "pinned_max_cached_size_mb") {
      config.pinned_max_cached_size_bytes = parser.bounded(key, value, 1, kMaxPinnedMb) * kMiB;
    } else if (key == "pinned_reserve_segment_size_mb") {
      config.pinned_reserve_segment_bytes = parser.bounded(key, value, 0, kMaxPinnedMb) * kMiB;
    } else if (key == "release_lock_on_npumalloc") {
      config.release_lock_on_npumalloc = parser.boolean(key, value);
    } else if (key == "throw_on_npumalloc_oom") {
      config.throw_on_npumalloc_oom = parser.boolean(key, value);
    } else {
      std::string known;
      for (const char* name : kKeys) known += std::string(known.empty() ? "" : ", ") + name;
      parser.fail("Unrecognized CachingAllocator option: " + key + " (supported: " + known + ")");
    }
  }
  // Checked once all keys are read, in either order: a mid-range segment
  // larger than the split limit could never be split for the requests it
  // was made for.
  if (config.large_segment_size_bytes != 0 && config.max_split_size_bytes < config.large_segment_size_bytes) {
    parser.fail("max_split_size_mb (" + std::to_string(config.max_split_size_bytes / kMiB) +
                ") must be greater than or equal to large_segment_size_mb (" +
                std::to_string(config.large_segment_size_bytes / kMiB) + ")");
  }
  return config;
}

AllocConfig parse_alloc_config(const std::string& text, const std::string& variable) {
  return apply_alloc_config(AllocConfig{}, text, variable);
}

std::vector<std::string> alloc_config_keys(const std::string& text) {
  std::vector<std::string> keys;
  for (const auto& entry : entries_of(text, Parser("allocator settings"))) keys.push_back(entry.first);
  return keys;
}

AllocConfig alloc_config_from(const Environment& env) {
  auto given = [](const std::optional<std::string>& value) { return value && !trim(*value).empty(); };
  const bool npu = given(env.npu_alloc_conf);
  const bool generic = given(env.alloc_conf);
  if (npu && generic) {
    throw Error(ErrorCode::kInvalidValue,
                "PYTORCH_NPU_ALLOC_CONF and PYTORCH_ALLOC_CONF are both set; set only one of them "
                "(PYTORCH_NPU_ALLOC_CONF is torch_npu's name)");
  }
  if (npu) return parse_alloc_config(*env.npu_alloc_conf, "PYTORCH_NPU_ALLOC_CONF");
  if (generic) return parse_alloc_config(*env.alloc_conf, "PYTORCH_ALLOC_CONF");
  return AllocConfig{};
}

}  // namespace vnpu
