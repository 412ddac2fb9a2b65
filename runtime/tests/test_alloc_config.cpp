#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>

#include "test_helpers.h"
#include "vnpu/alloc_config.h"
#include "vnpu/error.h"

namespace {

using vnpu::AllocConfig;
using vnpu::alloc_config_from;
using vnpu::Error;
using vnpu::ErrorCode;
using vnpu::parse_alloc_config;

constexpr std::size_t kMiB = 1024 * 1024;

AllocConfig parse(const std::string& text) { return parse_alloc_config(text, "PYTORCH_NPU_ALLOC_CONF"); }

// The error parse(text) throws (fails the test if none).
Error parse_error(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error for '" << text << "'";
  return Error(ErrorCode::kInternal, "");
}

TEST(AllocConfig, EmptyTextGivesDefaults) {
  for (const char* text : {"", " ", ",", " , "}) {
    const AllocConfig config = parse(text);
    EXPECT_EQ(config.max_split_size_bytes, std::numeric_limits<std::size_t>::max());
    EXPECT_EQ(config.garbage_collection_threshold, 0.0);
    EXPECT_EQ(config.roundup_divisions(100 * kMiB), 0u);
    EXPECT_FALSE(config.expandable_segments);
  }
}

TEST(AllocConfig, ParsesEveryKeyWithBlanks) {
  const AllocConfig config = parse(
      " max_split_size_mb : 128 , garbage_collection_threshold:0.75,roundup_power2_divisions:4,"
      "expandable_segments:False,");
  EXPECT_EQ(config.max_split_size_bytes, 128 * kMiB);
  EXPECT_DOUBLE_EQ(config.garbage_collection_threshold, 0.75);
  EXPECT_EQ(config.roundup_divisions(1), 4u);
  EXPECT_EQ(config.roundup_divisions(64ull * 1024 * kMiB), 4u);
  EXPECT_FALSE(config.expandable_segments);
}

TEST(AllocConfig, RoundupListSetsTheIntervalOfEachBoundAsTorchReadsIt) {
  // "S:N" is the interval [S, 2S) MiB; the first entry also covers what lies
  // below; ">" what lies above the previous entry; the rest stays plain.
  const AllocConfig config = parse("roundup_power2_divisions:[8:1,64:4,128:8,256:2,>:16]");
  EXPECT_EQ(config.roundup_divisions(1), 1u);
  EXPECT_EQ(config.roundup_divisions(15 * kMiB), 1u);  // [8, 16)
  EXPECT_EQ(config.roundup_divisions(16 * kMiB), 0u);  // [16, 32): no entry
  EXPECT_EQ(config.roundup_divisions(33 * kMiB), 0u);
  EXPECT_EQ(config.roundup_divisions(65 * kMiB), 4u);
  EXPECT_EQ(config.roundup_divisions(200 * kMiB), 8u);
  EXPECT_EQ(config.roundup_divisions(510 * kMiB), 2u);
  EXPECT_EQ(config.roundup_divisions(513 * kMiB), 16u);
  EXPECT_EQ(config.roundup_divisions(std::numeric_limits<std::size_t>::max()), 16u);
}

TEST(AllocConfig, RoundupListWithoutRestLeavesLargerSizesPlain) {
  const AllocConfig config = parse("roundup_power2_divisions:[64:2]");
  EXPECT_EQ(config.roundup_divisions(10 * kMiB), 2u);
  EXPECT_EQ(config.roundup_divisions(64 * kMiB), 2u);
  EXPECT_EQ(config.roundup_divisions(128 * kMiB), 0u);
}

TEST(AllocConfig, RejectsUnknownKeysNamingThem) {
  const Error e = parse_error("max_split_size_mb:64,pinned_use_cuda_host_register:True");
  EXPECT_EQ(e.code(), ErrorCode::kInvalidValue);
  const std::string what = e.what();
  EXPECT_NE(what.find("PYTORCH_NPU_ALLOC_CONF"), std::string::npos) << what;
  EXPECT_NE(what.find("Unrecognized CachingAllocator option: pinned_use_cuda_host_register"),
            std::string::npos)
      << what;
}

TEST(AllocConfig, RejectsMalformedValues) {
  for (const char* text : {
           "max_split_size_mb",                    // no value
           "max_split_size_mb:",                   // empty value
           "max_split_size_mb:abc",                //
           "max_split_size_mb:-5",                 //
           "max_split_size_mb:20",                 // must exceed the 20 MiB segments
           "max_split_size_mb:99999999999999999999999",  // overflow
           "garbage_collection_threshold:0",       //
           "garbage_collection_threshold:1.0",     //
           "garbage_collection_threshold:0.5x",    //
           "garbage_collection_threshold:nan",     //
           "roundup_power2_divisions:3",           // not a power of two
           "roundup_power2_divisions:[256:1",      // unterminated list
           "roundup_power2_divisions:[100:2]",     // bound not a power of two
           "roundup_power2_divisions:[256]",          //
           "expandable_segments:yes",              //
           "pinned_max_round_threshold_mb:0",      // at least 1 MiB
           "pinned_max_cached_size_mb:x",          //
           "pinned_max_cached_size_mb:1099511627777",  // beyond 2^40 MiB
           "pinned_reserve_segment_size_mb:-1",    //
       }) {
    const Error e = parse_error(text);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidValue) << text << ": " << e.what();
  }
}

