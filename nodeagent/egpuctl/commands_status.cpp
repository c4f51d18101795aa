#include <cstdio>
#include <optional>

#include "core/config/byte_size.h"
#include "nodeagent/egpuctl/agent_query.h"
#include "nodeagent/egpuctl/commands.h"
#include "nodeagent/egpuctl/slurm_relay.h"

namespace egpu::ctl {
namespace {

using nlohmann::json;

std::string pct(const json& j, const char* key) {
  if (!j.contains(key)) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", j[key].get<double>());
  return buf;
}

std::string ms(const json& j, const char* key) {
  if (!j.contains(key)) return "-";
  char buf[24];
  std::snprintf(buf, sizeof buf, "%.1f ms", j[key].get<double>());
  return buf;
}

void print_instance_header() {
  std::printf("  %-6s %-16s %-6s %5s %-5s %7s %8s  %-22s %12s %12s %5s\n", "ID", "JOB.STEP", "UID",
              "UNITS", "MODE", "TARGET", "ACHIEVED", "MEMORY USED/QUOTA", "THROTTLED",
              "LONGEST WAIT", "PROCS");
}

void print_instance(const json& i) {
  const std::string step =
      std::to_string(i.value("job", uint64_t{0})) + "." + i.value("step", std::string());
  const std::string mem = config::format_byte_size(i.value("memory_used_bytes", uint64_t{0})) +
                          "/" +
                          config::format_byte_size(i.value("memory_quota_bytes", uint64_t{0}));
  std::printf("  %-6llu %-16s %-6u %5u %-5s %7s %8s  %-22s %12s %12s %5u\n",
              static_cast<unsigned long long>(i.value("id", uint64_t{0})), step.c_str(),
              i.value("uid", 0u), i.value("units", 0u), i.value("mode", std::string()).c_str(),
              pct(i, "target_pct").c_str(), pct(i, "achieved_pct").c_str(), mem.c_str(),
              ms(i, "throttled_ms").c_str(), ms(i, "longest_wait_ms").c_str(),
              i.value("processes", 0u));
  // The latency control's part: an objective, or share lent or borrowed;
  // and a gang's window.
  const bool objective = i.contains("objective") && !i["objective"].is_null();
  const int borrowed = i.value("borrowed_units", 0);
  const bool gang = i.contains("gang") && !i["gang"].is_null();
  if (!objective && borrowed == 0 && !gang) return;
  std::printf("         ");
  if (gang) {
    std::printf(" gang window %.1f ms of every %.1f ms at +%.1f ms",
                i["gang"].value("length_ms", 0.0), i["gang"].value("period_ms", 0.0),
                i["gang"].value("offset_ms", 0.0));
  }
  if (objective) {
    const bool judged = i.contains("slo_attainment") && !i["slo_attainment"].is_null();
    char met[16] = "-";
    if (judged) std::snprintf(met, sizeof met, "%.1f%%", i["slo_attainment"].get<double>() * 100.0);
    const bool measured = i.contains("latency_ms") && !i["latency_ms"].is_null();
    std::printf(" objective %s  latency %s  met in %s of windows",
                i["objective"].get<std::string>().c_str(),
                measured ? ms(i, "latency_ms").c_str() : "-", met);
  }
  if (borrowed > 0) std::printf("  borrowed %d units", borrowed);
  if (borrowed < 0) std::printf("  lent %d units", -borrowed);
  std::printf("\n");
}

// The status of one agent as text; with only_job, just the GPUs and
// instances of that job.
void print_status(const json& s, std::optional<uint64_t> only_job) {
  // operator[] of a const object without the key is undefined behaviour in
  // nlohmann::json, and these answers may come from another version or,
  // relayed, from another node: value(), or operator[] after contains().
  const json agent = s.value("agent", json::object());
  std::printf("node %s  agent pid %d  slice %d ms  window %d ms  fail mode %s\n",
              s.value("node", std::string("?")).c_str(), agent.value("pid", 0),
              agent.value("slice_ms", 0), agent.value("window_ms", 0),
              agent.value("fail_mode", std::string("?")).c_str());
  if (s.contains("clock") && agent.value("gang_period_ms", 0) > 0) {
    const json& c = s["clock"];
    // Agents before windows_aligned judged each reading alone.
    const bool aligned = c.value("windows_aligned", c.value("within_tolerance", false));
    std::string why = c.value("windows_reason", json()).is_string()
                          ? c["windows_reason"].get<std::string>()
                      : c.value("reason", json()).is_string() ? c["reason"].get<std::string>()
                                                              : std::string();
    std::printf("gangs: period %d ms; clock %s, estimated error %.0f us%s%s\n",
                agent.value("gang_period_ms", 0),
                c.value("synchronized", false) ? "synchronized" : "not synchronized",
                c.value("error_us", 0.0), aligned ? "" : ": multi-node steps not aligned, ",
                aligned ? "" : why.c_str());
  }
  for (const auto& gpu : s.value("gpus", json::array())) {
    json list = json::array();
    for (const auto& inst : gpu.value("instances", json::array())) {
      if (!only_job || inst.value("job", uint64_t{0}) == *only_job) list.push_back(inst);
    }
    if (only_job && list.empty()) continue;
    const json holder_id = gpu.value("holder", json());
    const std::string holder =
        holder_id.is_null() ? "-" : std::to_string(holder_id.get<uint64_t>());
    std::printf("\nGPU %u  memory %s  allocated %u/100 units  utilisation %s  holder %s",
                gpu.value("index", 0u),
                config::format_byte_size(gpu.value("memory_bytes", uint64_t{0})).c_str(),
                gpu.value("allocated_units", 0u), pct(gpu, "utilisation_pct").c_str(),
                holder.c_str());
    if (gpu.value("other_users_instances", 0u) > 0) {
      std::printf("  (+%u instance(s) of other users)", gpu.value("other_users_instances", 0u));
    }
    std::printf("\n");
    if (list.empty()) continue;
    print_instance_header();
    for (const auto& inst : list)
      print_instance(inst);
  }
}

// status --job JOB: the job's instances on every node it runs on, through
// Slurm (slurm_relay.h).
int status_of_job(const Globals& g, const std::string& job_text) {
  uint64_t job = 0;
  if (!parse_u64(job_text, job) || job == 0) {
    return fail("--job wants a job id, got '" + job_text + "'", 2);
  }
  if (!slurm_clients_present()) return fail("status --job needs Slurm's commands (squeue, srun)");
  auto found = find_job(job);
  if (!found) return fail(found.error());
  auto nodes = expand_nodes(found->placement.nodelist);
  if (!nodes) return fail(nodes.error());
  const auto runs = egpuctl_on_nodes(
      *found, *nodes, std::vector(nodes->size(), std::vector<std::string>{"--json", "status"}));
  json report{{"job", job},
              {"user", found->placement.user},
              {"state", found->placement.state},
              {"nodes", json::array()}};
  int rc = 0;
  for (const auto& r : runs) {
    json status = r.run.ok() ? relayed_json(r.run.out) : json();
    json entry{{"node", r.node}};
    if (!r.run.ok() || !status.is_object() || !status.contains("gpus") ||
        !status["gpus"].is_array()) {
      entry["error"] = r.run.ok() ? "egpuctl status gave no JSON" : r.why();
      rc = 1;
    } else {
      for (auto& gpu : status["gpus"]) {
        json kept = json::array();
        for (auto& inst : gpu["instances"]) {
          if (inst.value("job", uint64_t{0}) == job) kept.push_back(inst);
        }
        gpu["instances"] = kept;
      }
      entry["status"] = status;
    }
    report["nodes"].push_back(entry);
  }
  if (g.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return rc;
  }
  std::printf("job %llu  user %s  %s  on %s\n", static_cast<unsigned long long>(job),
              found->placement.user.c_str(), found->placement.state.c_str(),
              found->placement.nodelist.c_str());
  for (const auto& entry : report["nodes"]) {
    std::printf("\n== %s ==\n", entry["node"].get<std::string>().c_str());
    if (entry.contains("error")) {
      std::printf("error: %s\n", entry["error"].get<std::string>().c_str());
      continue;
    }
    print_status(entry["status"], job);
  }
  return rc;
}

}  // namespace

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "egpuctl: %s\n", message.c_str());
  return code;
}

