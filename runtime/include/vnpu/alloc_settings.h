// AllocSettings: the caching allocators' options for the whole process, in
// one place: PYTORCH_NPU_ALLOC_CONF's (or PYTORCH_ALLOC_CONF's), then what
// torch_npu.npu.memory._set_allocator_settings() changed. Allocators copy
// them when they are created; Runtime::set_alloc_config() changes them and
// the allocators of every device together.
//
// A bad environment value does not fail construction (it must not make the
// devices look absent): get() throws it, each time, so the first allocation
// reports it, as in torch_npu.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "vnpu/alloc_config.h"
#include "vnpu/error.h"

namespace vnpu {

struct Environment;

class AllocSettings {
 public:
  explicit AllocSettings(const Environment& env);

  // The options in force. Throws Error (kInvalidValue, kNotSupported) when
  // the environment's are invalid.
  AllocConfig get() const;
  // The same without throwing: nullopt when the environment's are invalid
  // (for statistics, which must not raise configuration errors).
  std::optional<AllocConfig> peek() const;
  // Changes the options `text` names ("key:value,..."; the others keep their
  // values, but for max_split_size_mb, roundup_power2_divisions and
  // garbage_collection_threshold, which go back to their defaults unless
  // `text` sets them, as torch's parser does) and returns the result. Throws as get() does, or for a bad
  // `text` (`variable` names it in messages), changing nothing.
  AllocConfig apply(const std::string& text, const std::string& variable);

 private:
  mutable std::mutex mutex_;
  std::optional<AllocConfig> config_;  // guarded by mutex_; empty while invalid
  ErrorCode error_code_ = ErrorCode::kInvalidValue;
  std::string error_;  // why the environment's options are invalid
};

}  // namespace vnpu
