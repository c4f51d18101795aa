#include "nodeagent/egpuctl/removal_table.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/accounting/step_usage.h"

namespace egpu::ctl {

Result<std::string> removal_table(std::string_view reply) {
  const nlohmann::json j = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  const auto removed = j.is_object() ? j.find("removed") : j.end();
  if (removed == j.end() || !removed->is_number_unsigned())
    return Error{"the agent's remove reply has no count of removed instances"};
  auto usage = accounting::usage_from_json(reply);
  if (!usage) return Error{usage.error()};
  const auto count = removed->get<unsigned long long>();
  std::string out =
      "removed " + std::to_string(count) + (count == 1 ? " instance\n" : " instances\n");
  if (usage->empty()) return out;
  char line[256];
  std::snprintf(line, sizeof line, "%-11s %3s %5s %10s %10s %6s %12s %11s  %s\n", "STEP", "GPU",
                "UNITS", "ELAPSED_S", "DEVICE_S", "SHARE", "MEM_PEAK_MIB", "THROTTLED_S", "NOTE");
  out += line;
  for (const accounting::StepUsage& u : *usage) {
    std::string note;
    if (u.totals.partial != 0) note = "partial";
    if (u.totals.agent_restarts > 0) {
      note += (note.empty() ? "" : ", ") + std::to_string(u.totals.agent_restarts) +
              " agent restart(s)";
    }
    std::snprintf(line, sizeof line, "%-11s %3u %5u %10.1f %10.1f %6.3f %12llu %11.1f  %s",
                  u.step.empty() ? "-" : u.step.c_str(), u.gpu, u.units, u.elapsed_s(),
                  u.device_s(), u.achieved_share(),
                  static_cast<unsigned long long>(u.totals.mem_peak_bytes >> 20), u.throttled_s(),
                  note.c_str());
    std::string text = line;
    while (!text.empty() && text.back() == ' ')
      text.pop_back();
    out += text + "\n";
  }
  return out;
}

}  // namespace egpu::ctl
