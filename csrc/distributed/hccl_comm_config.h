// ProcessGroupHCCL.Options.hccl_config, read when the group's communicator is
// made, as real torch_npu reads it into HCCL's HcclCommConfig.
//
// Assigning hccl_config takes any dict of ints and strings; a value of the
// wrong type for its key, or out of range, fails the group's creation with
// torch_npu's RuntimeError ("Value type of hccl_algo should be string."),
// not the assignment. Strings longer than HCCL's fields are cut to fit with
// torch_npu's warning, and the group keeps the cut value (what its
// communicator uses). Keys vNPU does not know are ignored, as HCCL does.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

namespace torch_npu {

using HcclConfigMap = std::map<std::string, std::variant<int64_t, std::string>>;

// What the communicator takes from hccl_config.
struct HcclCommConfig {
  std::optional<uint32_t> buffer_size_mb;   // hccl_buffer_size: this group's HCCL_BUFFSIZE
  std::optional<int32_t> exec_timeout_s;    // hccl_exec_timeout: this group's HCCL_EXEC_TIMEOUT
  std::string buffer_name;                  // hccl_buffer_name: groups naming one buffer share a stream
};

// Checks `config` in torch_npu's words (c10::Error with the DIST suffix),
// truncates its long strings in place (with a warning) and returns the
// settings vNPU's communicator uses.
HcclCommConfig read_hccl_config(HcclConfigMap& config);

}  // namespace torch_npu
