// c10_npu::NPUStream: torch_npu's stream handle for extensions.
//
// An NPUStream wraps a c10::Stream of device type npu (PrivateUse1). Its
// aclrtStream (stream()) is the virtual device's runtime stream, accepted by
// the ACL runtime API (acl_rt.h): work an extension queues there is ordered
// with torch's kernels on that stream. Ids with bit 30 set name streams made
// by aclrtCreateStream and wrapped by getStreamFromExternal; as in torch_npu,
// query(), synchronize(), event record/block and graph capture refuse them
// (synchronize them with aclrtSynchronizeStream).
//
// Thread-safety: every function may be called from any thread; the current
// stream is per thread and per device.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "third_party/acl/inc/acl/acl_rt.h"
#include "torch_npu/csrc/core/npu/NPUException.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10_npu {

class C10_NPU_API NPUStream {
 public:
  enum Unchecked { UNCHECKED };

  // Checks that `stream` is an npu stream.
  explicit NPUStream(c10::Stream stream);
  explicit NPUStream(Unchecked, c10::Stream stream) : stream_(stream) {}
  ~NPUStream() = default;

  bool operator==(const NPUStream& other) const noexcept { return unwrap() == other.unwrap(); }
  bool operator!=(const NPUStream& other) const noexcept { return unwrap() != other.unwrap(); }

  operator aclrtStream() const { return stream(); }
  operator c10::Stream() const { return unwrap(); }

  c10::DeviceType device_type() const { return c10::DeviceType::PrivateUse1; }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::Device device() const { return c10::Device(c10::DeviceType::PrivateUse1, device_index()); }
  c10::StreamId id() const { return stream_.id(); }

  // True when all work queued so far has completed. Raises for an external stream.
  bool query() const;
  // Raises unless this names a live stream of a valid device.
  void validate() const;
  // Blocks until all queued work has completed; raises the first error a
  // kernel reported. Raises for an external stream.
  void synchronize() const;
  // The runtime stream, as the ACL runtime API takes it.
  aclrtStream stream() const;
  aclrtStream stream(const bool need_empty) const { return stream(); }

  c10::Stream unwrap() const { return stream_; }
  c10::StreamData3 pack3() const { return stream_.pack3(); }
  static NPUStream unpack3(c10::StreamId stream_id, c10::DeviceIndex device_index, c10::DeviceType device_type) {
    NPUStream s(c10::Stream::unpack3(stream_id, device_index, device_type));
    s.validate();
    return s;
  }

  // A stream from getNPUStreamFromSyncLaunchPool: its tasks run as they are
  // launched.
  bool isSyncLaunchStream() const;
  void setDataPreprocessStream(bool is_data_preprocess_stream) { data_preprocess_ = is_data_preprocess_stream; }
  bool isDataPreprocessStream() { return data_preprocess_; }

 private:
  c10::Stream stream_;
  bool data_preprocess_ = false;
};

// A stream from the pool of `device` (-1: the current device), round robin.
C10_NPU_API NPUStream getNPUStreamFromPool(c10::DeviceIndex device = -1);
C10_NPU_API NPUStream getStreamFromPool(const bool isHighPriority, c10::DeviceIndex device_index);
C10_NPU_API NPUStream getStreamFromPool(const int priority, c10::DeviceIndex device = -1);
// One of the device's 4 sync-launch streams, round-robin.
C10_NPU_API NPUStream getNPUStreamFromSyncLaunchPool(c10::DeviceIndex device_index = -1);
C10_NPU_API NPUStream getDefaultNPUStream(c10::DeviceIndex device_index = -1);
C10_NPU_API NPUStream getCurrentNPUStream(c10::DeviceIndex device_index = -1);
// The same work as getCurrentNPUStream(device).stream().
C10_NPU_API aclrtStream getCurrentNPUStreamNoWait(c10::DeviceIndex device_index = -1);
// Wraps a stream made by aclrtCreateStream (the same acl stream gives the
// same NPUStream). Raises for a handle that is not a stream of device_index.
C10_NPU_API NPUStream getStreamFromExternal(aclrtStream stream, c10::DeviceIndex device_index);
C10_NPU_API void setCurrentNPUStream(NPUStream stream);
// Waits for every stream of the current device; false (with a warning) when
// a kernel failed and check_error is false, raises when it is true.
C10_NPU_API bool npuSynchronizeDevice(bool check_error = true);
C10_NPU_API bool npuSynchronizeUsedDevices(bool check_error = true);

C10_NPU_API std::ostream& operator<<(std::ostream& stream, const NPUStream& s);

}  // namespace c10_npu

namespace std {
template <>
struct hash<c10_npu::NPUStream> {
  size_t operator()(c10_npu::NPUStream s) const noexcept { return std::hash<c10::Stream>{}(s.unwrap()); }
};
}  // namespace std
