#include "csrc/distributed/status_save.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <c10/util/Exception.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <vnpu/environment.h>

#include "csrc/distributed/ivalue_json.h"

namespace torch_npu {
namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
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
  c10::List<c10::IValue> ops(c10::AnyType::get());
  for (const auto& [pg_id, e] : entries_) {
    c10::impl::GenericDict op(c10::StringType::get(), c10::AnyType::get());
    op.insert("seq", static_cast<int64_t>(e.seq));
    op.insert("op_type", e.op_type);
    op.insert("pg_id", pg_id);
    op.insert("comm_ids", e.comm_id);
    op.insert("status", e.status);
    ops.push_back(op);
  }
  c10::impl::GenericDict status(c10::StringType::get(), c10::AnyType::get());
  status.insert("last_comm_op", ops);
  status.insert("is_master", global_rank_ == 0);
  status.insert("exception_message", exception_);
  status.insert("global_pg_end_time", end ? wall_ms() : first_write_ms_);
  const std::string json = json_of(status);
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