int cmd_status(const Globals& g, const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "--job") {
    if (g.local) {
      return fail(
          "status --job goes through Slurm to every node of the job; --local is this "
          "node's agent alone (egpuctl --local status shows all you may see here)",
          2);
    }
    return status_of_job(g, args[1]);
  }
  if (!args.empty()) return fail("usage: egpuctl status [--job JOB] (got '" + args[0] + "')", 2);
  auto status = fetch_status(g.socket_path);
  if (!status) return fail(status.error());
  if (g.json) {
    std::printf("%s\n", status->dump(2).c_str());
    return 0;
  }
  print_status(*status, std::nullopt);
  return 0;
}

int cmd_show(const Globals& g, const std::vector<std::string>& args) {
  if (args.size() != 1) return fail("usage: egpuctl show INSTANCE", 2);
  auto sel = parse_selector(args[0]);
  if (!sel) return fail(sel.error(), 2);
  std::vector<json> found;
  if (sel->id != 0) {
    // By id the agent itself decides whether the caller may see it.
    auto text = call_for_text(g.socket_path, protocol::ShowRequest{sel->id});
    if (!text) return fail(text.error());
    auto j = json::parse(*text, nullptr, false);
    if (j.is_discarded()) return fail("the agent sent an instance that is not JSON");
    found.push_back(std::move(j));
  } else {
    auto status = fetch_status(g.socket_path);
    if (!status) return fail(status.error());
    auto matched = resolve(*status, *sel);
    if (!matched) return fail(matched.error());
    found = std::move(*matched);
  }
  for (const auto& inst : found) {
    if (g.json) {
      std::printf("%s\n", inst.dump(2).c_str());
      continue;
    }
    for (const auto& [key, value] : inst.items())
      std::printf("%-20s %s\n", key.c_str(), value.dump().c_str());
    std::printf("\n");
  }
  return 0;
}

}  // namespace egpu::ctl
