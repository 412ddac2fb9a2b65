#include "csrc/distributed/hccl_comm_config.h"

#include <c10/util/Exception.h>

#include <limits>

#include "csrc/core/npu_error.h"

namespace torch_npu {

namespace {

// HCCL's field sizes (hccl_types.h): a string must fit with its terminator.
constexpr size_t kUdiMaxLength = 128;
constexpr size_t kAlgoMaxLength = 1600;
constexpr size_t kRetryEnableMaxLength = 50;
constexpr size_t kRetryParamsMaxLength = 128;
constexpr size_t kBufferNameMaxLength = 128;

// The C++ type a Python int lands in: torch_npu's hccl_config holds
// variant<uint32_t, uint64_t, int32_t, string>, and pybind11 takes the first
// alternative a value fits.
enum class IntKind { kUint32, kUint64, kInt32, kNone };

IntKind int_kind(int64_t v) {
  if (v >= 0 && v <= std::numeric_limits<uint32_t>::max()) return IntKind::kUint32;
  if (v > 0) return IntKind::kUint64;
  if (v >= std::numeric_limits<int32_t>::min()) return IntKind::kInt32;
  return IntKind::kNone;
}

[[noreturn]] void wrong_type(const std::string& key, const char* expected) {
  TORCH_CHECK(false, "Value type of ", key, " should be ", expected, ".",
              error_suffix(SubModule::kDIST, ErrCode::kType));
}

[[noreturn]] void out_of_range(const std::string& key, const char* range) {
  TORCH_CHECK(false, "Value of ", key, " should be in ", range, ".", error_suffix(SubModule::kDIST, ErrCode::kValue));
}

// A uint32 setting (hccl_buffer_size, the qos levels, ...).
std::optional<uint32_t> read_uint32(const HcclConfigMap& config, const std::string& key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  const auto* v = std::get_if<int64_t>(&it->second);
  if (v == nullptr || int_kind(*v) != IntKind::kUint32) wrong_type(key, "int");
  return static_cast<uint32_t>(*v);
}

// A string setting, cut to HCCL's field (`max_length` with the terminator);
// nullptr when absent.
const std::string* read_string(HcclConfigMap& config, const std::string& key, size_t max_length,
                               const char* limit_name) {
  auto it = config.find(key);
  if (it == config.end()) return nullptr;
  auto* s = std::get_if<std::string>(&it->second);
  if (s == nullptr) wrong_type(key, "string");
  if (s->size() >= max_length) {
    TORCH_WARN("The length of ", key, " has exceeded the limit ", limit_name, "(", max_length,
               ") which will be truncated to ", limit_name, " - 1.");
    s->resize(max_length - 1);
  }
  return s;
}

}  // namespace

HcclCommConfig read_hccl_config(HcclConfigMap& config) {
  HcclCommConfig out;
  out.buffer_size_mb = read_uint32(config, "hccl_buffer_size");
  if (out.buffer_size_mb) {
    TORCH_CHECK(*out.buffer_size_mb > 0, "Value of hccl_buffer_size should be greater than 0 (MB).",
                error_suffix(SubModule::kDIST, ErrCode::kValue));
  }
  read_string(config, "group_name", kUdiMaxLength, "UDI_MAX_LENGTH");
  if (auto v = read_uint32(config, "qos_traffic_class"); v && *v > 255) out_of_range("qos_traffic_class", "[0, 255]");
  if (auto v = read_uint32(config, "qos_service_level"); v && *v > 7) out_of_range("qos_service_level", "[0, 7]");
  read_uint32(config, "hccl_sdma_qos");
  read_uint32(config, "hccl_op_expansion_mode");
  read_uint32(config, "hccl_world_rank_id");
  if (auto it = config.find("hccl_job_id"); it != config.end()) {
    const auto* v = std::get_if<int64_t>(&it->second);
    if (v == nullptr || *v < 0) wrong_type("hccl_job_id", "int");
  }
  if (auto it = config.find("hccl_exec_timeout"); it != config.end()) {
    const auto* v = std::get_if<int64_t>(&it->second);
    const IntKind kind = v ? int_kind(*v) : IntKind::kNone;
    if (kind == IntKind::kInt32) {
      TORCH_WARN_ONCE("Value type of hccl_exec_timeout less than 0.");
    } else if (kind == IntKind::kUint32 && *v > std::numeric_limits<int32_t>::max()) {
      TORCH_CHECK(false, "Value type of hccl_exec_timeout exceeds INT32_MAX(2147483647).",
                  error_suffix(SubModule::kDIST, ErrCode::kType));
    } else if (kind != IntKind::kUint32) {
      wrong_type("hccl_exec_timeout", "int");
    }
    out.exec_timeout_s = static_cast<int32_t>(*v);
  }
  read_string(config, "hccl_algo", kAlgoMaxLength, "HCCL_COMM_ALGO_MAX_LENGTH");
  read_string(config, "hccl_retry_enable", kRetryEnableMaxLength, "HCCL_COMM_RETRY_ENABLE_MAX_LENGTH");
  read_string(config, "hccl_retry_params", kRetryParamsMaxLength, "HCCL_COMM_RETRY_PARAMS_MAX_LENGTH");
  if (const std::string* name = read_string(config, "hccl_buffer_name", kBufferNameMaxLength, "BUFFER_NAME_MAX_LENGTH")) {
    out.buffer_name = *name;
  }
  return out;
}

}  // namespace torch_npu
