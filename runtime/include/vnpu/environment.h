// Every environment variable vNPU honours is read here, once, at first use.
// Nothing else in the project calls getenv: other layers ask this struct.
// README.md ("Environment variables") documents each entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vnpu {

// One environment variable the runtime reads: the single list from which the
// README table, the Python bindings and the tests' list are produced
// (torch_npu/_environment.py adds the few variables other layers own).
struct EnvironmentVariable {
  const char* name;
  const char* default_value;  // as the README shows it
  const char* meaning;        // one line, Markdown
};

// Every variable parse_environment() reads, in README order.
const std::vector<EnvironmentVariable>& environment_variables();

struct Environment {
  // --- virtual devices --------------------------------------------------
  int device_count = 8;                       // VNPU_DEVICE_COUNT
  std::optional<std::string> visible_devices; // ASCEND_RT_VISIBLE_DEVICES (raw)
  std::string chip_name;                      // VNPU_CHIP (default Ascend910B2)
  std::optional<std::uint64_t> device_memory_bytes;  // VNPU_DEVICE_MEMORY_MB

  // --- launch queue -----------------------------------------------------
  int task_queue_enable = 1;     // TASK_QUEUE_ENABLE: 0 sync, 1 and 2 async
  bool launch_blocking = false;  // ASCEND_LAUNCH_BLOCKING=1: run kernels inline
  // VNPU_HOST_CORES: the cores the intra-op rule (vnpu/intra_op_threads.h)
  // gives kernels teams from, as on a host of that many cores; 0 (unset):
  // the process's threads, torch.get_num_threads().
  int host_cores = 0;

  // --- framework adaptor switches (consumed by csrc/) -------------------
  bool fallback_cpu_disable = false;   // TORCH_NPU_FALLBACK_CPU_DISABLE=1
  bool compact_error_output = false;   // TORCH_NPU_COMPACT_ERROR_OUTPUT=1
  std::optional<std::string> npu_alloc_conf;  // PYTORCH_NPU_ALLOC_CONF
  std::optional<std::string> alloc_conf;      // PYTORCH_ALLOC_CONF
  bool no_memory_caching = false;      // PYTORCH_NO_NPU_MEMORY_CACHING=1
  // VNPU_SHARED_DEVICE_MEMORY: device memory from the shareable arena
  // (shared_arena.h). "auto" turns it on when torchrun's LOCAL_WORLD_SIZE > 1.
  bool shared_device_memory = false;

  // --- hccl (consumed by csrc/distributed) -------------------------------
  // HCCL_EXEC_TIMEOUT (s): a collective's device-side limit; 0 = none.
  // Collectives give up at the earlier of it and the group's timeout.
  std::optional<std::uint64_t> hccl_exec_timeout_s;
  bool hccl_blocking_wait = false;     // TORCH_HCCL_BLOCKING_WAIT=1: Work.wait() blocks the host
  bool hccl_desync_debug = false;      // TORCH_HCCL_DESYNC_DEBUG=1: ranks compare each collective first
  // TORCH_HCCL_ASYNC_ERROR_HANDLING (0-3, default 1; old name
  // HCCL_ASYNC_ERROR_HANDLING): what a failed collective does when nobody
  // blocks on it. 0: nothing; 1: tear the process down; 2: clean up only
  // (the error reaches the next sync); 3: tear down without clean-up.
  int hccl_async_error_handling = 1;
  bool hccl_async_error_handling_old_name = false;  // set through HCCL_ASYNC_ERROR_HANDLING
  // TORCH_HCCL_ENABLE_MONITORING=1: a monitor thread ends the process when a
  // collective stays stuck TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC (600) past its start.
  bool hccl_enable_monitoring = false;
  std::uint64_t hccl_heartbeat_timeout_s = 600;
  // TORCH_HCCL_COORD_CHECK_MILSEC (1000): how often, with monitoring, a rank
  // looks in the store for another rank's signal to dump its trace.
  std::uint64_t hccl_coord_check_ms = 1000;
  // The flight recorder (csrc/distributed/flight_recorder.h):
  // TORCH_HCCL_TRACE_BUFFER_SIZE collectives kept (0: off);
  // TORCH_HCCL_DUMP_ON_TIMEOUT=1 writes them and the Python stacks to
  // TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank> when a collective times out.
  std::uint64_t hccl_trace_buffer_size = 0;
  bool hccl_dump_on_timeout = false;
  std::string hccl_debug_info_temp_file = "/tmp/hccl_trace_rank_";
  // TORCH_HCCL_DEBUG_INFO_PIPE_FILE: with monitoring and a trace buffer, each
  // rank's <prefix><rank>.pipe; a write to it dumps as above (empty: none).
  std::string hccl_debug_info_pipe_file;
  // TORCH_HCCL_STATUS_SAVE_ENABLE=1: each rank writes its groups' last
  // collectives to TORCH_HCCL_STATUS_SAVE_PATH (/tmp) every
  // TORCH_HCCL_STATUS_SAVE_INTERVAL (2) s, at the end and on a failure
  // (csrc/distributed/status_save.h).
  bool hccl_status_save_enable = false;
  std::string hccl_status_save_path = "/tmp";
  std::uint64_t hccl_status_save_interval_s = 2;
  // NSLB_CP: a directory where each rank records its first
  // NSLB_MAX_RECORD_NUM (1000) collectives' data volumes, for the network's
  // load balancer (csrc/distributed/nslb_record.h); empty: off.
  std::string nslb_cp;
  std::uint64_t nslb_max_record_num = 1000;
  // HCCL_BUFFSIZE (MB, default 200): each rank's staging buffer for the
  // shared-memory transport (hccl_config's hccl_buffer_size overrides).
  std::uint64_t hccl_buffsize_mb = 200;
  // --- aclInit ------------------------------------------------------------
  // ACL_OP_INIT_MODE (0, 1 or 2; 0 on the chips and CANN vNPU reports): how
  // CANN loads its operator libraries; validated, no effect on vNPU.
  int acl_op_init_mode = 0;
  // TORCH_ACL_INIT_CONFIG_PATH: the user's acl.json, checked as real
  // torch_npu checks it before aclInit (it exists and is JSON, without
  // "defaultDevice" in the non-lazy set_device mode of CANN before 8.3).
  std::optional<std::string> acl_init_config_path;

