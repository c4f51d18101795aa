#include "nodeagent/status_report.h"

#include <unistd.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/util/clock.h"
#include "nodeagent/agent.h"
#include "nodeagent/metrics_endpoint.h"
#include "nodeagent/page_chores.h"
#include "nodeagent/passed_descriptors.h"

namespace egpu::agent {
namespace {

using nlohmann::json;

using protocol::step_label;

// A share as a percentage to 1e-4 pp: a decayed share of an instance idle
// for long is e^(-t/tau), 3.8e-51 and the like, which reads as noise.
double percent(double share) {
  return std::round(share * 1e6) / 1e4;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// The latency control's view of an instance with an objective or lending.
void add_latency(json& j, const model::Instance& inst, const slo::SloState* state) {
  j["objective"] = inst.objective ? json(slo::to_string(inst.objective)) : json(nullptr);
  if (state == nullptr) return;
  j["borrowed_units"] = state->borrowed;  // lent when negative
  j["effective_units"] = state->effective_units;
  if (!state->objective) return;
  j["latency_ms"] = state->recent_latency_ns > 0
                        ? json(static_cast<double>(state->recent_latency_ns) / 1e6)
                        : json(nullptr);
  j["slo_windows_judged"] = state->windows_judged;
  j["slo_windows_met"] = state->windows_met;
  j["slo_attainment"] = state->windows_judged > 0 ? json(static_cast<double>(state->windows_met) /
                                                         static_cast<double>(state->windows_judged))
                                                  : json(nullptr);
  j["latency_model_points"] = state->model_points;
  j["demand_pct"] = percent(state->demand);
}

json instance_object(const model::Instance& inst, const GpuArbiter& arb,
                     const LatencyControl& latency, int64_t now) {
  json j;
  j["id"] = inst.id;
  j["job"] = inst.job_id;
  j["step"] = step_label(inst.step_id);
  j["gpu"] = inst.gpu;
  j["uid"] = inst.uid;
  j["units"] = inst.units;
  j["job_units"] = inst.job_units;
  // Past what Slurm granted only after a forced resize by root.
  j["granted_units"] = inst.granted_units != 0 ? inst.granted_units : inst.job_units;
  j["umbrella"] = inst.umbrella;
  j["spans_nodes"] = inst.spans_nodes;
  j["mode"] = to_string(inst.mode);
  j["memory_quota_bytes"] = inst.mem_quota;
  if (auto v = arb.view(inst.id, now)) {
    j["target_pct"] = percent(v->target);
    j["achieved_pct"] = percent(v->faa.achieved);
    j["memory_used_bytes"] = v->memory_used;
    // An umbrella's quota is its job's memory; its limit is what its steps
    // leave of it. null: accounted, never refused.
    j["memory_limit_bytes"] =
        v->memory_limit == shm::kNoMemLimit ? json(nullptr) : json(v->memory_limit);
    j["throttled_ms"] = static_cast<double>(v->faa.throttled) / 1e6;
    j["longest_wait_ms"] = static_cast<double>(v->faa.longest_wait) / 1e6;
    j["device_s"] = static_cast<double>(v->device_ns) / 1e9;
    j["reported_device_s"] = static_cast<double>(v->reported_device_ns) / 1e9;
    j["grants"] = v->faa.grants;
    j["asking"] = v->faa.asking;
    j["holding"] = v->faa.holding;
    j["processes"] = v->processes;
    j["memory_denied"] = v->mem_denied;
    // Non-zero: its shims reported less device time than it held the GPU for.
    j["unreported_charged_s"] = static_cast<double>(v->floor_charged_ns) / 1e9;
  }
  if (const accounting::UsageTotals* u = arb.usage(inst.id)) {
    // What it achieved since it was created, across agent restarts: the
    // record its step leaves in the job's AdminComment when it ends.
    j["usage"] = {{"device_s", static_cast<double>(u->device_ns) / 1e9},
                  {"throttled_s", static_cast<double>(u->throttled_ns) / 1e9},
                  {"memory_peak_bytes", u->mem_peak_bytes},
                  {"started_unix_s", static_cast<double>(u->started_unix_ns) / 1e9},
                  {"agent_restarts", u->agent_restarts},
                  {"partial", u->partial != 0}};
  }
  const InstanceRuntime* rt = arb.runtime(inst.id);
  if (const shm::BurstTotals b = rt ? rt->bursts() : shm::BurstTotals{}; b.span_ns > 0) {
    // What its bursts of work took, and how much of that was waiting for
    // the slice (the shim's latency signal; written by the job's processes).
    j["burst_s"] = static_cast<double>(b.span_ns) / 1e9;
    j["burst_gate_s"] = static_cast<double>(b.gate_ns) / 1e9;
  }
  add_latency(j, inst, latency.state(inst.id));
  // A step on several GPUs of the node: the window it holds its slices in,
  // at the same offset on each of them.
  if (const auto w = arb.gang_window(inst.id)) {
    j["gang"] = {{"period_ms", static_cast<double>(w->period) / 1e6},
                 {"offset_ms", static_cast<double>(w->offset) / 1e6},
                 {"length_ms", static_cast<double>(w->length) / 1e6}};
  } else {
    j["gang"] = nullptr;
  }
  return j;
}

}  // namespace

std::string status_json(const Agent& agent, uid_t caller) {
  const int64_t now = monotonic_ns();
  json root;
  root["node"] = hostname();
  root["agent"] = {{"pid", getpid()},
                   {"epoch", agent.epoch()},
                   {"uptime_s", static_cast<double>(now - agent.started_ns()) / 1e9},
                   {"slice_ms", agent.config().slice_ms},
                   {"window_ms", agent.config().window_ms},
                   {"fail_mode", to_string(agent.config().fail_mode)},
                   {"default_mode", to_string(agent.config().default_mode)},
                   {"gang_period_ms", agent.config().gang_period_ms},
                   {"runtime_dir_own_filesystem", agent.runtime_dir_own_filesystem()}};
  // Sockets that held descriptors clients passed (none should): handed to
  // disposal processes, or held here while a user's are all stuck.
  const DisposalCounts passed = disposal_counts();
  root["agent"]["passed_descriptors"] = {{"sockets_handed_on", passed.handed},
                                         {"sockets_held", passed.held},
                                         {"disposal_processes", passed.processes}};
  // The metrics endpoint, and why it is not serving (its port taken).
  if (const MetricsEndpoint* m = agent.metrics()) {
    root["agent"]["metrics"] = {{"address", agent.config().metrics_address},
                                {"serving", m->serving()},
                                {"failed_tries", m->failed_tries()},
                                {"error", m->serving() ? json(nullptr) : json(m->error())}};
  }
  // Changes to jobs' pages waiting or running off the agent's thread (a job
  // holding its page's lock holds one here).
  root["agent"]["page_chores_pending"] = PageChores::pending();
  // Trims of pages their jobs grew, started since the agent started.
  uint64_t trims = 0;
  for (const auto& arb : agent.arbiters())
    trims += arb->page_trims();
  root["agent"]["page_trims"] = trims;
  // Processes using a GPU without the shim (UnmanagedProcesses=): each
  // caller sees its own (and root everyone's), everyone the totals.
  json unmanaged = json::array();
  for (const model::UnmanagedProcess& p : agent.unmanaged().current()) {
    if (caller != 0 && caller != p.uid) continue;
    unmanaged.push_back({{"pid", p.pid},
                         {"uid", p.uid},
                         {"gpu", p.gpu},
                         {"seen_s", static_cast<double>(now - p.first_seen_ns) / 1e9},
                         {"shim", p.maps_shim},
                         {"acted", p.due}});
  }
  root["agent"]["unmanaged_processes"] = {{"action", to_string(agent.config().unmanaged_processes)},
                                          {"found", agent.unmanaged().current().size()},
                                          {"acted_total", agent.unmanaged().total_due()},
                                          {"killed_total", agent.unmanaged_killed()},
                                          {"scans", agent.unmanaged().scans()},
                                          {"processes", std::move(unmanaged)}};
  // Whether this clock lets a step's windows here open with its other
  // nodes' (they also need the same gangs placed alike on each node): the
  // reading now, and the verdict the windows follow (which waits for a few
  // good readings after a bad one).
  const faa::ClockQuality clock = agent.clock();
  const Status within = faa::can_align_across_nodes(clock, faa::kDefaultAlignTolerance);
  const Status windows = agent.clock_alignment();
  root["clock"] = {{"synchronized", clock.synchronized},
                   {"error_us", static_cast<double>(clock.error_bound) / 1e3},
                   {"max_error_us", static_cast<double>(clock.max_error) / 1e3},
                   {"within_tolerance", within.ok()},
                   {"reason", within.ok() ? json(nullptr) : json(within.error())},
                   {"windows_aligned", windows.ok()},
                   {"windows_reason", windows.ok() ? json(nullptr) : json(windows.error())}};
  json gpus = json::array();
  for (const auto& arb : agent.arbiters()) {
    const auto stats = arb->gpu_stats(now);
    json g;
    g["index"] = arb->gpu();
    g["memory_bytes"] = arb->memory_bytes();
    g["allocated_units"] = agent.registry().allocated_units(arb->gpu());
    g["utilisation_pct"] = percent(stats.utilisation);
    const auto holder = arb->holder();
    g["holder"] =
        holder && agent.registry().may_see_details(caller, *agent.registry().find(*holder))
            ? json(*holder)
            : json(nullptr);
    json list = json::array();
    uint32_t other_count = 0;
    uint32_t other_units = 0;
    for (const model::Instance* inst : agent.registry().on_gpu(arb->gpu())) {
      if (agent.registry().may_see_details(caller, *inst)) {
        list.push_back(instance_object(*inst, *arb, agent.latency(), now));
      } else {
        ++other_count;
        other_units += inst->umbrella ? 0 : inst->units;
      }
    }
    g["instances"] = std::move(list);
    g["other_users_instances"] = other_count;
    gpus.push_back(std::move(g));
  }
  root["gpus"] = std::move(gpus);
  return root.dump();
}

std::string instance_json(const Agent& agent, uint64_t instance_id, uid_t caller) {
  const model::Instance* inst = agent.registry().find(instance_id);
  if (inst == nullptr || !agent.registry().may_see_details(caller, *inst)) return "";
  for (const auto& arb : agent.arbiters()) {
    if (arb->gpu() == inst->gpu) {
      return instance_object(*inst, *arb, agent.latency(), monotonic_ns()).dump();
    }
  }
  return "";
}

namespace {

// Instances the latency control looks after: latency-critical and lending.
void latency_metrics(const Agent& agent, std::ostringstream& out) {
  struct Series {
    const char* name;
    const char* help;
  };
  static constexpr Series kSeries[] = {
      {"egpu_instance_latency_p99_seconds",
       "The objective's percentile of the instance's latency over its recent window."},
      {"egpu_instance_slo_attainment_ratio", "Share of judged windows that met the objective."},
      {"egpu_instance_borrowed_share",
       "Share of the GPU borrowed for a latency objective (negative: lent)."},
  };
  for (size_t s = 0; s < std::size(kSeries); ++s) {
    out << "# HELP " << kSeries[s].name << " " << kSeries[s].help << "\n# TYPE " << kSeries[s].name
        << " gauge\n";
    for (const model::Instance* inst : agent.registry().all()) {
      const slo::SloState* st = agent.latency().state(inst->id);
      if (st == nullptr || (s != 2 && !st->objective)) continue;
      if (s == 1 && st->windows_judged == 0) continue;
      out << kSeries[s].name << "{gpu=\"" << inst->gpu << "\",slurm_job=\"" << inst->job_id
          << "\",step=\"" << step_label(inst->step_id) << "\",egpu_instance=\"" << inst->id
          << "\"} ";
      if (s == 0) out << static_cast<double>(st->recent_latency_ns) / 1e9;
      if (s == 1)
        out << static_cast<double>(st->windows_met) / static_cast<double>(st->windows_judged);
      if (s == 2) out << st->borrowed / 100.0;
      out << "\n";
    }
  }
}

// Gang windows and the clock they are aligned on.
void gang_metrics(const Agent& agent, std::ostringstream& out) {
  out << "# HELP egpu_instance_gang_window_share Share of each gang period the instance holds "
         "its slices in, together with its step's other GPUs (0: not in a gang).\n"
         "# TYPE egpu_instance_gang_window_share gauge\n";
  for (const auto& arb : agent.arbiters()) {
    for (const model::Instance* inst : agent.registry().on_gpu(arb->gpu())) {
      const auto w = arb->gang_window(inst->id);
      out << "egpu_instance_gang_window_share{gpu=\"" << inst->gpu << "\",slurm_job=\""
          << inst->job_id << "\",step=\"" << step_label(inst->step_id) << "\",egpu_instance=\""
          << inst->id << "\"} "
          << (w ? static_cast<double>(w->length) / static_cast<double>(w->period) : 0.0) << "\n";
    }
  }
  out << "# HELP egpu_clock_synchronized The kernel says the clock is synchronized (chrony, "
         "ntpd, PTP).\n# TYPE egpu_clock_synchronized gauge\negpu_clock_synchronized "
      << (agent.clock().synchronized ? 1 : 0) << "\n";
  out << "# HELP egpu_clock_error_seconds The clock's estimated error (adjtimex esterror).\n"
         "# TYPE egpu_clock_error_seconds gauge\negpu_clock_error_seconds "
      << static_cast<double>(agent.clock().error_bound) / 1e9 << "\n";
  if (agent.config().gang_period_ms > 0) {  // without gangs there are no windows to align
    out << "# HELP egpu_clock_windows_aligned Multi-node steps' gang windows open with their "
           "other nodes' (the clock was good enough for a few readings in a row).\n"
           "# TYPE egpu_clock_windows_aligned gauge\negpu_clock_windows_aligned "
        << (agent.clock_alignment().ok() ? 1 : 0) << "\n";
  }
}

}  // namespace

std::string metrics_text(const Agent& agent) {
  const int64_t now = monotonic_ns();
  std::ostringstream out;
  // 15 significant digits, not the stream's 6: a counter past 1e5 seconds
  // would otherwise move in whole seconds and rate() over it would jump.
  out.precision(std::numeric_limits<double>::digits10);
  out << "# HELP egpu_agent_up The egpu node agent is running.\n# TYPE egpu_agent_up gauge\n"
      << "egpu_agent_up 1\n";
  out << "# HELP egpu_unmanaged_processes Processes found using a GPU without the shim.\n"
         "# TYPE egpu_unmanaged_processes gauge\n"
      << "egpu_unmanaged_processes " << agent.unmanaged().current().size() << "\n"
      << "# HELP egpu_unmanaged_processes_killed_total Processes killed for using a GPU "
         "without the shim.\n# TYPE egpu_unmanaged_processes_killed_total counter\n"
      << "egpu_unmanaged_processes_killed_total " << agent.unmanaged_killed() << "\n";
  out << "# HELP egpu_gpu_utilisation Decayed share of the GPU's time charged to instances.\n"
         "# TYPE egpu_gpu_utilisation gauge\n";
  for (const auto& arb : agent.arbiters()) {
    out << "egpu_gpu_utilisation{gpu=\"" << arb->gpu() << "\"} " << arb->gpu_stats(now).utilisation
        << "\n";
  }
  out << "# HELP egpu_gpu_allocated_units Units allocated on the GPU (100 = whole).\n"
         "# TYPE egpu_gpu_allocated_units gauge\n";
  for (const auto& arb : agent.arbiters()) {
    out << "egpu_gpu_allocated_units{gpu=\"" << arb->gpu() << "\"} "
        << agent.registry().allocated_units(arb->gpu()) << "\n";
  }
  struct Series {
    const char* name;
    const char* type;
    const char* help;
  };
  static constexpr Series kSeries[] = {
      {"egpu_instance_target_share", "gauge",
       "Share of the GPU the instance is entitled to (0-1)."},
      {"egpu_instance_achieved_share", "gauge",
       "Decayed share of the GPU the instance used (0-1)."},
      {"egpu_instance_memory_used_bytes", "gauge", "Device memory held by the instance."},
      {"egpu_instance_memory_quota_bytes", "gauge", "Device memory quota of the instance."},
      {"egpu_instance_device_seconds_total", "counter", "Device time charged to the instance."},
      {"egpu_instance_throttled_seconds_total", "counter",
       "Time the instance asked for the GPU without holding it."},
      {"egpu_instance_processes", "gauge", "Processes attached to the instance."},
  };
  // One view per instance (each reads its processes' slots), not one per series.
  std::vector<std::pair<const model::Instance*, InstanceView>> views;
  for (const auto& arb : agent.arbiters()) {
    for (const model::Instance* inst : agent.registry().on_gpu(arb->gpu())) {
      if (auto v = arb->view(inst->id, now)) views.emplace_back(inst, std::move(*v));
    }
  }
  for (size_t s = 0; s < std::size(kSeries); ++s) {
    out << "# HELP " << kSeries[s].name << " " << kSeries[s].help << "\n# TYPE " << kSeries[s].name
        << " " << kSeries[s].type << "\n";
    for (const auto& [inst, v] : views) {
      out << kSeries[s].name << "{gpu=\"" << inst->gpu << "\",slurm_job=\"" << inst->job_id
          << "\",step=\"" << step_label(inst->step_id) << "\",egpu_instance=\"" << inst->id
          << "\"} ";
      switch (s) {
        case 0:
          out << v.target;
          break;
        case 1:
          out << v.faa.achieved;
          break;
        case 2:
          out << v.memory_used;
          break;
        case 3:
          out << inst->mem_quota;
          break;
        case 4:
          out << static_cast<double>(v.device_ns) / 1e9;
          break;
        case 5:
          out << static_cast<double>(v.faa.throttled) / 1e9;
          break;
        case 6:
          out << v.processes;
          break;
      }
      out << "\n";
    }
  }
  latency_metrics(agent, out);
  gang_metrics(agent, out);
  if (const auto* c = agent.control()) {
    out << "# HELP egpu_control_requests_total Control socket requests served.\n"
           "# TYPE egpu_control_requests_total counter\negpu_control_requests_total "
        << c->requests() << "\n";
  }
  return out.str();
}

}  // namespace egpu::agent