TEST(AllocConfig, MaxNonSplitRoundingIsMiBOfAtLeastTheLargeSegment) {
  EXPECT_EQ(parse("").max_non_split_rounding_bytes, 20 * kMiB);
  EXPECT_EQ(parse("max_non_split_rounding_mb:30").max_non_split_rounding_bytes, 30 * kMiB);
  const Error e = parse_error("max_non_split_rounding_mb:19");
  EXPECT_NE(std::string(e.what()).find("max_non_split_rounding_mb too small, must be >= 20"), std::string::npos)
      << e.what();
  EXPECT_TRUE(vnpu::is_alloc_config_key("max_non_split_rounding_mb"));
  EXPECT_TRUE(vnpu::is_alloc_config_key("throw_on_npumalloc_oom"));
  EXPECT_FALSE(vnpu::is_alloc_config_key("pinned_use_cuda_host_register"));
  EXPECT_EQ(parse("pinned_reserve_segment_size_mb:64").pinned_reserve_segment_bytes, 64 * kMiB);
  EXPECT_EQ(parse("").pinned_reserve_segment_bytes, 0u);
  EXPECT_TRUE(parse("pinned_use_background_threads:True").pinned_use_background_threads);
  EXPECT_FALSE(parse("").pinned_use_background_threads);
}

