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
  config_ = apply_alloc_config(*config_, text, variable);
  return *config_;
}

}  // namespace vnpu
