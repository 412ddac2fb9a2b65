// The only translation unit that reads the process environment.
#include "vnpu/environment.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "vnpu/chip_profile.h"
#include "vnpu/error.h"
#include "vnpu/json_check.h"

namespace vnpu {
namespace {

constexpr int kMaxDeviceCount = 64;

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const auto begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(ws);
  return s.substr(begin, end - begin + 1);
}

// Parses a non-negative decimal integer (surrounding blanks allowed).
// Returns false for anything else, including overflow, signs and "1e3".
bool parse_unsigned(const std::string& raw, std::uint64_t* out) {
  const std::string s = trim(raw);
  if (s.empty()) return false;
  std::uint64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

std::string quoted(const char* value) { return std::string("'") + value + "'"; }

std::string known_chip_names() {
  std::string names;
  for (const ChipProfile& profile : known_chip_profiles()) {
    if (!names.empty()) names += ", ";
    names += profile.name;
  }
  return names;
}

// Reads a variable, treating an empty value like an unset one. Used for the
// numeric and boolean switches, where `VAR= cmd` is a common way to unset.
const char* lookup_nonempty(const char* (*lookup)(const char*), const char* name) {
  const char* value = lookup(name);
  if (value == nullptr || trim(value).empty()) return nullptr;
  return value;
}

bool is_one(const char* value) { return value != nullptr && trim(value) == "1"; }

std::optional<std::string> raw(const char* (*lookup)(const char*), const char* name) {
  const char* value = lookup(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

const char* process_lookup(const char* name) { return std::getenv(name); }

bool is_documented(const char* name) {
  for (const EnvironmentVariable& v : environment_variables()) {
    if (std::strcmp(v.name, name) == 0) return true;
  }
  return false;
}

}  // namespace

const std::vector<EnvironmentVariable>& environment_variables() {
  static const std::vector<EnvironmentVariable> variables = {
      {"VNPU_DEVICE_COUNT", "8", "number of virtual NPUs (0-64)"},
      {"ASCEND_RT_VISIBLE_DEVICES", "all",
       "comma-separated physical ids to expose, renumbered from 0 (like `CUDA_VISIBLE_DEVICES`); "
       "naming a missing device is an error; read at the first device use, so a script may set it after "
       "`import torch_npu`"},
      {"VNPU_CHIP", "`Ascend910B2`",
       "chip profile: Ascend910B1-B4, Ascend910_9391/9392, Ascend910A, Ascend310P3, Ascend950"},
      {"VNPU_DEVICE_MEMORY_MB", "chip's HBM", "device capacity override"},
      {"TASK_QUEUE_ENABLE", "1",
       "0: run kernels synchronously on the caller; 1 or 2: asynchronous launch queue; anything "
       "else: \"TASK_QUEUE_ENABLE should be 0, 1 or 2\""},
      {"ASCEND_LAUNCH_BLOCKING", "0", "1: synchronous kernels, errors raised at the failing call"},
      {"VNPU_HOST_CORES", "torch.get_num_threads()",
       "the core count (1-1024) from which each kernel's thread team is chosen, as on a host of that many cores: "
       "a kernel under 32768 elements runs on 1 thread, a larger one on cores - 1 beside a working host, one of "
       "262144 elements or more on all of them while the host waits for the device (docs/architecture.md, "
       "\"Intra-op threads in stage 2\"); for reproducing another machine's teams and testing the rule. Profiles show each "
       "kernel's team as its `Block Num`"},
      {"TORCH_NPU_FALLBACK_CPU_DISABLE", "0",
       "1: ops without an npu kernel raise instead of falling back to the CPU"},
      {"TORCH_NPU_COMPACT_ERROR_OUTPUT", "0",
       "1: drop torch_npu's `[ERROR] ... ERR00001 PTA ...` suffix from error messages"},
      {"PYTORCH_NO_NPU_MEMORY_CACHING", "0", "1: return every block to the device at free (debugging)"},
      {"PYTORCH_NPU_ALLOC_CONF", "unset",
       "caching allocator options `max_split_size_mb`, `max_non_split_rounding_mb` (how much bigger than a request "
       "of `max_split_size_mb` or more a cached unsplittable block may be, >= 20, default 20), `garbage_collection_threshold`, "
       "`roundup_power2_divisions`, `expandable_segments` (`True` warns once and allocates ordinary segments "
       "of whole `segment_size_mb` granules, 20 MiB by default, as an expandable segment maps them), "
       "`per_process_memory_fraction`, `large_segment_size_mb` (the segment of a 1-10 MiB request, 20 MiB by "
       "default; > 10 and at most `max_split_size_mb`), `throw_on_npumalloc_oom` (`True`: a request that would take the allocated "
       "bytes past the fraction is refused at once, counted in `memory_stats()['num_oom_rejections']`), the "
       "pinned host allocator's `pinned_max_round_threshold_mb` (larger requests are not rounded up to a power "
       "of two), `pinned_max_cached_size_mb` (larger freed blocks are not cached), "
       "`pinned_reserve_segment_size_mb` (MiB reserved at the first pinned allocation, which later requests are "
       "carved from until it is used up) and `pinned_use_background_threads` (`True`: a helper thread collects "
       "freed pinned blocks as their streams complete, polling every 100 us, instead of the next allocation), and "
       "torch_npu's Ascend tuning options (`multi_stream_lazy_reclaim`, "
       "`base_addr_aligned_kb`, `page_size`, `release_lock_on_npumalloc`: validated, no "
       "effect on the virtual NPU; `segment_size_mb`: the granule of `expandable_segments`; "
       "`pin_memory_expandable_segments`, `pinned_mem_register`: turned off with "
       "real torch_npu's warning for CANN before 8.5, which vNPU reports); unknown "
       "keys, bad values or both variables set raise at the first allocation. Read at the first use of a "
       "device, so it may be set after `import torch_npu`. "
       "`torch_npu.npu.memory._set_allocator_settings(...)` changes, as torch_npu's, only `expandable_segments`, "
       "`max_split_size_mb`, `max_non_split_rounding_mb`, `release_lock_on_npumalloc`, `throw_on_npumalloc_oom`, "
       "`per_process_memory_fraction` and the two `pinned_max_*` options at run time"},
      {"PYTORCH_ALLOC_CONF", "unset", "PyTorch's name for `PYTORCH_NPU_ALLOC_CONF` (the same options)"},
      {"VNPU_SHARED_DEVICE_MEMORY", "auto",
       "1: device memory comes from one memfd that the other ranks of the host map, so hccl collectives "
       "read peers' buffers directly and npu tensors sent through `torch.multiprocessing` alias the sender's "
       "memory; 0: private host memory; auto: 1 when `LOCAL_WORLD_SIZE` > 1"},
      {"LOCAL_WORLD_SIZE", "unset", "set by torchrun: ranks on this host (read for `VNPU_SHARED_DEVICE_MEMORY=auto`)"},
      {"RANK", "unset", "set by torchrun: the rank torch_npu's log lines show (`[rank:N]`), read at each line"},
      {"HCCL_EXEC_TIMEOUT", "unset (1836)",
       "seconds a collective may run before it fails with the watchdog error (the group's timeout also "
       "applies, the earlier wins); 0: no limit beyond the group's"},
      {"TORCH_HCCL_BLOCKING_WAIT", "0",
       "1: `Work.wait()` blocks the host until the collective finished and raises its error there"},
      {"TORCH_HCCL_DESYNC_DEBUG", "0",
       "1: before each shared-memory collective the ranks compare what they run (op, dtype, element count) "
       "and a mismatch raises, naming both"},
      {"TORCH_HCCL_ASYNC_ERROR_HANDLING", "1",
       "a collective that failed (timeout, dead peer) while no `wait()` blocks on it: 0 nothing (the error "
       "reaches the next sync), 1 print the error and end the process, 2 clean up only (as 0 here), 3 as 1; "
       "`TORCH_HCCL_BLOCKING_WAIT=1` overrides it"},
      {"HCCL_ASYNC_ERROR_HANDLING", "unset",
       "old name of `TORCH_HCCL_ASYNC_ERROR_HANDLING`, read with a deprecation warning when the new one is unset"},
      {"TORCH_HCCL_ENABLE_MONITORING", "0",
       "1: the world group's heartbeat monitor: with no collective in flight for "
       "`TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC` it logs that the watchdog had no heartbeat and, with "
       "`TORCH_HCCL_DUMP_ON_TIMEOUT=1`, dumps the trace and goes on (as torch_npu's); it also reads the dump pipe "
       "(`TORCH_HCCL_DEBUG_INFO_PIPE_FILE`) and looks for other ranks' dump signal (`TORCH_HCCL_COORD_CHECK_MILSEC`)"},
      {"TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC", "600",
       "seconds without a collective in flight after which the heartbeat monitor reports no heartbeat"},
      {"TORCH_HCCL_COORD_CHECK_MILSEC", "1000",
       "with monitoring on, how often (ms) a rank looks in the store for another rank's signal to dump its flight "
       "recorder (a rank whose collective failed signals the others when `TORCH_HCCL_DUMP_ON_TIMEOUT=1`)"},
      {"TORCH_HCCL_TRACE_BUFFER_SIZE", "0",
       "collectives the flight recorder keeps (all process groups together); 0: off. "
       "`torch_npu._C._distributed_c10d._dump_hccl_trace()` returns them in torch's flight-recorder pickle"},
      {"TORCH_HCCL_DUMP_ON_TIMEOUT", "0",
       "1: when a collective fails (times out, finds a peer gone, mismatches), or has run "
       "`max(60, HCCL_EXEC_TIMEOUT - 60)` s, write the flight "
       "recorder's trace to `TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank>` and every thread's Python stack to "
       "`...<rank>_py_traceback`"},
      {"TORCH_HCCL_DEBUG_INFO_TEMP_FILE", "/tmp/hccl_trace_rank_", "path prefix of the dumps above"},
      {"TORCH_HCCL_DEBUG_INFO_PIPE_FILE", "unset",
       "path prefix of a named pipe per rank (`<prefix><rank>.pipe`, made by the world group with "
       "`TORCH_HCCL_ENABLE_MONITORING=1` and a trace buffer); writing to it dumps that rank's trace and stacks "
       "as above, and the job goes on"},
      {"TORCH_HCCL_STATUS_SAVE_ENABLE", "0",
       "1: each rank writes its process groups' last collectives (seq, op type, group, comm name, start/end) as "
       "JSON to `TORCH_HCCL_STATUS_SAVE_PATH/torch_hccl_status-<rank>_<MASTER_ADDR>_<device>_<world size>_<pid>_"
       "<ms>.log`, every `TORCH_HCCL_STATUS_SAVE_INTERVAL` s, when the world group ends and when a collective "
       "fails, as torch_npu does"},
      {"TORCH_HCCL_STATUS_SAVE_PATH", "/tmp", "directory of the status files above (made if missing)"},
      {"TORCH_HCCL_STATUS_SAVE_INTERVAL", "2", "seconds between status writes (a positive integer)"},
      {"NSLB_CP", "unset",
       "directory where each rank appends its first `NSLB_MAX_RECORD_NUM` collectives' data volumes to "
       "`<MASTER_ADDR>_<comm name>_<RANK>.log` and then writes `end_<MASTER_ADDR>_<pid>.log`, as torch_npu does "
       "for the network's load balancer (NSLB)"},
      {"NSLB_MAX_RECORD_NUM", "1000", "how many collectives `NSLB_CP` records per process"},
      {"HCCL_BUFFSIZE", "200",
       "MB of staging buffer per rank for the shared-memory transport (a positive integer; `hccl_config`'s "
       "`hccl_buffer_size` overrides it)"},
      {"INF_NAN_MODE_ENABLE", "1",
       "0: saturation mode (overflows set the float status that `npu_get_float_status` and AMP's unscale "
       "read); allowed on the 910B / 910_93 profiles only with `INF_NAN_MODE_FORCE_DISABLE=1` (torch_npu's "
       "error otherwise); the 910A and 310P profiles are always in saturation mode, the 950 never"},
      {"INF_NAN_MODE_FORCE_DISABLE", "0", "1: saturation mode on the chips that default to inf/nan mode"},
      {"ACL_OP_INIT_MODE", "0",
       "CANN's operator-library loading mode (0, 1 or 2): validated, no effect on vNPU; another value gets real "
       "torch_npu's warning \"Get env ACL_OP_INIT_MODE not in [0, 1, 2], so reset it to the default value 0.\""},
      {"TORCH_ACL_INIT_CONFIG_PATH", "unset",
       "the user's acl.json for aclInit: checked at the first device use as real torch_npu checks it (the path "
       "exists, the file opens and is JSON, and has no `defaultDevice` member, which CANN before 8.3 does not "
       "take); its settings (dump, profiling) have no effect on vNPU"},
      {"ASCEND_GLOBAL_LOG_LEVEL", "3",
       "CANN's log level for `ASCEND_LOGE/W/I/D` and `aclAppLog` in extensions: 0 debug, 1 info, 2 warning, "
       "3 error, 4 none; messages at or above it go to stderr"},
      {"TORCH_NPU_LOGS_FILTER", "unset",
       "filters torch_npu's log lines (`TORCH_NPU_LOGS`): `-word` drops lines that hold it, then, if any `+word` is "
       "given, only lines holding one of those are kept (`+aclnnMatmul,-aclnnAdd`; case-sensitive substrings); "
       "read whenever the log levels are set (at import, `torch._logging.set_logs`, `_LogContext.setLogs`)"},
      {"ROOTINFO_SUBCOMM_ENABLE", "0",
       "1: a process group of some of the world's ranks derives its communicator from the world group's (it "
       "takes the ranks' hosts from it instead of exchanging them through the store) and logs torch_npu's "
       "\"Create sub hccl comm by hcclCreateSubCommConfig success\" at the first collective (`torch.distributed` "
       "logger at INFO); read when a group is made"},
  };
  return variables;
}

namespace {
// The lookup of the parse in progress; every read goes through it so that
// only documented variables are read and each raw value is recorded.
thread_local const char* (*t_lookup)(const char*) = nullptr;
thread_local Environment* t_parsing = nullptr;

const char* documented_lookup(const char* name) {
  VNPU_ASSERT(is_documented(name), std::string("environment variable ") + name +
                                       " is read but missing from environment_variables()");
  const char* value = t_lookup(name);
  if (value != nullptr) t_parsing->raw_values.emplace_back(name, value);
  return value;
}
}  // namespace

namespace {

// Real torch_npu's checks of the user's acl.json (its words, for a vNPU
// whose CANN is before 8.3: set_device is not lazy). "" when it passes.
std::string check_acl_init_config(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    return "TORCH_ACL_INIT_CONFIG_PATH " + path + " is invalid. Please set the environment variable "
           "'TORCH_ACL_INIT_CONFIG_PATH' to a valid JSON config file path.";
  }
  std::ifstream file(resolved);
  if (!file.is_open()) {
    return std::string("Failed to open user acl json ") + resolved +
           ". Please ensure the file exists and has read permission.";
  }
  std::stringstream text;
  text << file.rdbuf();
  std::vector<std::string> keys;
  std::string error;
  if (!check_json(text.str(), &keys, &error)) {
    return std::string("Failed to parse user acl json ") + resolved +
           ". Please check that the file contains valid JSON syntax. Error: " + error;
  }
  for (const std::string& key : keys) {
    if (key == "defaultDevice") {
      return std::string("User acl json ") + resolved +
             " contains 'defaultDevice' which is not expected in non-lazy set_device mode. Please remove the "
             "'defaultDevice' field from your JSON config.";
    }
  }
  return "";
}

// torch_npu's IsSupportInfNan (NpuVariables.cpp): the 950 computes with
// inf/nan only; the 910B and 910_93 families do by default and may be forced
// into saturation mode; older chips (910A, 310P) have saturation mode only.
bool inf_nan_mode(const char* (*lookup)(const char*), const std::string& chip_name,
                  std::vector<std::string>* errors) {
  auto flag = [&](const char* name, bool fallback) {
    const char* v = lookup_nonempty(lookup, name);
    if (v == nullptr) return fallback;
    const std::string s = trim(v);
    if (s != "0" && s != "1") {
      errors->push_back(std::string(name) + " should be 0 or 1.");
      return fallback;
    }
    return s == "1";
  };
  const bool enable = flag("INF_NAN_MODE_ENABLE", true);
  const bool force_disable = flag("INF_NAN_MODE_FORCE_DISABLE", false);
  const ChipProfile* chip = find_chip_profile(chip_name);
  const int soc = chip != nullptr ? chip->soc_version : 0;
  if (soc >= 260) return true;  // Ascend950: the variables are ignored
  const bool by_default = (soc >= 220 && soc < 240) || soc >= 250;
  if (!enable) {
    if (by_default && !force_disable) {
      errors->push_back(
          "INF_NAN_MODE_ENABLE shouldn't be set to 0 on the current device. If you want to disable inf-nan mode, "
          "please export INF_NAN_MODE_FORCE_DISABLE=1");
    }
    return false;
  }
  if (force_disable) return false;
  return by_default;
}

}  // namespace

Environment parse_environment(const char* (*raw_lookup)(const char* name)) {
  Environment env;
  env.chip_name = default_chip_name();
  t_lookup = raw_lookup;
  t_parsing = &env;
  const char* (*lookup)(const char*) = &documented_lookup;

  if (const char* v = lookup_nonempty(lookup, "VNPU_DEVICE_COUNT")) {
    std::uint64_t count = 0;
    if (parse_unsigned(v, &count) && count <= static_cast<std::uint64_t>(kMaxDeviceCount)) {
      env.device_count = static_cast<int>(count);
    } else {
      env.errors.push_back("VNPU_DEVICE_COUNT must be an integer between 0 and " +
                           std::to_string(kMaxDeviceCount) + ", got " + quoted(v));
    }
  }

  // Kept raw: the runtime validates it against the device count.
  env.visible_devices = raw(lookup, "ASCEND_RT_VISIBLE_DEVICES");

  if (const char* v = lookup_nonempty(lookup, "VNPU_CHIP")) {
    if (const ChipProfile* profile = find_chip_profile(trim(v))) {
      env.chip_name = profile->name;  // canonical spelling
    } else {
      env.errors.push_back("VNPU_CHIP names unknown chip " + quoted(v) +
                           "; known chips: " + known_chip_names());
    }
  }

  if (const char* v = lookup_nonempty(lookup, "VNPU_DEVICE_MEMORY_MB")) {
    constexpr std::uint64_t kMiB = 1024ull * 1024ull;
    std::uint64_t mb = 0;
    if (parse_unsigned(v, &mb) && mb > 0 &&
        mb <= std::numeric_limits<std::uint64_t>::max() / kMiB) {
      env.device_memory_bytes = mb * kMiB;
    } else {
      env.errors.push_back("VNPU_DEVICE_MEMORY_MB must be a positive integer (MiB), got " +
                           quoted(v));
    }
  }

  if (const char* v = lookup_nonempty(lookup, "TASK_QUEUE_ENABLE")) {
    const std::string s = trim(v);
    if (s == "0" || s == "1" || s == "2") {
      env.task_queue_enable = s[0] - '0';
    } else {
      // torch_npu's wording, with the offending value appended.
      env.errors.push_back("TASK_QUEUE_ENABLE should be 0, 1 or 2, but got " + quoted(v));
    }
  }

  if (const char* v = lookup_nonempty(lookup, "ASCEND_LAUNCH_BLOCKING")) {
    const std::string s = trim(v);
    if (s == "0" || s == "1") {
      env.launch_blocking = s == "1";
    } else {
      env.errors.push_back("ASCEND_LAUNCH_BLOCKING should be 0 or 1, but got " + quoted(v));
    }
  }

  if (const char* v = lookup_nonempty(lookup, "VNPU_HOST_CORES")) {
    std::uint64_t cores = 0;
    if (parse_unsigned(v, &cores) && cores >= 1 && cores <= 1024) {
      env.host_cores = static_cast<int>(cores);
    } else {
      env.errors.push_back("VNPU_HOST_CORES must be an integer between 1 and 1024 (the cores kernels' thread teams "
                           "are chosen from), got " + quoted(v));
    }
  }

  env.fallback_cpu_disable = is_one(lookup("TORCH_NPU_FALLBACK_CPU_DISABLE"));
  env.compact_error_output = is_one(lookup("TORCH_NPU_COMPACT_ERROR_OUTPUT"));
  env.no_memory_caching = is_one(lookup("PYTORCH_NO_NPU_MEMORY_CACHING"));
  env.npu_alloc_conf = raw(lookup, "PYTORCH_NPU_ALLOC_CONF");
  env.alloc_conf = raw(lookup, "PYTORCH_ALLOC_CONF");
  {
    const char* v = lookup_nonempty(lookup, "VNPU_SHARED_DEVICE_MEMORY");
    const std::string mode = v != nullptr ? trim(v) : "auto";
    const char* ranks = lookup_nonempty(lookup, "LOCAL_WORLD_SIZE");
    if (mode == "auto") {
      std::uint64_t local_ranks = 0;
      env.shared_device_memory = ranks != nullptr && parse_unsigned(ranks, &local_ranks) && local_ranks > 1;
    } else if (mode == "0" || mode == "1") {
      env.shared_device_memory = mode == "1";
    } else {
      env.errors.push_back("VNPU_SHARED_DEVICE_MEMORY should be 0, 1 or auto, but got " + quoted(v));
    }
  }

  if (const char* v = lookup_nonempty(lookup, "HCCL_EXEC_TIMEOUT")) {
    std::uint64_t seconds = 0;
    if (parse_unsigned(v, &seconds) && seconds <= 17340) {  // CANN's range: 0-17340 s
      env.hccl_exec_timeout_s = seconds;
    } else {
      env.errors.push_back("HCCL_EXEC_TIMEOUT must be an integer number of seconds between 0 and 17340, got " +
                           quoted(v));
    }
  }
  env.hccl_blocking_wait = is_one(lookup("TORCH_HCCL_BLOCKING_WAIT"));
  env.hccl_desync_debug = is_one(lookup("TORCH_HCCL_DESYNC_DEBUG"));

  const char* handling = lookup_nonempty(lookup, "TORCH_HCCL_ASYNC_ERROR_HANDLING");
  const char* handling_old = lookup_nonempty(lookup, "HCCL_ASYNC_ERROR_HANDLING");
  if (handling == nullptr && handling_old != nullptr) {
    handling = handling_old;
    env.hccl_async_error_handling_old_name = true;
  }
  if (handling != nullptr) {
    std::uint64_t mode = 0;
    if (parse_unsigned(handling, &mode) && mode <= 3) {
      env.hccl_async_error_handling = static_cast<int>(mode);
    } else {
      env.errors.push_back("TORCH_HCCL_ASYNC_ERROR_HANDLING should be 0, 1, 2 or 3, but got " + quoted(handling));
    }
  }
  env.hccl_enable_monitoring = is_one(lookup("TORCH_HCCL_ENABLE_MONITORING"));
  if (const char* v = lookup_nonempty(lookup, "TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC")) {
    std::uint64_t seconds = 0;
    if (parse_unsigned(v, &seconds) && seconds > 0) {
      env.hccl_heartbeat_timeout_s = seconds;
    } else {
      env.errors.push_back("TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC must be a positive number of seconds, got " + quoted(v));
    }
  }
  if (const char* v = lookup_nonempty(lookup, "TORCH_HCCL_COORD_CHECK_MILSEC")) {
    if (!parse_unsigned(v, &env.hccl_coord_check_ms) || env.hccl_coord_check_ms == 0) {
      env.errors.push_back("TORCH_HCCL_COORD_CHECK_MILSEC must be a positive number of milliseconds, got " +
                           quoted(v));
      env.hccl_coord_check_ms = 1000;
    }
  }
  if (const char* v = lookup_nonempty(lookup, "TORCH_HCCL_TRACE_BUFFER_SIZE")) {
    std::uint64_t entries = 0;
    if (parse_unsigned(v, &entries) && entries <= (1u << 24)) {
      env.hccl_trace_buffer_size = entries;
    } else {
      env.errors.push_back("TORCH_HCCL_TRACE_BUFFER_SIZE must be a number of entries between 0 and 16777216, got " +
                           quoted(v));
    }
  }
  env.hccl_dump_on_timeout = is_one(lookup("TORCH_HCCL_DUMP_ON_TIMEOUT"));
  if (const char* v = lookup_nonempty(lookup, "TORCH_HCCL_DEBUG_INFO_TEMP_FILE")) env.hccl_debug_info_temp_file = v;
  if (const char* v = lookup_nonempty(lookup, "TORCH_HCCL_DEBUG_INFO_PIPE_FILE")) env.hccl_debug_info_pipe_file = v;
  env.hccl_status_save_enable = is_one(lookup("TORCH_HCCL_STATUS_SAVE_ENABLE"));
  if (const char* v = lookup_nonempty(lookup, "TORCH_HCCL_STATUS_SAVE_PATH")) env.hccl_status_save_path = v;
  if (const char* v = lookup_nonempty(lookup, "TORCH_HCCL_STATUS_SAVE_INTERVAL")) {
    if (!parse_unsigned(v, &env.hccl_status_save_interval_s) || env.hccl_status_save_interval_s == 0) {
      env.errors.push_back("TORCH_HCCL_STATUS_SAVE_INTERVAL must be a positive number of seconds, got " + quoted(v));
      env.hccl_status_save_interval_s = 2;
    }
  }
  if (const char* v = lookup_nonempty(lookup, "NSLB_CP")) env.nslb_cp = v;
  if (const char* v = lookup_nonempty(lookup, "NSLB_MAX_RECORD_NUM")) {
    if (!parse_unsigned(v, &env.nslb_max_record_num)) {
      env.errors.push_back("NSLB_MAX_RECORD_NUM must be a number of collectives, got " + quoted(v));
    }
  }
  if (const char* v = lookup_nonempty(lookup, "HCCL_BUFFSIZE")) {
    std::uint64_t mb = 0;
    if (parse_unsigned(v, &mb) && mb > 0 && mb <= (1u << 20)) {
      env.hccl_buffsize_mb = mb;
    } else {
      env.errors.push_back("HCCL_BUFFSIZE must be a positive number of MB, got " + quoted(v));
    }
  }
  if (const char* v = lookup_nonempty(lookup, "ASCEND_GLOBAL_LOG_LEVEL")) {
    std::uint64_t level = 0;
    if (parse_unsigned(v, &level) && level <= 4) {
      env.acl_log_level = static_cast<int>(level);
    } else {
      env.errors.push_back("ASCEND_GLOBAL_LOG_LEVEL should be 0, 1, 2, 3 or 4, but got " + quoted(v));
    }
  }
  if (const char* v = lookup("TORCH_NPU_LOGS_FILTER")) env.logs_filter = v;
  // RANK is only recorded here (raw_values): log lines read it as it is at
  // each line (rank_now()), since scripts set it after import.
  (void)lookup("RANK");
  if (const char* v = lookup_nonempty(lookup, "ROOTINFO_SUBCOMM_ENABLE")) {
    std::uint64_t flag = 0;
    if (parse_unsigned(v, &flag)) {
      env.rootinfo_subcomm_enable = flag != 0;  // torch_npu's GetBoolTypeOption: any other number enables
    } else {
      env.errors.push_back("ROOTINFO_SUBCOMM_ENABLE should be 0 or 1, but got " + quoted(v));
    }
  }
  env.inf_nan_mode = inf_nan_mode(lookup, env.chip_name, &env.errors);

  if (const char* v = lookup_nonempty(lookup, "ACL_OP_INIT_MODE")) {
    std::uint64_t mode = 0;
    if (parse_unsigned(v, &mode) && mode <= 2) {
      env.acl_op_init_mode = static_cast<int>(mode);
    } else {
      env.warnings.push_back("Get env ACL_OP_INIT_MODE not in [0, 1, 2], so reset it to the default value 0.");
    }
  }
  if (const char* v = lookup_nonempty(lookup, "TORCH_ACL_INIT_CONFIG_PATH")) {
    env.acl_init_config_path = v;
    const std::string problem = check_acl_init_config(v);
    if (!problem.empty()) env.errors.push_back(problem);
  }
  t_lookup = nullptr;
  t_parsing = nullptr;
  return env;
}

const Environment& environment() {
  // A function-local static is initialised exactly once, thread-safely.
  static const Environment env = parse_environment(&process_lookup);
  return env;
}

Environment environment_now() { return parse_environment(&process_lookup); }

std::string rank_now() {
  const char* rank = process_lookup("RANK");
  return rank != nullptr ? rank : "";
}

}  // namespace vnpu
