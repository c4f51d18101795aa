#include "core/config/egpu_config.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "core/config/byte_size.h"
#include "core/config/key_value_file.h"

namespace egpu::config {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<long long> parse_int(std::string_view v, long long min, long long max) {
  long long out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size()) {
    return Error{"'" + std::string(v) + "' is not an integer"};
  }
  if (out < min || out > max) {
    return Error{"must be between " + std::to_string(min) + " and " + std::to_string(max) +
                 ", got " + std::string(v)};
  }
  return out;
}

Result<double> parse_number(std::string_view v, double min, double max) {
  std::string s(v);
  char* end = nullptr;
  double out = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0]))) {
    return Error{"'" + s + "' is not a number"};
  }
  if (!(out >= min && out <= max)) {
    std::ostringstream msg;
    msg << "must be between " << min << " and " << max << ", got " << s;
    return Error{msg.str()};
  }
  return out;
}

Result<std::string> parse_absolute_path(std::string_view v) {
  if (v.empty() || v[0] != '/')
    return Error{"must be an absolute path, got '" + std::string(v) + "'"};
  return std::string(v);
}

// An absolute path with one "%d" (the GPU's index) and no other '%'.
Result<std::string> parse_device_file_pattern(std::string_view v) {
  auto path = parse_absolute_path(v);
  if (!path) return path;
  const size_t at = path->find('%');
  if (at == std::string::npos || path->compare(at, 2, "%d") != 0 ||
      path->find('%', at + 1) != std::string::npos) {
    return Error{"must hold one %d for the GPU's index (like /dev/nvidia%d), got '" +
                 std::string(v) + "'"};
  }
  return path;
}

// Splits "host:port" (IPv6 as "[::1]:port") and insists on a loopback address:
// metrics carry job names and shares and must not leave the node.
Result<std::pair<std::string, int>> split_loopback_address(std::string_view v) {
  std::string s(v);
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return Error{"must be HOST:PORT, got '" + s + "'"};
  std::string host = s.substr(0, colon);
  auto port = parse_int(std::string_view(s).substr(colon + 1), 1, 65535);
  if (!port) return Error{"port " + port.error()};
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  unsigned char buf[16];
  bool loopback = false;
  if (inet_pton(AF_INET, host.c_str(), buf) == 1) {
    loopback = buf[0] == 127;
  } else if (inet_pton(AF_INET6, host.c_str(), buf) == 1) {
    loopback = host == "::1";
  } else {
    return Error{"'" + host + "' is not an IP address"};
  }
  if (!loopback)
    return Error{"must be a loopback address (127.0.0.0/8 or ::1), got '" + host + "'"};
  return std::make_pair(host, static_cast<int>(*port));
}

using Setter = std::function<Status(EgpuConfig&, std::string_view)>;

struct KeySpec {
  const char* name;
  Setter set;
};

template <typename Field>
Setter int_field(Field EgpuConfig::*field, long long min, long long max) {
  return [=](EgpuConfig& c, std::string_view v) -> Status {
    auto r = parse_int(v, min, max);
    if (!r) return Error{r.error()};
    c.*field = static_cast<Field>(*r);
    return {};
  };
}

// A field set by a parser that returns Result<Field>.
template <typename Field, typename Parse>
Setter parsed_field(Field EgpuConfig::*field, Parse parse) {
  return [=](EgpuConfig& c, std::string_view v) -> Status {
    auto r = parse(v);
    if (!r) return Error{r.error()};
    c.*field = std::move(*r);
    return {};
  };
}

Setter path_field(std::string EgpuConfig::*field) {
  return parsed_field(field, parse_absolute_path);
}

template <typename Enum>
Setter enum_field(Enum EgpuConfig::*field, std::vector<std::pair<const char*, Enum>> choices) {
  return [=](EgpuConfig& c, std::string_view v) -> Status {
    std::string lv = lower(v);
    std::string names;
    for (const auto& [name, value] : choices) {
      if (lv == name) {
        c.*field = value;
        return {};
      }
      names += names.empty() ? name : std::string("|") + name;
    }
    return Error{"must be one of " + names + ", got '" + std::string(v) + "'"};
  };
}

// A group's name as the system takes it (letters, digits, '_', '-', '.',
// not starting with '-'), or its number; resolved where it is used. Empty:
// none.
Result<std::string> parse_group_name(std::string_view v) {
  if (v.empty()) return std::string();
  if (v.size() > 64 || v.front() == '-') {
    return Error{"must be a group name or number, got '" + std::string(v) + "'"};
  }
  for (const char ch : v) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
    if (!ok) return Error{"must be a group name or number, got '" + std::string(v) + "'"};
  }
  return std::string(v);
}

