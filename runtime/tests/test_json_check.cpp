#include <gtest/gtest.h>

#include "vnpu/json_check.h"

namespace vnpu {
namespace {

TEST(JsonCheck, AcceptsValuesAndListsTopLevelMembers) {
  std::vector<std::string> keys;
  std::string error;
  EXPECT_TRUE(check_json(R"( {"dump": {"dump_scene": "lite_exception", "n": [1, -2.5e3, true, null]},
                            "defaultDevice": {"default_device": "0"}, "s": "a\"b\u00e9"} )",
                         &keys, &error))
      << error;
  EXPECT_EQ(keys, (std::vector<std::string>{"dump", "defaultDevice", "s"}));
  for (const char* text : {"0", "-0.5", "\"x\"", "[]", "{}", "[[], {}]", " true "}) {
    EXPECT_TRUE(check_json(text, nullptr, &error)) << text << ": " << error;
  }
}

TEST(JsonCheck, RefusesWhatIsNotJsonAndSaysWhere) {
  std::string error;
  for (const char* text : {"", "not a json{{{", "{", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "01", "1.", "\"a",
                           "{a: 1}", "tru", "[1] x", "\"\\x\""}) {
    error.clear();
    EXPECT_FALSE(check_json(text, nullptr, &error)) << text;
    EXPECT_NE(error.find("at offset"), std::string::npos) << text << ": " << error;
  }
  EXPECT_FALSE(check_json("{\"a\" 1}", nullptr, &error));
  EXPECT_EQ(error, "expected ':' at offset 5");
  std::string deep(2000, '[');
  EXPECT_FALSE(check_json(deep, nullptr, &error));  // bounded depth, no stack overflow
}

}  // namespace
}  // namespace vnpu
