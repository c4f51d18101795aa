#include "shim/agent_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <limits>

#include "core/util/clock.h"

namespace egpu::shim {
namespace {

constexpr int64_t kUnread = std::numeric_limits<int64_t>::min();
std::atomic<int64_t> g_offset_ns{kUnread};

bool parse_int(std::string_view& rest, int64_t* out) {
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t'))
    rest.remove_prefix(1);
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), *out);
  if (ec != std::errc() || end == rest.data()) return false;
  rest.remove_prefix(static_cast<size_t>(end - rest.data()));
  return true;
}

// Whether this process is in the namespace its children get: the offsets
// file describes that one. One that called unshare(CLONE_NEWTIME) itself
// stays where it was (taken as the initial namespace).
bool in_childrens_namespace() {
  char own[64] = {}, children[64] = {};
  const ssize_t a = ::readlink("/proc/self/ns/time", own, sizeof own - 1);
  const ssize_t b = ::readlink("/proc/self/ns/time_for_children", children, sizeof children - 1);
  return a <= 0 || b <= 0 ||
         std::string_view(own, static_cast<size_t>(a)) ==
             std::string_view(children, static_cast<size_t>(b));
}

// The offset, or nullopt when it could not be read now (out of
// descriptors): read again at the next call.
std::optional<int64_t> read_offset() {
  // Raw calls: this may run in any CUDA call, on any thread.
  const int fd = ::open("/proc/self/timens_offsets", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;  // a kernel without time namespaces
    return std::nullopt;
  }
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  if (!in_childrens_namespace()) return 0;
  return parse_monotonic_offset(std::string_view(buf, static_cast<size_t>(n))).value_or(0);
}

}  // namespace

std::optional<int64_t> parse_monotonic_offset(std::string_view text) {
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    while (!line.empty() && line.front() == ' ')
      line.remove_prefix(1);
    const size_t gap = line.find_first_of(" \t");
    if (gap == std::string_view::npos) continue;
    const std::string_view clock = line.substr(0, gap);
    if (clock != "monotonic" && clock != "1") continue;
    std::string_view rest = line.substr(gap);
    int64_t s = 0, ns = 0;
    if (!parse_int(rest, &s) || !parse_int(rest, &ns)) return std::nullopt;
    // The kernel keeps offsets within what a timespec64 holds; the shim's
    // nanosecond clock within +-292 years.
    constexpr int64_t kMaxS = std::numeric_limits<int64_t>::max() / 1'000'000'000 - 1;
    if (s > kMaxS || s < -kMaxS || ns < 0 || ns >= 1'000'000'000) return std::nullopt;
    return s * 1'000'000'000 + ns;
  }
  return std::nullopt;
}

int64_t agent_clock_ns() {
  int64_t offset = g_offset_ns.load(std::memory_order_relaxed);
  if (offset == kUnread) {
    const std::optional<int64_t> read = read_offset();
    offset = read.value_or(0);
    if (read) g_offset_ns.store(offset, std::memory_order_relaxed);
  }
  return monotonic_ns() - offset;
}

void forget_time_offset_after_fork() noexcept {
  g_offset_ns.store(kUnread, std::memory_order_relaxed);
}

}  // namespace egpu::shim
