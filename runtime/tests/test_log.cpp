#include <gtest/gtest.h>

#include "test_helpers.h"
#include "vnpu/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace {

using vnpu::log::Level;

// What fn writes to stderr.
template <typename Fn>
std::string stderr_of(Fn fn) {
  std::fflush(stderr);
  char path[] = "/tmp/vnpu_log_testXXXXXX";
  const int file = mkstemp(path);
  const int saved = dup(2);
  dup2(file, 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  lseek(file, 0, SEEK_SET);
  char buffer[4096];
  ssize_t n = 0;
  while ((n = read(file, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
  close(file);
  unlink(path);
  return text;
}

class Log : public ::testing::Test {
 protected:
  void TearDown() override { vnpu::log::set_levels({}, ""); }
};

TEST_F(Log, LevelsFollowTheLongestDottedPrefixThenTorchThenWarning) {
  vnpu::log::set_levels({}, "");
  EXPECT_EQ(vnpu::log::level_of("torch.distributed"), 30);
  vnpu::log::set_levels({{"torch.distributed", 20}, {"torch", 40}}, "");
  EXPECT_EQ(vnpu::log::level_of("torch.distributed"), 20);
  EXPECT_EQ(vnpu::log::level_of("torch.distributed.c10d"), 20);
  EXPECT_EQ(vnpu::log::level_of("torch.distributedx"), 40);  // a prefix ends at a dot
  EXPECT_EQ(vnpu::log::level_of("torch_npu.op_plugin"), 40);  // "torch" is every logger's default
  EXPECT_TRUE(vnpu::log::enabled("torch.distributed", Level::kInfo));
  EXPECT_FALSE(vnpu::log::enabled("torch.distributed", Level::kDebug));
}

TEST_F(Log, LinesHaveTorchNpusLayout) {
  unsetenv("RANK");
  const std::string plain = vnpu::log::format_line(Level::kInfo, nullptr, "hello");
  EXPECT_TRUE(std::regex_match(plain, std::regex(R"(I\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+\] hello\n)"))) << plain;
  setenv("RANK", "3", 1);
  const std::string with_source = vnpu::log::format_line(Level::kDebug, "ProcessGroupHCCL.cpp", "x");
  unsetenv("RANK");
  EXPECT_TRUE(std::regex_match(with_source,
                               std::regex(R"(V\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ ProcessGroupHCCL\.cpp\] \[rank:3\] x\n)")))
      << with_source;
  EXPECT_EQ(vnpu::log::format_line(Level::kCritical, nullptr, "")[0], 'F');
}

TEST_F(Log, WritesWhatTheLevelAndTheFilterLetThrough) {
  vnpu::log::set_levels({{"a", 20}}, "");
  const std::string out = stderr_of([] {
    EXPECT_TRUE(vnpu::log::write("a", Level::kInfo, nullptr, "shown"));
    EXPECT_FALSE(vnpu::log::write("a", Level::kDebug, nullptr, "hidden"));
    EXPECT_FALSE(vnpu::log::write("b", Level::kInfo, nullptr, "hidden too"));  // WARNING by default
  });
  EXPECT_NE(out.find("] shown\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;

  // "-word" drops first; then, with any "+word", only lines holding one stay.
  vnpu::log::set_levels({{"a", 10}}, " +keep , -drop,+,x");
  const std::string filtered = stderr_of([] {
    vnpu::log::write("a", Level::kInfo, nullptr, "keep this");
    vnpu::log::write("a", Level::kInfo, nullptr, "keep but drop");
    vnpu::log::write("a", Level::kInfo, nullptr, "other");
    vnpu::log::write_always(Level::kError, "src.cpp", "keep always");
    vnpu::log::write_always(Level::kError, "src.cpp", "not always");
  });
  EXPECT_NE(filtered.find("keep this"), std::string::npos) << filtered;
  EXPECT_NE(filtered.find("keep always"), std::string::npos) << filtered;
  EXPECT_EQ(filtered.find("drop"), std::string::npos) << filtered;
  EXPECT_EQ(filtered.find("other"), std::string::npos) << filtered;
  EXPECT_EQ(filtered.find("not always"), std::string::npos) << filtered;
}

TEST_F(Log, LevelsChangeWhileOtherThreadsLog) {
  // Writers read a whole set of levels while another thread replaces it.
  std::vector<std::thread> threads;
  const std::string out = stderr_of([&] {
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([] {
        for (int i = 0; i < 200; ++i) vnpu::log::write("w", Level::kInfo, nullptr, "line");
      });
    }
    for (int i = 0; i < 200; ++i) vnpu::log::set_levels({{"w", i % 2 == 0 ? 20 : 30}}, "");
    for (std::thread& thread : threads) thread.join();
  });
  for (size_t at = out.find("line"); at != std::string::npos; at = out.find("line", at + 1)) {
    EXPECT_EQ(out.compare(at, 5, "line\n"), 0);  // whole lines only
  }
}

}  // namespace
