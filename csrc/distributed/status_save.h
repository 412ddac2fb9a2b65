// Status files: each rank's last collective per process group, on disk, for
// a job's operators to see where every rank stood (real torch_npu's
// TORCH_HCCL_STATUS_SAVE_ENABLE).
//
// With TORCH_HCCL_STATUS_SAVE_ENABLE=1, every collective's start and end
// update its group's entry (seq, op type, group id, communicator name,
// "start" / "end"); the world group's watchdog writes all entries as one JSON
// file, TORCH_HCCL_STATUS_SAVE_PATH/torch_hccl_status-<global rank>_
// <MASTER_ADDR>_<device>_<world size>_<pid>_<ms of the first write>.log
// ({"last_comm_op": [...], "is_master", "exception_message",
// "global_pg_end_time"}), every TORCH_HCCL_STATUS_SAVE_INTERVAL seconds,
// when the world group ends, and when any collective fails. A file is
// written whole (to .tmp, then renamed); a directory that cannot be made or
// written is warned about, never fatal.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace torch_npu {

// Where a collective's starts and ends go: its group and communicator.
struct StatusKey {
  std::string pg_id, comm_id;
};

class StatusSave {
 public:
  static StatusSave& instance();
  static bool enabled();

  // A collective of group `pg_id` (communicator `comm_id`) started or ended.
  void update(const std::string& pg_id, const std::string& comm_id, uint64_t seq, c10d::OpType type,
              const char* status);
  // The world group names the file: this rank in the world, the world's size, its device.
  void set_world(int global_rank, int world_size, int device);
  // Whether the interval passed since the last write.
  bool due();
  // Writes the file; `end`: the world group is ending; `exception`: a failure's message.
  void write(bool end, const std::string& exception = "");

 private:
  struct Entry {
    uint64_t seq = 0;
    std::string op_type, comm_id, status;
  };
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;  // by group id
  int global_rank_ = 0, world_size_ = 1, device_ = 0;
  std::string exception_;
  int64_t first_write_ms_ = 0;  // 0: no write yet
  std::chrono::steady_clock::time_point last_write_{};
};

}  // namespace torch_npu
