#include "core/slo/slo_memory_codec.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/util/json_integer.h"

namespace egpu::slo {
namespace {

using nlohmann::json;

// Far above what a controller keeps (SloParams: 5 windows, 1200 periods of
// demand, 16 windows per model point, 256 instances per GPU), so a damaged
// file cannot make the agent build a huge memory it would then cut down.
constexpr std::size_t kMaxWindows = 64;
constexpr std::size_t kMaxUsed = 1u << 16;
constexpr std::size_t kMaxPointWindows = 1024;
constexpr std::size_t kMaxInstances = 1024;

std::optional<uint64_t> instance_id(const std::string& key) {
  uint64_t id = 0;
  const char* last = key.data() + key.size();
  const auto [at, why] = std::from_chars(key.data(), last, id);
  if (key.empty() || why != std::errc() || at != last || id == 0) return std::nullopt;
  return id;
}

json encode_histogram(const LatencyHistogram& h) {
  json buckets = json::array();  // [bucket, count] of the buckets with samples
  for (std::size_t b = 0; b < h.counts().size(); ++b) {
    if (h.counts()[b] != 0) buckets.push_back({b, h.counts()[b]});
  }
  return buckets;
}

json encode_instance(const SloController::Memory& m) {
  json model = json::array();
  for (const std::vector<int64_t>& point : m.model.windows())
    model.push_back(point);
  json window = json::array();
  for (const LatencyHistogram& h : m.window)
    window.push_back(encode_histogram(h));
  // The objective as its two integers: its text rounds the target to
  // microseconds, and a restored memory must match the objective exactly.
  const json objective = m.objective ? json{{"percentile_milli", m.objective->percentile_milli},
                                            {"target_ns", m.objective->target_ns}}
                                     : json(nullptr);
  return json{{"objective", objective},
              {"borrowed", m.borrowed},
              {"since_change", m.since_change},
              {"calm", m.calm},
              {"idle", m.idle},
              {"windows_judged", m.windows_judged},
              {"windows_met", m.windows_met},
              {"used", m.used},
              {"window", window},
              {"model", model}};
}

// nullopt unless `j` is {percentile_milli, target_ns} within the ranges
// parse_objective allows.
std::optional<LatencyObjective> objective_from(const json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto p = j.find("percentile_milli");
  const auto t = j.find("target_ns");
  if (p == j.end() || t == j.end()) return std::nullopt;
  LatencyObjective o;
  if (const auto v = json_integer<uint32_t>(*p); v && *v > 0 && *v < 100'000) {
    o.percentile_milli = *v;
  } else {
    return std::nullopt;
  }
  if (const auto v = json_integer<int64_t>(*t); v && *v >= kMinTargetNs && *v <= kMaxTargetNs) {
    o.target_ns = *v;
  } else {
    return std::nullopt;
  }
  return o;
}

Result<LatencyHistogram> decode_histogram(const json& j) {
  if (!j.is_array()) return Error{"a window is not a list of [bucket, count]"};
  LatencyHistogram::Counts counts{};
  for (const json& e : j) {
    if (!e.is_array() || e.size() != 2) return Error{"a window entry is not [bucket, count]"};
    const auto bucket = json_integer<uint32_t>(e[0]);
    const auto count = json_integer<uint64_t>(e[1]);
    if (!bucket || *bucket >= kLatencyBuckets)
      return Error{"a window's bucket is not in [0, " + std::to_string(kLatencyBuckets) + ")"};
    if (!count) return Error{"a window's count is not a count"};
    counts[*bucket] = *count;
  }
  return LatencyHistogram::delta(counts, LatencyHistogram::Counts{});
}

Result<SloController::Memory> decode_instance(const json& j) {
  if (!j.is_object()) return Error{"not an object"};
  SloController::Memory m;
  const auto field = [&](const char* key) -> const json* {
    const auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  };
  const json* objective = field("objective");
  if (objective == nullptr) return Error{"no objective"};
  if (!objective->is_null()) {
    m.objective = objective_from(*objective);
    if (!m.objective)
      return Error{"objective: not {percentile_milli in (0, 100000), target_ns in [" +
                   std::to_string(kMinTargetNs) + ", " + std::to_string(kMaxTargetNs) + "]}"};
  }
  const auto int_field = [&](const char* key, auto* into) -> Status {
    const json* f = field(key);
    using T = std::remove_pointer_t<decltype(into)>;
    const auto v = f == nullptr ? std::nullopt : json_integer<T>(*f);
    if (!v) return Error{std::string(key) + ": missing or not an integer in range"};
    *into = *v;
    return {};
  };
  for (Status s :
       {int_field("borrowed", &m.borrowed), int_field("since_change", &m.since_change),
        int_field("calm", &m.calm), int_field("idle", &m.idle),
        int_field("windows_judged", &m.windows_judged), int_field("windows_met", &m.windows_met)}) {
    if (!s) return Error{s.error()};
  }
  const json* used = field("used");
  if (used == nullptr || !used->is_array()) return Error{"used: missing or not a list"};
  if (used->size() > kMaxUsed) return Error{"used: more than " + std::to_string(kMaxUsed)};
  for (const json& u : *used) {
    if (!u.is_number() || !std::isfinite(u.get<double>()))
      return Error{"used: not a list of numbers"};
    m.used.push_back(u.get<double>());
  }
  const json* window = field("window");
  if (window == nullptr || !window->is_array()) return Error{"window: missing or not a list"};
  if (window->size() > kMaxWindows)
    return Error{"window: more than " + std::to_string(kMaxWindows) + " periods"};
  for (const json& h : *window) {
    auto decoded = decode_histogram(h);
    if (!decoded) return Error{"window: " + decoded.error()};
    m.window.push_back(*decoded);
  }
  const json* model = field("model");
  if (model == nullptr || !model->is_array() || model->size() != LatencyModel::kHeadrooms.size())
    return Error{"model: missing or not " + std::to_string(LatencyModel::kHeadrooms.size()) +
                 " lists of latencies"};
  LatencyModel::Windows windows;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const json& point = (*model)[i];
    if (!point.is_array()) return Error{"model: a point is not a list of latencies"};
    if (point.size() > kMaxPointWindows)
      return Error{"model: a point has more than " + std::to_string(kMaxPointWindows) +
                   " latencies"};
    for (const json& latency : point) {
      const auto ns = json_integer<int64_t>(latency);
      if (!ns) return Error{"model: a latency is not an integer of nanoseconds"};
      windows[i].push_back(*ns);
    }
  }
  m.model = LatencyModel::from_windows(windows);
  return m;
}

}  // namespace

