#include "vnpu/json_check.h"

#include <cctype>

namespace vnpu {
namespace {

// A recursive-descent reader that only checks. Depth is bounded so that a
// hostile file cannot exhaust the stack.
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& text) : s_(text) {}

  bool document(std::vector<std::string>* keys) {
    skip_space();
    if (!value(0, keys)) return false;
    skip_space();
    return pos_ == s_.size() || fail("end of input");
  }

  const std::string& error() const { return error_; }

 private:
  static constexpr int kMaxDepth = 512;

  bool fail(const char* expected) {
    if (error_.empty()) {
      error_ = std::string("expected ") + expected + " at offset " + std::to_string(pos_);
    }
    return false;
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void skip_space() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(const char* word) {
    for (const char* c = word; *c != '\0'; ++c, ++pos_) {
      if (peek() != *c) return fail(word);
    }
    return true;
  }

  bool value(int depth, std::vector<std::string>* keys) {
    if (depth > kMaxDepth) return fail("less nesting");
    switch (peek()) {
      case '{': return object(depth, keys);
      case '[': return array(depth);
      case '"': return string(nullptr);
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  bool object(int depth, std::vector<std::string>* keys) {
    ++pos_;  // '{'
    skip_space();
    if (peek() == '}') return ++pos_, true;
    for (;;) {
      skip_space();
      std::string name;
      if (peek() != '"') return fail("a member name");
      if (!string(&name)) return false;
      if (keys != nullptr) keys->push_back(name);
      skip_space();
      if (peek() != ':') return fail("':'");
      ++pos_;
      skip_space();
      if (!value(depth + 1, nullptr)) return false;
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') return ++pos_, true;
      return fail("',' or '}'");
    }
  }

  bool array(int depth) {
    ++pos_;  // '['
    skip_space();
    if (peek() == ']') return ++pos_, true;
    for (;;) {
      skip_space();
      if (!value(depth + 1, nullptr)) return false;
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') return ++pos_, true;
      return fail("',' or ']'");
    }
  }

  bool string(std::string* out) {
    ++pos_;  // '"'
    while (!at_end()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("no control characters in a string");
      if (c != '\\') {
        if (out != nullptr) out->push_back(c);
        continue;
      }
      const char e = peek();
      ++pos_;
      if (e == 'u') {
        for (int i = 0; i < 4; ++i, ++pos_) {
          if (!std::isxdigit(static_cast<unsigned char>(peek()))) return fail("four hex digits after \\u");
        }
        if (out != nullptr) out->push_back('?');  // names are compared as ASCII
      } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
        if (out != nullptr) out->push_back(e);
      } else {
        --pos_;
        return fail("an escape sequence");
      }
    }
    return fail("'\"'");
  }

  bool digits() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) return fail("a digit");
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    return true;
  }

  bool number() {
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (!std::isdigit(static_cast<unsigned char>(peek()))) {
      return fail("a JSON value");
    } else if (!digits()) {
      return false;
    }
    if (peek() == '.') {
      ++pos_;
      if (!digits()) return false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digits()) return false;
    }
    return true;
  }

  const std::string& s_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

bool check_json(const std::string& text, std::vector<std::string>* top_level_keys, std::string* error) {
  JsonChecker checker(text);
  if (checker.document(top_level_keys)) return true;
  if (error != nullptr) *error = checker.error();
  return false;
}

}  // namespace vnpu