const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = {
      {"SocketPath",
       [](EgpuConfig& c, std::string_view v) -> Status {
         auto r = parse_absolute_path(v);
         if (!r) return Error{r.error()};
         // A path longer than a socket address holds (107 bytes, with
         // ".root" for root's socket beside it) is reached through its
         // directory as /proc/thread-self/fd/N/NAME (UnixAddress): its name,
         // with ".root", must fit there.
         const size_t name_bytes = r->size() - r->rfind('/') - 1;
         constexpr size_t kMaxNameBytes = 107 - (sizeof "/proc/thread-self/fd/2147483647/" - 1) - 5;
         if (r->size() + 5 > 107 && name_bytes > kMaxNameBytes) {
           return Error{"names a socket of " + std::to_string(name_bytes) + " bytes in a path of " +
                        std::to_string(r->size()) + "; a socket's name may have " +
                        std::to_string(kMaxNameBytes) +
                        " where the path is over 102 (what an address holds past its "
                        "directory, less \".root\")"};
         }
         // The users' sockets beside it: SocketPath.users/UID.
         constexpr size_t kMaxBytes = 4000;
         if (r->size() > kMaxBytes) {
           return Error{"is " + std::to_string(r->size()) + " bytes long; a socket path may have " +
                        std::to_string(kMaxBytes)};
         }
         c.socket_path = std::move(*r);
         return {};
       }},
      {"RuntimeDir", path_field(&EgpuConfig::runtime_dir)},
      {"SliceMs", int_field(&EgpuConfig::slice_ms, 1, 50)},
      {"WindowMs", int_field(&EgpuConfig::window_ms, 100, 60000)},
      {"PreemptThresholdPct",
       [](EgpuConfig& c, std::string_view v) -> Status {
         auto r = parse_number(v, 0, 100);
         if (!r) return Error{r.error()};
         c.preempt_threshold_pct = *r;
         return {};
       }},
      {"MinHoldUs", int_field(&EgpuConfig::min_hold_us, 0, 50000)},
      {"DefaultMode",
       [](EgpuConfig& c, std::string_view v) -> Status {
         auto m = parse_mode(v);
         if (!m) return Error{"must be burst or cap, got '" + std::string(v) + "'"};
         // Lending gives away share Slurm granted: only its owner may choose it.
         if (*m == Mode::kLend)
           return Error{"lend is each step's own choice (--egpu-mode=lend), not a default"};
         c.default_mode = *m;
         return {};
       }},
      {"FailMode", enum_field(&EgpuConfig::fail_mode,
                              {{"open", FailMode::kOpen}, {"closed", FailMode::kClosed}})},
      {"HeartbeatMs", int_field(&EgpuConfig::heartbeat_ms, 10, 10000)},
      {"HeartbeatTimeoutMs", int_field(&EgpuConfig::heartbeat_timeout_ms, 50, 600000)},
      {"InflightUs", int_field(&EgpuConfig::inflight_us, 100, 100000)},
      {"InflightAloneUs", int_field(&EgpuConfig::inflight_alone_us, 0, 1000000)},
      {"HandoverTailUs", int_field(&EgpuConfig::handover_tail_us, 0, 100000)},
      {"GangPeriodMs", int_field(&EgpuConfig::gang_period_ms, 0, 1000)},
      {"GangClock", enum_field(&EgpuConfig::gang_clock, {{"adjtimex", GangClock::kAdjtimex},
                                                         {"shared", GangClock::kShared}})},
      {"MetricsAddress",
       [](EgpuConfig& c, std::string_view v) -> Status {
         if (v.empty()) {
           c.metrics_address.clear();
           return {};
         }
         auto r = split_loopback_address(v);
         if (!r) return Error{r.error()};
         c.metrics_address = std::string(v);
         return {};
       }},
      {"LogTarget", enum_field(&EgpuConfig::log_target,
                               {{"stderr", LogTarget::kStderr}, {"syslog", LogTarget::kSyslog}})},
      {"LogLevel", enum_field(&EgpuConfig::log_level, {{"error", LogLevel::kError},
                                                       {"warning", LogLevel::kWarning},
                                                       {"info", LogLevel::kInfo},
                                                       {"debug", LogLevel::kDebug}})},
      {"GpuCount", int_field(&EgpuConfig::gpu_count, 1, 64)},
      {"GpuMemory",
       [](EgpuConfig& c, std::string_view v) -> Status {
         auto r = parse_byte_size(v);
         if (!r) return Error{r.error()};
         if (*r == 0) return Error{"must be more than 0"};
         c.gpu_memory_bytes = *r;
         return {};
       }},
      {"TopologyXml", path_field(&EgpuConfig::topology_xml)},
      {"MaxInstancesPerGpu", int_field(&EgpuConfig::max_instances_per_gpu, 1, 256)},
      {"ShimLibrary", path_field(&EgpuConfig::shim_library)},
      {"MonitorGroup", parsed_field(&EgpuConfig::monitor_group, parse_group_name)},
      {"PackNodes", enum_field(&EgpuConfig::pack_nodes, {{"yes", true}, {"no", false}})},
      {"StepRecords", enum_field(&EgpuConfig::step_records, {{"yes", true}, {"no", false}})},
      {"StepRecordInterval", int_field(&EgpuConfig::step_record_interval_s, 0, 86400)},
      {"UnmanagedProcesses",
       enum_field(&EgpuConfig::unmanaged_processes, {{"kill", UnmanagedAction::kKill},
                                                     {"report", UnmanagedAction::kReport},
                                                     {"off", UnmanagedAction::kOff}})},
      {"GpuDeviceFiles", parsed_field(&EgpuConfig::gpu_device_files, parse_device_file_pattern)},
  };
  return specs;
}

