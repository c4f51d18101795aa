// egpuctl slo INSTANCE OBJECTIVE|off: sets or clears a latency objective
// (owner or root). Parsed here with the same parser as --egpu-slo, so a bad
// value is refused before anything is sent.
#include <cstdio>

#include "core/slo/latency_objective.h"
#include "nodeagent/egpuctl/agent_query.h"
#include "nodeagent/egpuctl/commands.h"

namespace egpu::ctl {

int cmd_slo(const Globals& g, const std::vector<std::string>& args) {
  if (args.size() != 2) return fail("usage: egpuctl slo INSTANCE p99:40ms|off", 2);
  auto sel = parse_selector(args[0]);
  if (!sel) return fail(sel.error(), 2);
  auto objective = slo::parse_objective(args[1]);
  if (!objective) return fail("objective: " + objective.error(), 2);
  std::vector<uint64_t> ids;
  if (sel->id != 0) {
    ids.push_back(sel->id);  // by id the agent itself decides who may
  } else {
    auto status = fetch_status(g.socket_path);
    if (!status) return fail(status.error());
    auto found = resolve(*status, *sel);
    if (!found) return fail(found.error());
    for (const auto& inst : *found)
      ids.push_back(inst.value("id", uint64_t{0}));
  }
  protocol::ObjectiveRequest r{};
  if (objective->has_value()) {
    r.percentile_milli = (*objective)->percentile_milli;
    r.target_ns = (*objective)->target_ns;
  }
  for (uint64_t id : ids) {
    r.instance_id = id;
    auto text = call_for_text(g.socket_path, r);
    if (!text) return fail("instance " + std::to_string(id) + ": " + text.error());
    if (g.json) {
      std::printf("%s\n", text->c_str());
    } else {
      std::printf("instance %llu: latency objective %s\n", static_cast<unsigned long long>(id),
                  slo::to_string(*objective).c_str());
    }
  }
  return 0;
}

}  // namespace egpu::ctl