std::string encode_slo_memory(const SloMemory& memory) {
  json loans = json::object();
  for (const auto& [id, units] : memory.loans)
    loans[std::to_string(id)] = units;
  json instances = json::object();
  for (const auto& [id, m] : memory.instances)
    instances[std::to_string(id)] = encode_instance(m);
  return json{{"version", SloMemory::kVersion}, {"loans", loans}, {"instances", instances}}.dump();
}

Result<SloMemory> decode_slo_memory(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error{"not a JSON object"};
  const auto version = j.find("version");
  if (version == j.end() || json_integer<int64_t>(*version) != SloMemory::kVersion) {
    return Error{"not version " + std::to_string(SloMemory::kVersion) + " of the format"};
  }
  SloMemory out;
  const auto loans = j.find("loans");
  if (loans == j.end() || !loans->is_object()) return Error{"loans: missing or not an object"};
  if (loans->size() > kMaxInstances)
    return Error{"loans: more than " + std::to_string(kMaxInstances) + " instances"};
  for (const auto& [key, units] : loans->items()) {
    const auto id = instance_id(key);
    const auto n = json_integer<int32_t>(units);
    if (!id) return Error{"loans: '" + key + "' is not an instance id"};
    if (!n || *n < -100 || *n > 100)
      return Error{"loans: instance " + key + ": not a number of units in [-100, 100]"};
    out.loans[*id] = *n;
  }
  const auto instances = j.find("instances");
  if (instances == j.end() || !instances->is_object())
    return Error{"instances: missing or not an object"};
  if (instances->size() > kMaxInstances)
    return Error{"instances: more than " + std::to_string(kMaxInstances)};
  for (const auto& [key, value] : instances->items()) {
    const auto id = instance_id(key);
    if (!id) return Error{"instances: '" + key + "' is not an instance id"};
    auto m = decode_instance(value);
    if (!m) return Error{"instance " + key + ": " + m.error()};
    out.instances[*id] = std::move(*m);
  }
  return out;
}

}  // namespace egpu::slo
