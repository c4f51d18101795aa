#include "core/accounting/step_usage.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/util/json_integer.h"

namespace egpu::accounting {
namespace {

uint64_t add_saturating(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

// A fold lives as long as its instance in one agent, whose counters only
// grow; one that reads less than before (a wait shown while in progress,
// then settled at another time) adds nothing until it passes its old value.
uint64_t progress(uint64_t now, uint64_t last) {
  return now > last ? now - last : 0;
}

}  // namespace

void UsageFold::observe(UsageTotals& totals, uint64_t charged_ns, uint64_t throttled_ns,
                        uint64_t memory_bytes, uint64_t memory_cap) {
  totals.device_ns = add_saturating(totals.device_ns, progress(charged_ns, last_charged_));
  totals.throttled_ns =
      add_saturating(totals.throttled_ns, progress(throttled_ns, last_throttled_));
  last_charged_ = std::max(last_charged_, charged_ns);
  last_throttled_ = std::max(last_throttled_, throttled_ns);
  totals.mem_peak_bytes = std::max(totals.mem_peak_bytes, std::min(memory_bytes, memory_cap));
}

double StepUsage::elapsed_s() const {
  return ended_unix_ns > totals.started_unix_ns
             ? static_cast<double>(ended_unix_ns - totals.started_unix_ns) / 1e9
             : 0.0;
}

double StepUsage::achieved_share() const {
  const double elapsed = elapsed_s();
  // Charges are trimmed to the time that passed, so this is at most 1 but
  // for the clocks' rounding.
  return elapsed > 0 ? std::min(1.0, device_s() / elapsed) : 0.0;
}

namespace {

nlohmann::json usage_list(const std::vector<StepUsage>& usage) {
  nlohmann::json list = nlohmann::json::array();
  for (const StepUsage& u : usage) {
    list.push_back({{"gpu", u.gpu},
                    {"units", u.units},
                    {"started_unix_ns", u.totals.started_unix_ns},
                    {"ended_unix_ns", u.ended_unix_ns},
                    {"device_ns", u.totals.device_ns},
                    {"throttled_ns", u.totals.throttled_ns},
                    {"mem_peak_bytes", u.totals.mem_peak_bytes},
                    {"agent_restarts", u.totals.agent_restarts},
                    {"partial", u.totals.partial != 0}});
    if (!u.step.empty()) list.back()["step"] = u.step;
  }
  return list;
}

}  // namespace

std::string removal_to_json(size_t removed, const std::vector<StepUsage>& usage) {
  return nlohmann::json{{"removed", removed}, {"usage", usage_list(usage)}}.dump();
}

std::string usage_to_json(const std::vector<StepUsage>& usage) {
  return nlohmann::json{{"usage", usage_list(usage)}}.dump();
}

Result<std::vector<StepUsage>> usage_from_json(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Error{"the agent's usage reply is not a JSON object"};
  const auto list = j.find("usage");
  if (list == j.end() || !list->is_array())
    return Error{"the agent's usage reply has no usage list"};
  std::vector<StepUsage> out;
  for (const nlohmann::json& e : *list) {
    if (!e.is_object()) return Error{"a usage entry is not an object"};
    StepUsage u;
    // Each field must be there with the right kind of number.
    auto get = [&](const char* key, auto* into) -> bool {
      const auto f = e.find(key);
      if (f == e.end()) return false;
      const auto v = json_integer<std::remove_pointer_t<decltype(into)>>(*f);
      if (!v) return false;
      *into = *v;
      return true;
    };
    const auto partial = e.find("partial");
    if (!get("gpu", &u.gpu) || !get("units", &u.units) ||
        !get("started_unix_ns", &u.totals.started_unix_ns) ||
        !get("ended_unix_ns", &u.ended_unix_ns) || !get("device_ns", &u.totals.device_ns) ||
        !get("throttled_ns", &u.totals.throttled_ns) ||
        !get("mem_peak_bytes", &u.totals.mem_peak_bytes) ||
        !get("agent_restarts", &u.totals.agent_restarts) || partial == e.end() ||
        !partial->is_boolean()) {
      return Error{"a usage entry lacks a field or has one out of range: " + e.dump()};
    }
    u.totals.partial = partial->get<bool>() ? 1 : 0;
    if (const auto step = e.find("step"); step != e.end()) {
      // A label as protocol::step_label writes one: short, printable.
      if (!step->is_string() || step->get_ref<const std::string&>().size() > 16 ||
          step->get_ref<const std::string&>().find_first_not_of(
              "abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos) {
        return Error{"a usage entry's step is not a step label: " + e.dump()};
      }
      u.step = step->get<std::string>();
    }
    out.push_back(u);
  }
  return out;
}

}  // namespace egpu::accounting
