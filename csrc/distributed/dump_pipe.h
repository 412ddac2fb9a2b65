// DumpPipe: a named pipe that asks a running job for its flight recorder.
//
// As torch's (and torch_npu's) DumpPipe: with TORCH_HCCL_ENABLE_MONITORING=1,
// a trace buffer (TORCH_HCCL_TRACE_BUFFER_SIZE > 0) and
// TORCH_HCCL_DEBUG_INFO_PIPE_FILE=<prefix>, the world group of each rank
// makes the FIFO <prefix><rank>.pipe; writing anything to it (`echo 1 >
// <prefix>0.pipe`) makes that rank dump its trace and Python stacks to
// TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank>, as on a timeout, and the job goes
// on. The watchdog's poller reads the pipe (without blocking).
//
// Thread-safety: should_dump() from one thread (the poller).
#pragma once

#include <string>

namespace torch_npu {

class DumpPipe {
 public:
  // Makes and opens the pipe of `rank`, or nothing when the variables above
  // do not ask for one (a pipe that cannot be made is warned about).
  explicit DumpPipe(int rank);
  ~DumpPipe();
  DumpPipe(const DumpPipe&) = delete;
  DumpPipe& operator=(const DumpPipe&) = delete;

  bool active() const { return fd_ >= 0; }
  // Whether something was written to the pipe since the last call.
  bool should_dump();

 private:
  int fd_ = -1;
};

}  // namespace torch_npu
