#include "vnpu/log.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "vnpu/environment.h"

namespace vnpu {
namespace log {
namespace {

// TORCH_NPU_LOGS_FILTER's words, matched as case-sensitive substrings of the
// whole line (prefix included), as torch_npu matches them.
struct Filter {
  std::vector<std::string> keep;
  std::vector<std::string> drop;

  static Filter parse(const std::string& text) {
    Filter filter;
    std::stringstream items(text);
    std::string item;
    while (std::getline(items, item, ',')) {
      const auto begin = item.find_first_not_of(" \t");
      if (begin == std::string::npos) continue;
      item = item.substr(begin, item.find_last_not_of(" \t") - begin + 1);
      if (item.size() < 2) continue;
      if (item[0] == '+') filter.keep.push_back(item.substr(1));
      if (item[0] == '-') filter.drop.push_back(item.substr(1));
    }
    return filter;
  }

  bool passes(const std::string& line) const {
    for (const std::string& word : drop) {
      if (line.find(word) != std::string::npos) return false;
    }
    if (keep.empty()) return true;
    for (const std::string& word : keep) {
      if (line.find(word) != std::string::npos) return true;
    }
    return false;
  }
};

struct Settings {
  std::map<std::string, int> levels;
  int default_level = static_cast<int>(Level::kWarning);
  Filter filter;
};

std::mutex g_mutex;
// Replaced whole by set_levels; readers take a copy of the pointer, so a
// line being written never sees half of an update.
std::shared_ptr<const Settings> g_settings = std::make_shared<const Settings>();  // guarded by g_mutex

std::shared_ptr<const Settings> settings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_settings;
}

int level_in(const Settings& s, const std::string& logger) {
  std::string name = logger;
  while (true) {
    auto it = s.levels.find(name);
    if (it != s.levels.end()) return it->second;
    const auto dot = name.rfind('.');
    if (dot == std::string::npos) return s.default_level;
    name.resize(dot);
  }
}

char letter_of(Level level) {
  switch (level) {
    case Level::kDebug: return 'V';
    case Level::kInfo: return 'I';
    case Level::kWarning: return 'W';
    case Level::kError: return 'E';
    case Level::kCritical: return 'F';
  }
  return 'I';
}

void emit(const Settings& s, Level level, const char* source, const std::string& message) {
  const std::string line = format_line(level, source, message);
  if (!s.filter.passes(line)) return;
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void set_levels(const std::map<std::string, int>& levels, const std::string& filter) {
  auto next = std::make_shared<Settings>();
  next->levels = levels;
  // torch_npu: the level set for "torch" is every other logger's default.
  auto torch = levels.find("torch");
  if (torch != levels.end()) next->default_level = torch->second;
  next->filter = Filter::parse(filter);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_settings = std::move(next);
}

int level_of(const std::string& logger) { return level_in(*settings(), logger); }

std::string format_line(Level level, const char* source, const std::string& message) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local{};
  localtime_r(&ts.tv_sec, &local);
  char prefix[320];
  std::snprintf(prefix, sizeof(prefix), "%c%02d%02d %02d:%02d:%02d.%06ld %d%s%s] ", letter_of(level),
                local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, ts.tv_nsec / 1000,
                static_cast<int>(getpid()), source != nullptr ? " " : "", source != nullptr ? source : "");
  std::string line = prefix;
  const std::string rank = rank_now();
  if (!rank.empty()) line += "[rank:" + rank + "] ";
  line += message;
  line += '\n';
  return line;
}

bool write(const std::string& logger, Level level, const char* source, const std::string& message) {
  const std::shared_ptr<const Settings> s = settings();
  if (static_cast<int>(level) < level_in(*s, logger)) return false;
  emit(*s, level, source, message);
  return true;
}

void write_always(Level level, const char* source, const std::string& message) {
  emit(*settings(), level, source, message);
}

}  // namespace log
}  // namespace vnpu
