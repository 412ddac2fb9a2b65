#include "csrc/distributed/ivalue_json.h"

#include <ATen/core/Dict.h>
#include <c10/util/Exception.h>

#include <cstdio>

namespace torch_npu {

namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string json_of(const c10::IValue& v) {
  if (v.isNone()) return "null";
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", v.toDouble());
    return buf;
  }
  if (v.isString()) return "\"" + json_escape(v.toStringRef()) + "\"";
  auto items = [](const auto& list) {
    std::string out = "[";
    bool first = true;
    for (const c10::IValue& item : list) {
      out += (first ? "" : ", ") + json_of(item);
      first = false;
    }
    return out + "]";
  };
  if (v.isList()) return items(v.toListRef());
  if (v.isTuple()) return items(v.toTupleRef().elements());
  if (v.isGenericDict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& item : v.toGenericDict()) {
      out += (first ? "\"" : ", \"") + json_escape(item.key().toStringRef()) + "\": " + json_of(item.value());
      first = false;
    }
    return out + "}";
  }
  TORCH_INTERNAL_ASSERT(false, "json_of: no JSON for an IValue of type ", v.tagKind());
}

}  // namespace torch_npu
