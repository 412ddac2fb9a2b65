#include "vnpu/alloc_settings.h"

#include "vnpu/environment.h"

namespace vnpu {

AllocSettings::AllocSettings(const Environment& env) {
  try {
    config_ = alloc_config_from(env);
  } catch (const Error& e) {
    error_code_ = e.code();
    error_ = e.what();
  }
}

AllocConfig AllocSettings::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!config_) throw Error(error_code_, error_);
  return *config_;
}

std::optional<AllocConfig> AllocSettings::peek() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_;
}

AllocConfig AllocSettings::apply(const std::string& text, const std::string& variable) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!config_) throw Error(error_code_, error_);
  // torch's parser, where torch_npu's _set_allocator_settings ends, resets
  // these three to their defaults at every call that does not set them.
  AllocConfig base = *config_;
  const AllocConfig defaults;
  base.max_split_size_bytes = defaults.max_split_size_bytes;
  base.roundup_power2_divisions = defaults.roundup_power2_divisions;
  base.garbage_collection_threshold = defaults.garbage_collection_threshold;
  config_ = apply_alloc_config(base, text, variable);
  return *config_;
}

}  // namespace vnpu
