/* vNPU: GE's string type (graph/ascend_string.h). Plain data, so it works on
 * vNPU: code passes names and options to GE as AscendString. */
#ifndef VNPU_GRAPH_ASCEND_STRING_H
#define VNPU_GRAPH_ASCEND_STRING_H
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include "graph/types.h"

namespace ge {
class AscendString {
 public:
  AscendString() = default;
  ~AscendString() = default;
  AscendString(const char_t* const name) : name_(name == nullptr ? nullptr : std::make_shared<std::string>(name)) {}
  AscendString(const char_t* const name, size_t length)
      : name_(name == nullptr ? nullptr : std::make_shared<std::string>(name, length)) {}

  const char_t* GetString() const { return name_ ? name_->c_str() : ""; }
  size_t GetLength() const { return name_ ? name_->size() : 0U; }
  size_t Find(const AscendString& ascend_string) const {
    if (!name_ || !ascend_string.name_) return std::string::npos;
    return name_->find(*ascend_string.name_);
  }
  size_t Hash() const { return std::hash<std::string>()(name_ ? *name_ : std::string()); }

  bool operator<(const AscendString& d) const { return view() < d.view(); }
  bool operator>(const AscendString& d) const { return view() > d.view(); }
  bool operator<=(const AscendString& d) const { return view() <= d.view(); }
  bool operator>=(const AscendString& d) const { return view() >= d.view(); }
  bool operator==(const AscendString& d) const { return view() == d.view(); }
  bool operator!=(const AscendString& d) const { return view() != d.view(); }
  bool operator==(const char_t* const d) const { return d != nullptr && view() == d; }
  bool operator!=(const char_t* const d) const { return !(*this == d); }

 private:
  std::string view() const { return name_ ? *name_ : std::string(); }
  std::shared_ptr<std::string> name_;  // shared, like GE's: copies are cheap
};
}  // namespace ge

namespace std {
template <>
struct hash<ge::AscendString> {
  size_t operator()(const ge::AscendString& name) const { return name.Hash(); }
};
}  // namespace std
#endif
