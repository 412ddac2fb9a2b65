// RAII guards that set the current npu device or stream and restore it, as
// c10::cuda's CUDAGuard family does for CUDA.
#pragma once

#include <optional>
#include <vector>

#include <c10/core/DeviceType.h>
#include <c10/core/impl/InlineDeviceGuard.h>
#include <c10/core/impl/InlineStreamGuard.h>
#include <c10/util/ArrayRef.h>

#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/core/npu/impl/NPUGuardImpl.h"

namespace c10_npu {

// Sets the current device for its scope.
struct NPUGuard {
  explicit NPUGuard() = delete;
  explicit NPUGuard(c10::DeviceIndex device_index) : guard_(device_index) {}
  explicit NPUGuard(c10::Device device) : guard_(device) {}
  NPUGuard(const NPUGuard&) = delete;
  NPUGuard& operator=(const NPUGuard&) = delete;
  NPUGuard(NPUGuard&& other) = delete;
  NPUGuard& operator=(NPUGuard&& other) = delete;

  void set_device(c10::Device device) { guard_.set_device(device); }
  void reset_device(c10::Device device) { guard_.reset_device(device); }
  void set_index(c10::DeviceIndex device_index) { guard_.set_index(device_index); }
  c10::Device original_device() const { return guard_.original_device(); }
  c10::Device current_device() const { return guard_.current_device(); }

 private:
  c10::impl::InlineDeviceGuard<impl::NPUGuardImpl> guard_;
};

// NPUGuard that may hold no device (then it does nothing).
struct OptionalNPUGuard {
  explicit OptionalNPUGuard() : guard_() {}
  explicit OptionalNPUGuard(std::optional<c10::Device> device_opt) : guard_(device_opt) {}
  explicit OptionalNPUGuard(std::optional<c10::DeviceIndex> device_index_opt) : guard_(device_index_opt) {}
  OptionalNPUGuard(const OptionalNPUGuard&) = delete;
  OptionalNPUGuard& operator=(const OptionalNPUGuard&) = delete;
  OptionalNPUGuard(OptionalNPUGuard&& other) = delete;
  OptionalNPUGuard& operator=(OptionalNPUGuard&& other) = delete;

  void set_device(c10::Device device) { guard_.set_device(device); }
  void reset_device(c10::Device device) { guard_.reset_device(device); }
  void set_index(c10::DeviceIndex device_index) { guard_.set_index(device_index); }
  std::optional<c10::Device> original_device() const { return guard_.original_device(); }
  std::optional<c10::Device> current_device() const { return guard_.current_device(); }
  void reset() { guard_.reset(); }

 private:
  c10::impl::InlineOptionalDeviceGuard<impl::NPUGuardImpl> guard_;
};

// Sets the current stream (and its device) for its scope.
struct NPUStreamGuard {
  explicit NPUStreamGuard() = delete;
  explicit NPUStreamGuard(c10::Stream stream) : guard_(stream) {}
  NPUStreamGuard(const NPUStreamGuard&) = delete;
  NPUStreamGuard& operator=(const NPUStreamGuard&) = delete;
  NPUStreamGuard(NPUStreamGuard&& other) = delete;
  NPUStreamGuard& operator=(NPUStreamGuard&& other) = delete;

  void reset_stream(c10::Stream stream) { guard_.reset_stream(stream); }
  NPUStream original_stream() const { return NPUStream(NPUStream::UNCHECKED, guard_.original_stream()); }
  NPUStream current_stream() const { return NPUStream(NPUStream::UNCHECKED, guard_.current_stream()); }
  c10::Device current_device() const { return guard_.current_device(); }
  c10::Device original_device() const { return guard_.original_device(); }

 private:
  c10::impl::InlineStreamGuard<impl::NPUGuardImpl> guard_;
};

struct OptionalNPUStreamGuard {
  explicit OptionalNPUStreamGuard() : guard_() {}
  explicit OptionalNPUStreamGuard(c10::Stream stream) : guard_(stream) {}
  explicit OptionalNPUStreamGuard(std::optional<c10::Stream> stream_opt) : guard_(stream_opt) {}
  OptionalNPUStreamGuard(const OptionalNPUStreamGuard&) = delete;
  OptionalNPUStreamGuard& operator=(const OptionalNPUStreamGuard&) = delete;
  OptionalNPUStreamGuard(OptionalNPUStreamGuard&& other) = delete;
  OptionalNPUStreamGuard& operator=(OptionalNPUStreamGuard&& other) = delete;

  void reset_stream(c10::Stream stream) { guard_.reset_stream(stream); }
  std::optional<NPUStream> original_stream() const {
    auto r = guard_.original_stream();
    if (!r.has_value()) return std::nullopt;
    return NPUStream(NPUStream::UNCHECKED, r.value());
  }
  std::optional<NPUStream> current_stream() const {
    auto r = guard_.current_stream();
    if (!r.has_value()) return std::nullopt;
    return NPUStream(NPUStream::UNCHECKED, r.value());
  }
  void reset() { guard_.reset(); }

 private:
  c10::impl::InlineOptionalStreamGuard<impl::NPUGuardImpl> guard_;
};

// Sets the current stream of several devices for its scope.
struct NPUMultiStreamGuard {
  explicit NPUMultiStreamGuard(c10::ArrayRef<NPUStream> streams) : guard_(unwrapStreams(streams)) {}
  NPUMultiStreamGuard(const NPUMultiStreamGuard&) = delete;
  NPUMultiStreamGuard& operator=(const NPUMultiStreamGuard&) = delete;
  NPUMultiStreamGuard(NPUMultiStreamGuard&& other) = delete;
  NPUMultiStreamGuard& operator=(NPUMultiStreamGuard&& other) = delete;

 private:
  c10::impl::InlineMultiStreamGuard<impl::NPUGuardImpl> guard_;

  static std::vector<c10::Stream> unwrapStreams(c10::ArrayRef<NPUStream> npu_streams) {
    std::vector<c10::Stream> streams;
    streams.reserve(npu_streams.size());
    for (const NPUStream& npu_stream : npu_streams) streams.push_back(npu_stream);
    return streams;
  }
};

}  // namespace c10_npu
