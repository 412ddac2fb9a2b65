// JSON text of an IValue made of None, bool, int, double, string, lists,
// tuples and dicts with string keys (in their insertion order): the
// distributed debug files (the flight recorder's JSON dump, the status
// files) build a c10::Dict and write it with json_of, so a JSON dump says
// what the matching pickle says.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace torch_npu {

std::string json_of(const c10::IValue& value);

}  // namespace torch_npu
