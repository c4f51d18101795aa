#include "core/util/log.h"

#include <syslog.h>
#include <time.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace egpu::log {
namespace {

std::atomic<int> g_threshold{static_cast<int>(Level::kInfo)};
std::atomic<bool> g_syslog{false};
std::string g_ident = "egpu";

const char* level_name(Level l) {
  switch (l) {
    case Level::kError:
      return "error";
    case Level::kWarning:
      return "warning";
    case Level::kInfo:
      return "info";
    case Level::kDebug:
      return "debug";
  }
  return "?";
}

int syslog_priority(Level l) {
  switch (l) {
    case Level::kError:
      return LOG_ERR;
    case Level::kWarning:
      return LOG_WARNING;
    case Level::kInfo:
      return LOG_INFO;
    case Level::kDebug:
      return LOG_DEBUG;
  }
  return LOG_INFO;
}

}  // namespace

void init(const std::string& ident, bool use_syslog, Level threshold) {
  g_ident = ident;
  g_threshold = static_cast<int>(threshold);
  g_syslog = use_syslog;
  if (use_syslog) openlog(g_ident.c_str(), LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void set_threshold(Level threshold) {
  g_threshold = static_cast<int>(threshold);
}

bool enabled(Level level) {
  return static_cast<int>(level) <= g_threshold.load();
}

void write(Level level, const char* format, ...) {
  if (!enabled(level)) return;
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  // One line each, whatever a value in it holds: a process's name (a job's
  // to choose: prctl(PR_SET_NAME, "x\nFORGED")) or a path must not start a
  // line of its own in the journal, which splits at newlines.
  for (char* c = message; *c != '\0'; ++c) {
    const auto byte = static_cast<unsigned char>(*c);
    if ((byte < 0x20 && byte != '\t') || byte == 0x7f) *c = '?';
  }
  if (g_syslog) {
    syslog(syslog_priority(level), "%s", message);
    return;
  }
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local{};
  localtime_r(&ts.tv_sec, &local);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &local);
  fprintf(stderr, "%s.%06ld %s[%s]: %s\n", when, ts.tv_nsec / 1000, g_ident.c_str(),
          level_name(level), message);
}

}  // namespace egpu::log
