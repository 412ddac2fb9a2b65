// The HCCL flight recorder: the last TORCH_HCCL_TRACE_BUFFER_SIZE
// collectives of every ProcessGroupHCCL in the process, with their state
// (scheduled, started, completed), sizes, dtypes and the Python stack that
// issued them, dumped as real torch_npu's HCCLTraceBuffer dumps them
// (format "2.4": pg_config names each group, "group_name_<id>", with its
// global ranks; pg_status gives each group's last enqueued, started and
// completed collective). As in torch_npu, the profiling names of collectives
// are empty, and when a collective started is known only with
// TORCH_HCCL_DESYNC_DEBUG=1 (torch_npu records start events only then), so
// entries go from "scheduled" to "completed" and carry no duration otherwise.
//
// Real torch_npu keeps the same buffer (HCCLTraceBuffer) and dumps it
// through `torch_npu._C._distributed_c10d._dump_hccl_trace` and, with
// TORCH_HCCL_DUMP_ON_TIMEOUT=1, to TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank>
// when a collective times out (watchdog.h). A buffer size of 0 (the default)
// records nothing.
//
// Thread-safety: every method may be called from any thread; the state
// updates come from stream workers.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch {
struct CapturedTraceback;
}

namespace torch_npu {

class FlightRecorder {
 public:
  static FlightRecorder& instance();

  bool enabled() const { return capacity_ > 0; }

  // The caller's Python stack for record() (cheap: symbolized only at a
  // dump), nullptr when the recorder is off. It may take the GIL: call it
  // before taking any lock another thread could wait for holding the GIL.
  std::shared_ptr<torch::CapturedTraceback> gather_stack() const;
  // A group and its global ranks (pg_config).
  void record_pg_ranks(const std::string& pg_name, const std::string& pg_desc, std::vector<uint32_t> ranks);
  // Records one collective as issued; returns its id, or nullopt when the
  // recorder is off.
  std::optional<uint64_t> record(uint64_t pg_id, const std::string& pg_name, const std::string& pg_desc,
                                 uint64_t collective_seq, uint64_t p2p_seq, std::string profiling_name,
                                 const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                                 int64_t timeout_ms, bool is_p2p, std::shared_ptr<torch::CapturedTraceback> stack);
  // The collective's task began / ended (no-op for an id that was
  // overwritten since, or nullopt).
  void started(std::optional<uint64_t> id);
  void completed(std::optional<uint64_t> id);

  // The pickle torch's flight recorder writes (a dict: version, pg_config,
  // pg_status, entries); symbolizing the stacks takes the GIL.
  std::string dump_pickle(bool include_collectives, bool include_stack_traces, bool only_active);
  // The same without stacks, as JSON (sequence numbers in pg_status as
  // strings, undiscovered times 0, no empty entries: torch_npu's JSON).
  std::string dump_json(bool include_collectives, bool only_active);

  struct Entry;

 private:
  FlightRecorder();
  std::vector<Entry> snapshot(bool only_active);
  // The dict both dumps write: version, pg_config, pg_status, entries.
  c10::Dict<c10::IValue, c10::IValue> trace(bool include_collectives, bool include_stack_traces, bool only_active,
                                            bool as_json);
  Entry* find(uint64_t id);  // mutex_ held

  struct GroupConfig {
    std::string desc;
    std::vector<uint32_t> ranks;
  };
  struct GroupStatus {  // collective sequence numbers; -1: none yet
    int64_t last_enqueued = -1, last_started = -1, last_completed = -1;
  };

  const size_t capacity_;
  const bool records_starts_;  // TORCH_HCCL_DESYNC_DEBUG=1
  std::map<std::string, GroupConfig> groups_;  // by name; guarded by mutex_
  std::map<uint64_t, GroupStatus> status_;     // by pg id; guarded by mutex_
  std::mutex mutex_;
  std::vector<Entry> entries_;  // a ring once full
  size_t next_ = 0;             // where the next entry goes once full
  uint64_t next_id_ = 0;
};

struct FlightRecorder::Entry {
  uint64_t id = 0;
  uint64_t pg_id = 0;
  std::string pg_name, pg_desc;
  uint64_t collective_seq = 0, p2p_seq = 0;
  std::string profiling_name;
  std::shared_ptr<torch::CapturedTraceback> traceback;
  int64_t time_created_ns = 0;
  int64_t timeout_ms = 0;
  bool is_p2p = false;
  std::optional<int64_t> started_ns, completed_ns;
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  std::string thread_id, thread_name;
};

// Writes the trace (when the recorder is on) to
// TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank> and the Python stacks of every
// thread to ...<rank>_py_traceback, as real torch_npu does on a timeout.
// Waits up to `wait` (the dump needs the GIL; it finishes in the background
// after that; 0: not at all). Returns whether the trace was written in time.
bool dump_debug_info(int rank, std::chrono::milliseconds wait);

// How the Python stacks are written (set by the Python bindings: this
// layer has no Python); called with the file's path.
using PythonStackDumper = void (*)(const std::string& path);
void set_python_stack_dumper(PythonStackDumper dumper);

}  // namespace torch_npu
