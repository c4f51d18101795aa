// Logging for the agent and tools: one line per message, to stderr or syslog,
// with a level threshold. printf-style so call sites stay short.
#pragma once

#include <string>

namespace egpu::log {

enum class Level { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

void init(const std::string& ident, bool use_syslog, Level threshold);
void set_threshold(Level threshold);
bool enabled(Level level);

void write(Level level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace egpu::log

#define EGPU_LOG_ERROR(...) ::egpu::log::write(::egpu::log::Level::kError, __VA_ARGS__)
#define EGPU_LOG_WARN(...) ::egpu::log::write(::egpu::log::Level::kWarning, __VA_ARGS__)
#define EGPU_LOG_INFO(...) ::egpu::log::write(::egpu::log::Level::kInfo, __VA_ARGS__)
#define EGPU_LOG_DEBUG(...)                                        \
  do {                                                             \
    if (::egpu::log::enabled(::egpu::log::Level::kDebug))          \
      ::egpu::log::write(::egpu::log::Level::kDebug, __VA_ARGS__); \
  } while (0)
