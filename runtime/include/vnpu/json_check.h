// A JSON syntax check, for configuration files the runtime is pointed at
// (TORCH_ACL_INIT_CONFIG_PATH: the user's acl.json, which real torch_npu
// parses before aclInit). The runtime has no JSON library and needs none:
// it validates the file and reads the names of its top-level members.
#pragma once

#include <string>
#include <vector>

namespace vnpu {

// True when `text` is one JSON value (RFC 8259). When it is an object, its
// member names are appended to `top_level_keys` (if not null). On failure,
// `error` says what was expected where ("expected ':' at offset 12").
bool check_json(const std::string& text, std::vector<std::string>* top_level_keys, std::string* error);

}  // namespace vnpu