  // --- floating-point overflow mode --------------------------------------
  // Whether the chip computes with IEEE inf/nan (true) or in saturation mode,
  // where an overflow sets the device's float status instead (false): decided
  // from the chip and INF_NAN_MODE_ENABLE / INF_NAN_MODE_FORCE_DISABLE as
  // torch_npu's IsSupportInfNan decides it (inf_nan_mode() in environment.cpp).
  bool inf_nan_mode = true;

  // --- CANN's logging (aclAppLog, ASCEND_LOG* in extensions) ------------
  // ASCEND_GLOBAL_LOG_LEVEL: 0 debug, 1 info, 2 warning, 3 error, 4 none.
  int acl_log_level = 3;

  // --- torch_npu's logs (vnpu/log.h) ----------------------------------
  // TORCH_NPU_LOGS_FILTER: "+kept,-dropped" words over every log line.
  std::string logs_filter;

  // --- hccl sub-communicators ----------------------------------------------
  // ROOTINFO_SUBCOMM_ENABLE=1: a group of some of the world's ranks derives
  // its communicator from the world group's (csrc/distributed/transport.h).
  bool rootinfo_subcomm_enable = false;

  // The raw value of every variable in environment_variables() that is set.
  std::vector<std::pair<std::string, std::string>> raw_values;

  // Problems found while parsing (bad numbers, bad TASK_QUEUE_ENABLE ...).
  // They are reported when the device is first used, never at import, so
  // that is_available()/device_count() stay non-throwing.
  std::vector<std::string> errors;
  // Values replaced by their default, with real torch_npu's warning; the
  // runtime prints them to stderr when it is made.
  std::vector<std::string> warnings;

  // True when kernels must run synchronously on the caller.
  bool synchronous_launch() const {
    return launch_blocking || task_queue_enable == 0;
  }
};

// The process-wide environment, parsed on first call. Thread-safe.
const Environment& environment();

// The process environment parsed as it is now (not cached). The runtime is
// made from it at the first use of a device, not at import, as CUDA and real
// torch_npu read CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES and the
// allocator's PYTORCH_*_ALLOC_CONF: scripts (and spawned workers) set them
// after `import torch_npu`. Device counts asked for before then follow it
// too (Runtime::planned_device_count). environment() is the first parse,
// for the switches read elsewhere (launch mode, hccl, logging).
Environment environment_now();

// RANK as it is now ("" when unset): torchrun's, which torch_npu's log lines
// show; read at each line, since scripts may set it after import.
std::string rank_now();

// Parses an environment from an explicit lookup function; used by tests.
// `lookup` returns nullptr for unset variables.
Environment parse_environment(const char* (*lookup)(const char* name));

}  // namespace vnpu