TEST(AllocConfig, PinnedLimitsAreMiBAndDefaultToNoLimit) {
  const AllocConfig defaults = parse("");
  EXPECT_EQ(defaults.pinned_max_round_threshold_bytes, std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(defaults.pinned_max_cached_size_bytes, std::numeric_limits<std::size_t>::max());
  const AllocConfig config = parse("pinned_max_round_threshold_mb:64, pinned_max_cached_size_mb:1");
  EXPECT_EQ(config.pinned_max_round_threshold_bytes, 64 * kMiB);
  EXPECT_EQ(config.pinned_max_cached_size_bytes, 1 * kMiB);
}

TEST(AllocConfig, ExpandableSegmentsTrueIsAcceptedAsARequest) {
  EXPECT_TRUE(vnpu::parse_alloc_config("expandable_segments:True", "PYTORCH_NPU_ALLOC_CONF").expandable_segments);
  EXPECT_FALSE(vnpu::parse_alloc_config("expandable_segments:False", "PYTORCH_NPU_ALLOC_CONF").expandable_segments);
}

vnpu::Environment environment(const std::map<std::string, std::string>& vars) {
  vnpu::Environment env = vnpu_test::parse(vars);
  EXPECT_TRUE(env.errors.empty()) << "allocator options are checked by the allocator, not here";
  return env;
}

TEST(AllocConfigEnvironment, ReadsEitherVariable) {
  AllocConfig config = alloc_config_from(environment({{"PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:64"}}));
  EXPECT_EQ(config.max_split_size_bytes, 64 * kMiB);

  config = alloc_config_from(environment({{"PYTORCH_ALLOC_CONF", "garbage_collection_threshold:0.5"}}));
  EXPECT_DOUBLE_EQ(config.garbage_collection_threshold, 0.5);

  // A blank variable counts as unset.
  config = alloc_config_from(
      environment({{"PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:64"}, {"PYTORCH_ALLOC_CONF", " "}}));
  EXPECT_EQ(config.max_split_size_bytes, 64 * kMiB);
  config = alloc_config_from(environment({}));
  EXPECT_EQ(config.max_split_size_bytes, std::numeric_limits<std::size_t>::max());
}

template <typename Fn>
std::string error_text(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

TEST(AllocConfigEnvironment, BothVariablesAreAnError) {
  const auto env = environment(
      {{"PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:64"}, {"PYTORCH_ALLOC_CONF", "max_split_size_mb:64"}});
  const std::string what = error_text([&] { alloc_config_from(env); });
  EXPECT_NE(what.find("both set"), std::string::npos) << what;
}

TEST(AllocConfigEnvironment, BadValueNamesTheVariable) {
  const auto env = environment({{"PYTORCH_ALLOC_CONF", "bogus:1"}});
  const std::string what = error_text([&] { alloc_config_from(env); });
  EXPECT_EQ(what.rfind("PYTORCH_ALLOC_CONF: Unrecognized CachingAllocator option: bogus", 0), 0u) << what;
}

}  // namespace

TEST(AllocConfig, ApplyChangesOnlyTheNamedOptions) {
  const AllocConfig base = parse_alloc_config("max_split_size_mb:64,garbage_collection_threshold:0.5", "X");
  const AllocConfig changed = vnpu::apply_alloc_config(base, "garbage_collection_threshold:0.7,multi_stream_lazy_reclaim:True", "X");
  EXPECT_EQ(changed.max_split_size_bytes, 64u * kMiB);
  EXPECT_DOUBLE_EQ(changed.garbage_collection_threshold, 0.7);
  EXPECT_TRUE(changed.multi_stream_lazy_reclaim);
  EXPECT_EQ(vnpu::alloc_config_keys(" a:1, b:[1:2,>:4] ,"), (std::vector<std::string>{"a", "b"}));
}

TEST(AllocConfig, TorchNpuOptionsAreValidatedAsTorchNpuDoes) {
  const AllocConfig c = parse_alloc_config(
      "base_addr_aligned_kb:0,page_size:1g,segment_size_mb:20,per_process_memory_fraction:0.25,"
      "pin_memory_expandable_segments:False,pinned_mem_register:True,release_lock_on_npumalloc:True",
      "X");
  EXPECT_EQ(c.base_addr_aligned_kb, 0u);
  EXPECT_TRUE(c.page_size_1g);
  EXPECT_EQ(c.segment_size_mb, 20u);
  EXPECT_DOUBLE_EQ(c.per_process_memory_fraction, 0.25);
  EXPECT_THROW(parse_alloc_config("segment_size_mb:19", "X"), Error);
  EXPECT_EQ(parse_alloc_config("large_segment_size_mb:50", "X").large_segment_size_bytes, 50u << 20);
  try {
    parse_alloc_config("large_segment_size_mb:10", "X");
    ADD_FAILURE() << "large_segment_size_mb:10 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("large_segment_size_mb must be > 10 MB"), std::string::npos) << e.what();
  }
  for (const char* text : {"large_segment_size_mb:50,max_split_size_mb:30", "max_split_size_mb:30,large_segment_size_mb:50"}) {
    try {
      parse_alloc_config(text, "X");
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("must be greater than or equal to large_segment_size_mb (50)"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(parse_alloc_config("large_segment_size_mb:50,max_split_size_mb:50", "X"));
  EXPECT_THROW(parse_alloc_config("per_process_memory_fraction:-0.1", "X"), Error);
  EXPECT_THROW(parse_alloc_config("multi_stream_lazy_reclaim:1", "X"), Error);
}
