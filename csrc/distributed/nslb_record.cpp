#include "csrc/distributed/nslb_record.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <vnpu/environment.h>

#include "csrc/core/npu_error.h"

namespace torch_npu {
namespace {

constexpr const char* kCannotWrite =
    "Failed to prepare HCCL status save directory. Please verify the path is accessible and writable.";

std::mutex g_mutex;
bool g_ended = false;  // guarded by g_mutex: the last record was taken

// The directory, made if missing; raises as torch_npu does when it cannot be.
void prepare_directory(const std::string& dir) {
  // EEXIST: another rank made it meanwhile (a directory it cannot write fails at the file's open).
  if (::access(dir.c_str(), W_OK) != 0 && ::mkdir(dir.c_str(), S_IRWXU | S_IRGRP | S_IXGRP) != 0 &&
      errno != EEXIST) {
    TORCH_CHECK(false, kCannotWrite, error_suffix(SubModule::kDIST, ErrCode::kNotFound));
  }
}

const char* required_env(const char* name, const char* what) {
  const char* value = std::getenv(name);  // torchrun's, possibly set after import
  TORCH_CHECK(value != nullptr, what, error_suffix(SubModule::kDIST, ErrCode::kNotFound));
  return value;
}

}  // namespace

void record_nslb_volume(c10d::OpType type, const std::vector<at::Tensor>& inputs, uint64_t op_id,
                        const std::string& comm_name) {
  const auto& env = vnpu::environment();
  if (env.nslb_cp.empty()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_ended) return;
  if (op_id <= env.nslb_max_record_num) {
    size_t bytes = 0;
    for (const at::Tensor& t : inputs) bytes += t.defined() && t.has_storage() ? t.storage().nbytes() : 0;
    const char* rank = required_env("RANK", "Unable to fetch global rank for NSLB.");
    const char* master = required_env("MASTER_ADDR", "Unable to fetch master IP addr, environment variable is null.");
    const std::string path = env.nslb_cp + "/" + master + "_" + comm_name + "_" + std::to_string(std::atol(rank)) +
                             ".log";
    prepare_directory(env.nslb_cp);
    const char* algo = std::getenv("HCCL_ALGO");
    const bool first = ::access(path.c_str(), F_OK) != 0;
    std::ofstream out(path, std::ios::app);
    TORCH_CHECK(out, kCannotWrite, error_suffix(SubModule::kDIST, ErrCode::kNotFound));
    std::string name = c10d::opTypeToString(type);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (algo != nullptr && first) out << "HCCL_ALGO=" << algo << "\n";
    out << name << " " << bytes << " " << std::atol(rank) << "\n";
  }
  if (op_id >= env.nslb_max_record_num) {
    g_ended = true;
    prepare_directory(env.nslb_cp);
    const char* master = std::getenv("MASTER_ADDR");
    const std::string end = env.nslb_cp + "/end_" + (master ? master : "") + "_" + std::to_string(::getpid()) + ".log";
    std::ofstream touch(end, std::ios::app);
    TORCH_CHECK(touch, "NSLB set end failed.", error_suffix(SubModule::kDIST, ErrCode::kNotFound));
  }
}

}  // namespace torch_npu