// The known key nearest to `key` (lower case) by edit distance, if it is
// within a third of the key's length: a typo's likely meaning.
std::string nearest_key(const std::string& key) {
  std::string best;
  size_t best_distance = key.size() / 3 + 1;
  for (const auto& spec : key_specs()) {
    const std::string name = lower(spec.name);
    std::vector<size_t> row(name.size() + 1);
    for (size_t j = 0; j <= name.size(); ++j)
      row[j] = j;
    for (size_t i = 1; i <= key.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= name.size(); ++j) {
        const size_t above = row[j];
        row[j] =
            std::min({row[j] + 1, row[j - 1] + 1, diagonal + (key[i - 1] == name[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    if (row[name.size()] < best_distance) {
      best_distance = row[name.size()];
      best = spec.name;
    }
  }
  return best;
}

}  // namespace

std::string EgpuConfig::gpu_device_file(uint32_t gpu) const {
  std::string path = gpu_device_files;
  if (const size_t at = path.find("%d"); at != std::string::npos)
    path.replace(at, 2, std::to_string(gpu));
  return path;
}

std::string EgpuConfig::metrics_host() const {
  auto r = split_loopback_address(metrics_address);
  return r ? r->first : std::string();
}

int EgpuConfig::metrics_port() const {
  auto r = split_loopback_address(metrics_address);
  return r ? r->second : 0;
}

std::vector<std::string> egpu_config_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : key_specs())
    keys.emplace_back(spec.name);
  return keys;
}

Result<EgpuConfig> parse_egpu_config(std::string_view text, std::string_view source) {
  auto pairs = parse_key_values(text, source);
  if (!pairs) return Error{pairs.error()};
  EgpuConfig config;
  std::map<std::string, int> line_of;  // by lower-case key
  for (const auto& kv : *pairs) {
    const std::string where = std::string(source) + ":" + std::to_string(kv.line) + ": ";
    const std::string key = lower(kv.key);
    auto spec = std::find_if(key_specs().begin(), key_specs().end(),
                             [&](const KeySpec& s) { return lower(s.name) == key; });
    if (spec == key_specs().end()) {
      std::string known;
      for (const auto& s : key_specs())
        known += (known.empty() ? "" : ", ") + std::string(s.name);
      const std::string near = nearest_key(key);
      return Error{where + "unknown key '" + kv.key + "'" +
                   (near.empty() ? "" : "; did you mean " + near + "?") + " (known keys: " + known +
                   ")"};
    }
    if (!line_of.emplace(key, kv.line).second) {
      return Error{where + "key '" + kv.key + "' is set twice"};
    }
    if (Status s = spec->set(config, kv.value); !s) {
      return Error{where + spec->name + "=" + kv.value + ": " + s.error()};
    }
  }
  // Rules between two keys: each is named with its line, or as a default.
  const auto setting = [&](std::string_view name, long long value) {
    const auto it = line_of.find(lower(name));
    return std::string(name) + "=" + std::to_string(value) +
           (it == line_of.end() ? " (the default)" : " (line " + std::to_string(it->second) + ")");
  };
  const std::string where = std::string(source) + ": ";
  if (config.heartbeat_timeout_ms < 2 * config.heartbeat_ms) {
    return Error{where + setting("HeartbeatTimeoutMs", config.heartbeat_timeout_ms) +
                 " must be at least twice " + setting("HeartbeatMs", config.heartbeat_ms)};
  }
  if (config.gang_period_ms != 0 && config.gang_period_ms * 1000 < 2 * config.inflight_us) {
    return Error{where + setting("GangPeriodMs", config.gang_period_ms) +
                 " must be 0 or at least twice " + setting("InflightUs", config.inflight_us) +
                 ": a window's boundaries are kept by the in-flight bound"};
  }
  if (config.inflight_alone_us != 0 && config.inflight_alone_us < config.inflight_us) {
    return Error{where + setting("InflightAloneUs", config.inflight_alone_us) +
                 " must be 0 or at least " + setting("InflightUs", config.inflight_us)};
  }
  return config;
}

Result<EgpuConfig> load_egpu_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read configuration file " + path + ": " + std::strerror(errno)};
  // A directory opens and reads as nothing: the defaults, without a word.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error{"configuration file " + path + " is not a regular file" +
                 (S_ISDIR(st.st_mode) ? " (a directory)" : "")};
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad())
    return Error{"cannot read configuration file " + path + ": " + std::strerror(errno)};
  return parse_egpu_config(text.str(), path);
}

}  // namespace egpu::config
