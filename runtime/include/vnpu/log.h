// torch_npu's C++ logs (npu_logging): named loggers whose levels follow
// Python's torch._logging settings (TORCH_LOGS / TORCH_NPU_LOGS /
// torch._logging.set_logs, handed down through setLogs), lines in torch_npu's
// layout on stderr, through TORCH_NPU_LOGS_FILTER.
//
// A logger is named like a Python logger ("torch.distributed",
// "torch_npu.op_plugin"); its level is the one set for the longest dotted
// prefix of its name that has one, else the one set for "torch", else
// WARNING, as torch_npu's LogContext resolves it. Thread-safe.
#pragma once

#include <map>
#include <string>

namespace vnpu {
namespace log {

enum class Level { kDebug = 10, kInfo = 20, kWarning = 30, kError = 40, kCritical = 50 };

// torch_npu's setLogs: replaces every level (qualified logger name -> Python
// logging level) and the filter (TORCH_NPU_LOGS_FILTER's text: "-word" drops
// lines that hold it, then, if any "+word" is given, only lines holding one
// of those are kept; empty: no filter).
void set_levels(const std::map<std::string, int>& levels, const std::string& filter);

// The level a logger logs at (messages below it are dropped).
int level_of(const std::string& logger);
inline bool enabled(const std::string& logger, Level level) { return static_cast<int>(level) >= level_of(logger); }

// torch_npu's line: "I1204 22:55:01.123456 4242 source] [rank:0] message\n"
// (level letter V/I/W/E/F, month and day, local time, pid, the source when
// given, the rank from RANK when set).
std::string format_line(Level level, const char* source, const std::string& message);

// Writes `message` as a line of `logger` when the logger is at `level` or
// below and the filter keeps the line. Returns whether it was written.
bool write(const std::string& logger, Level level, const char* source, const std::string& message);

// Writes the line whatever the levels (errors a subsystem always reports),
// through the filter.
void write_always(Level level, const char* source, const std::string& message);

}  // namespace log
}  // namespace vnpu
