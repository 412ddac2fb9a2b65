#include "csrc/distributed/status_save.h"

#include <c10/util/Exception.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <vnpu/environment.h>

namespace torch_npu {
namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

StatusSave& StatusSave::instance() {
  static StatusSave* status = new StatusSave();  // leaked: stream workers may update at exit
  return *status;
}

bool StatusSave::enabled() { return vnpu::environment().hccl_status_save_enable; }

void StatusSave::update(const std::string& pg_id, const std::string& comm_id, uint64_t seq, c10d::OpType type,
                        const char* status) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entries_[pg_id];
  e.seq = seq;
  e.op_type = c10d::opTypeToString(type);
  e.comm_id = comm_id;
  e.status = status;
}

void StatusSave::set_world(int global_rank, int world_size, int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  global_rank_ = global_rank;
  world_size_ = world_size;
  device_ = device;
}

bool StatusSave::due() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto interval = std::chrono::seconds(vnpu::environment().hccl_status_save_interval_s);
  return std::chrono::steady_clock::now() - last_write_ >= interval;
}

void StatusSave::write(bool end, const std::string& exception) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_write_ = std::chrono::steady_clock::now();
  if (!exception.empty()) exception_ = exception;
  if (entries_.empty()) return;
  if (first_write_ms_ == 0) first_write_ms_ = wall_ms();
  std::string ops;
  for (const auto& [pg_id, e] : entries_) {
    ops += (ops.empty() ? "" : ", ") + std::string("{\"seq\": ") + std::to_string(e.seq) + ", \"op_type\": " +
           json_string(e.op_type) + ", \"pg_id\": " + json_string(pg_id) + ", \"comm_ids\": " + json_string(e.comm_id) +
           ", \"status\": " + json_string(e.status) + "}";
  }
  const std::string json = "{\"last_comm_op\": [" + ops + "], \"is_master\": " + (global_rank_ == 0 ? "true" : "false") +
                           ", \"exception_message\": " + json_string(exception_) +
                           ", \"global_pg_end_time\": " + std::to_string(end ? wall_ms() : first_write_ms_) + "}";
  const char* master = std::getenv("MASTER_ADDR");  // torchrun's
  const std::string dir = vnpu::environment().hccl_status_save_path;
  const std::string path = dir + "/torch_hccl_status-" + std::to_string(global_rank_) + "_" +
                           (master ? master : "127.0.0.1") + "_" + std::to_string(device_) + "_" +
                           std::to_string(world_size_) + "_" + std::to_string(::getpid()) + "_" +
                           std::to_string(first_write_ms_) + ".log";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // ranks may race to make it: the error is seen below
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json << "\n";
    if (!out) {
      TORCH_WARN_ONCE("Could not write the HCCL status file ", tmp, " (TORCH_HCCL_STATUS_SAVE_PATH=", dir,
                      "): check that the directory can be made and written.");
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace torch_npu
