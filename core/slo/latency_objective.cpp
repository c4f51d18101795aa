#include "core/slo/latency_objective.h"

#include <cctype>
#include <cstdio>

namespace egpu::slo {
namespace {

constexpr const char* kForm =
    "an objective is pP:T, e.g. p99:40ms (P in (0,100), T in us, ms or s), or off";

// A decimal number with at most `max_decimals` digits after the point, scaled
// by 10^max_decimals (UINT64_MAX if larger): nullopt if it is not one.
std::optional<uint64_t> parse_fixed(std::string_view text, int max_decimals) {
  const std::size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && frac.empty())) return std::nullopt;
  if (frac.size() > static_cast<std::size_t>(max_decimals)) return std::nullopt;
  uint64_t value = 0;
  bool saturated = false;
  for (std::string_view part : {whole, frac}) {
    for (char c : part) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      saturated = saturated || value > (UINT64_MAX - 9) / 10;
      if (!saturated) value = value * 10 + static_cast<uint64_t>(c - '0');
    }
  }
  for (std::size_t i = frac.size(); i < static_cast<std::size_t>(max_decimals); ++i) {
    saturated = saturated || value > UINT64_MAX / 10;
    if (!saturated) value *= 10;
  }
  return saturated ? UINT64_MAX : value;
}

Result<int64_t> parse_target(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    uint64_t ns_per_unit;
  };
  // "ms" and "us" before "s": the longest suffix that matches.
  for (const Unit unit : {Unit{"ms", 1'000'000}, Unit{"us", 1'000}, Unit{"s", 1'000'000'000}}) {
    if (!text.ends_with(unit.suffix)) continue;
    const std::string_view number = text.substr(0, text.size() - unit.suffix.size());
    const auto thousandths = parse_fixed(number, 3);
    if (!thousandths) break;
    if (*thousandths > static_cast<uint64_t>(kMaxTargetNs) * 1000 / unit.ns_per_unit) {
      return Error{"the latency target '" + std::string(text) + "' is above 600s"};
    }
    const auto ns = static_cast<int64_t>(*thousandths * unit.ns_per_unit / 1000);
    if (ns < kMinTargetNs) {
      return Error{"the latency target '" + std::string(text) +
                   "' is below 1ms, finer than time slices can hold"};
    }
    return ns;
  }
  return Error{"the latency target '" + std::string(text) +
               "' is not a number with a unit (us, ms or s)"};
}

}  // namespace

Result<std::optional<LatencyObjective>> parse_objective(std::string_view text) {
  std::string lower(text);
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "off") return std::optional<LatencyObjective>{};
  const std::size_t colon = lower.find(':');
  if (lower.size() < 2 || lower[0] != 'p' || colon == std::string::npos) {
    return Error{"'" + std::string(text) + "' is not an objective: " + kForm};
  }
  const std::string_view percentile = std::string_view(lower).substr(1, colon - 1);
  const auto milli = parse_fixed(percentile, 3);
  if (!milli) {
    return Error{"the percentile 'p" + std::string(percentile) + "' is not a number: " + kForm};
  }
  if (*milli == 0 || *milli >= 100'000) {
    return Error{"the percentile 'p" + std::string(percentile) +
                 "' is out of range: it must be above p0 and below p100"};
  }
  auto target = parse_target(std::string_view(lower).substr(colon + 1));
  if (!target) return Error{target.error()};
  return std::optional<LatencyObjective>{LatencyObjective{static_cast<uint32_t>(*milli), *target}};
}

std::string to_string(const std::optional<LatencyObjective>& objective) {
  if (!objective) return "off";
  auto fixed = [](uint64_t thousandths) {
    std::string s = std::to_string(thousandths / 1000);
    if (const uint64_t frac = thousandths % 1000; frac != 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, ".%03u", static_cast<unsigned>(frac));
      std::string f(buf);
      while (f.back() == '0')
        f.pop_back();
      s += f;
    }
    return s;
  };
  const uint64_t us = static_cast<uint64_t>(objective->target_ns) / 1000;
  return "p" + fixed(objective->percentile_milli) + ":" + fixed(us) + "ms";
}

}  // namespace egpu::slo
