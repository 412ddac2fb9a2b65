// BusyClock: for how long any stream of a device had work running, the
// device's "utilization" (torch.npu.utilization, like NVML's: the share of
// time one or more kernels executed).
//
// A stream's worker calls begin() when it takes up a batch of queued tasks
// and end() when the queue is empty again: two clock reads per batch, not per
// task, so a busy stream pays nothing per kernel.
//
// Thread-safety: every method may be called from any thread. A clock has a
// cache line of its own: workers write it once per batch, and a host that
// keeps a worker just busy makes every task a batch (Note [Lines of one
// writer], stream.h).
#pragma once

#include <cstdint>
#include <mutex>

namespace vnpu {

class alignas(64) BusyClock {
 public:
  BusyClock();
  void begin();
  void end();
  // Nanoseconds with at least one stream busy since construction, including
  // the busy period under way.
  std::int64_t busy_ns() const;
  std::int64_t created_ns() const { return created_ns_; }

 private:
  mutable std::mutex mutex_;
  int active_ = 0;             // streams in a batch now
  std::int64_t since_ns_ = 0;  // start of the busy period under way
  std::int64_t total_ns_ = 0;  // of the busy periods that ended
  const std::int64_t created_ns_;
};

}  // namespace vnpu
