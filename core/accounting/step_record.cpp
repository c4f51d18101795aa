#include "core/accounting/step_record.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/protocol/messages.h"

namespace egpu::accounting {
namespace {

constexpr size_t kMaxRecordLength = 512;

std::string fixed3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", std::isfinite(v) && v >= 0 ? v : 0.0);
  return buf;
}

bool all_of(std::string_view s, bool (*ok)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!ok(c)) return false;
  return true;
}

bool digit(char c) {
  return c >= '0' && c <= '9';
}

bool node_char(char c) {
  return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
         c == '.';
}

// An unsigned integer or a decimal with digits on both sides of the point.
bool number(std::string_view v) {
  if (v.size() > 24) return false;
  const size_t dot = v.find('.');
  if (dot == std::string_view::npos) return all_of(v, digit);
  return all_of(v.substr(0, dot), digit) && all_of(v.substr(dot + 1), digit);
}

bool step_name(std::string_view v) {
  const size_t dot = v.find('.');
  if (dot == std::string_view::npos || v.size() > 32) return false;
  const std::string_view step = v.substr(dot + 1);
  return all_of(v.substr(0, dot), digit) &&
         (all_of(step, digit) || step == "batch" || step == "interactive" || step == "extern");
}

}  // namespace

bool valid_node_name(std::string_view name) {
  return name.size() <= 64 && all_of(name, node_char);
}

std::string format_step_record(const StepRecord& r) {
  const StepUsage& u = r.usage;
  const uint64_t mib = (u.totals.mem_peak_bytes + (1u << 20) - 1) >> 20;  // rounded up
  std::string s = "egpu step=" + std::to_string(r.job_id) + "." + protocol::step_label(r.step_id) +
                  " node=" + r.node + " gpu=" + std::to_string(u.gpu) +
                  " units=" + std::to_string(u.units) + " elapsed_s=" + fixed3(u.elapsed_s()) +
                  " device_s=" + fixed3(u.device_s()) + " share=" + fixed3(u.achieved_share()) +
                  " mem_peak_mib=" + std::to_string(mib) +
                  " throttled_s=" + fixed3(u.throttled_s());
  if (u.totals.agent_restarts > 0)
    s += " agent_restarts=" + std::to_string(u.totals.agent_restarts);
  if (u.totals.partial != 0) s += " partial=1";
  if (r.running) s += " running=1";
  return s;
}

Result<RecordKey> parse_step_record(std::string_view text,
                                    std::vector<std::pair<std::string, std::string>>* fields) {
  static constexpr std::string_view kKeys[] = {
      "step",  "node",         "gpu",         "units",          "elapsed_s", "device_s",
      "share", "mem_peak_mib", "throttled_s", "agent_restarts", "partial",   "running"};
  static constexpr size_t kRequired = 9;
  const std::string shown(text.substr(0, 80));
  if (text.size() > kMaxRecordLength)
    return Error{"egpu record '" + shown + "...' is longer than " +
                 std::to_string(kMaxRecordLength) + " bytes"};
  if (!text.starts_with("egpu "))
    return Error{"'" + shown + "' is not an egpu record (one starts with 'egpu ')"};
  std::vector<std::string_view> tokens;
  for (std::string_view rest = text.substr(5); !rest.empty();) {
    const size_t sp = rest.find(' ');
    tokens.push_back(rest.substr(0, sp));
    rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
    if (sp != std::string_view::npos && rest.empty()) tokens.push_back({});
  }
  RecordKey key;
  size_t k = 0;
  for (const std::string_view token : tokens) {
    const size_t eq = token.find('=');
    const std::string_view name = token.substr(0, eq), value = token.substr(eq + 1);
    // Keys come in the one order format_step_record writes them; the
    // optional ones may be left out.
    while (k < std::size(kKeys) && name != kKeys[k] && k >= kRequired)
      ++k;
    if (eq == std::string_view::npos || k >= std::size(kKeys) || name != kKeys[k])
      return Error{"unexpected '" + std::string(token) + "' in egpu record '" + std::string(text) +
                   "'"};
    bool ok = false;
    if (name == "step") {
      ok = step_name(value);
      key.step = value;
    } else if (name == "node") {
      ok = valid_node_name(value);
      key.node = value;
    } else if (name == "gpu") {
      ok = value.size() <= 4 && all_of(value, digit);
      if (ok) key.gpu = static_cast<uint32_t>(std::stoul(std::string(value)));
    } else if (name == "partial" || name == "running") {
      ok = value == "1";
    } else {
      ok = number(value);
    }
    if (!ok)
      return Error{"bad value in '" + std::string(token) + "' of egpu record '" +
                   std::string(text) + "'"};
    if (fields != nullptr) fields->emplace_back(name, value);
    ++k;
  }
  if (k < kRequired)
    return Error{"egpu record '" + std::string(text) + "' lacks " + std::string(kKeys[k])};
  return key;
}

bool is_running_record(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> fields;
  return parse_step_record(text, &fields) && !fields.empty() && fields.back().first == "running";
}

}  // namespace egpu::accounting
