#include "csrc/distributed/dump_pipe.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <vnpu/environment.h>

namespace torch_npu {

DumpPipe::DumpPipe(int rank) {
  const auto& env = vnpu::environment();
  if (env.hccl_debug_info_pipe_file.empty() || env.hccl_trace_buffer_size == 0) return;
  const std::string path = env.hccl_debug_info_pipe_file + std::to_string(rank) + ".pipe";
  if ((::unlink(path.c_str()) != 0 && errno != ENOENT) || ::mkfifo(path.c_str(), 0666) != 0) {
    TORCH_WARN("Could not make the flight recorder's dump pipe ", path, " (TORCH_HCCL_DEBUG_INFO_PIPE_FILE): ",
               std::strerror(errno));
    return;
  }
  // Non-blocking: opening does not wait for a writer, nor does reading.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd_ < 0) {
    TORCH_WARN("Could not open the flight recorder's dump pipe ", path, ": ", std::strerror(errno));
  }
}

DumpPipe::~DumpPipe() {
  if (fd_ >= 0) ::close(fd_);
}

bool DumpPipe::should_dump() {
  if (fd_ < 0) return false;
  char buf[128];
  return ::read(fd_, buf, sizeof(buf)) > 0;
}

}  // namespace torch_npu
