// egpuctl resize. By instance id, or with --local, on this node's agent. By
// JOB.STEP, wherever Slurm's commands work, on every node the step runs on
// (through Slurm, see slurm_relay.h), all or nothing: a refusal on one node
// undoes what the others did.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/util/mode.h"
#include "nodeagent/egpuctl/agent_query.h"
#include "nodeagent/egpuctl/commands.h"
#include "nodeagent/egpuctl/slurm_relay.h"

namespace egpu::ctl {
namespace {

using nlohmann::json;

struct ResizeSpec {
  Selector sel;
  std::string value;         // UNITS[:MODE] as given
  uint32_t units = 0;        // 0 = unchanged
  std::optional<Mode> mode;  // nullopt = unchanged
};

Result<ResizeSpec> parse_spec(const std::string& a) {
  const auto eq = a.find('=');
  if (eq == std::string::npos) return Error{"'" + a + "' is not INSTANCE=UNITS[:MODE]"};
  auto sel = parse_selector(a.substr(0, eq));
  if (!sel) return Error{sel.error()};
  ResizeSpec spec;
  spec.sel = *sel;
  spec.value = a.substr(eq + 1);
  if (spec.value.empty()) return Error{"'" + a + "' gives neither units nor a mode"};
  std::string units_text = spec.value;
  if (auto colon = spec.value.find(':'); colon != std::string::npos) {
    units_text = spec.value.substr(0, colon);
    auto m = parse_mode(spec.value.substr(colon + 1));
    if (!m) return Error{"'" + a + "': mode " + m.error()};
    spec.mode = *m;
  } else if (auto m = parse_mode(spec.value)) {
    units_text.clear();
    spec.mode = *m;
  }
  if (!units_text.empty()) {
    uint64_t u = 0;
    if (!parse_u64(units_text, u) || u == 0 || u > 100) {
      return Error{"units must be 1..100, got '" + units_text + "'"};
    }
    spec.units = static_cast<uint32_t>(u);
  }
  return spec;
}

std::string step_name(const Selector& s) {
  return std::to_string(s.job) + "." + s.step + (s.gpu >= 0 ? "@" + std::to_string(s.gpu) : "");
}

// An instance named by two specs would end at whichever the shrinks-first
// order sends last, not the one the user wrote last: refused.
Status name_once(std::map<uint64_t, std::string>& named_by, uint64_t id, const ResizeSpec& spec) {
  const std::string as = spec.sel.id != 0 ? std::to_string(spec.sel.id) : step_name(spec.sel);
  const auto [it, first] = named_by.emplace(id, as + "=" + spec.value);
  if (first) return {};
  return Error{"instance " + std::to_string(id) + " is named twice ('" + it->second + "' and '" +
               as + "=" + spec.value + "'): give each instance one INSTANCE=UNITS[:MODE]"};
}

// On this node's agent, shrinks before grows (so a move of share between
// two steps never passes the job's allocation on the way).
int resize_local(const Globals& g, const std::vector<ResizeSpec>& specs, bool force) {
  auto status = fetch_status(g.socket_path);
  if (!status) return fail(status.error());
  struct Change {
    uint64_t id;
    uint32_t units;
    std::optional<Mode> mode;
    int delta;
  };
  std::vector<Change> changes;
  std::map<uint64_t, std::string> named_by;
  for (const auto& s : specs) {
    auto found = resolve(*status, s.sel);
    if (!found) return fail(found.error());
    for (const auto& inst : *found) {
      if (Status twice = name_once(named_by, inst.value("id", uint64_t{0}), s); !twice) {
        return fail(twice.error(), 2);
      }
      const int current = inst.value("units", 0);
      changes.push_back({inst.value("id", uint64_t{0}), s.units, s.mode,
                         s.units == 0 ? 0 : static_cast<int>(s.units) - current});
    }
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return a.delta < b.delta; });
  for (const auto& c : changes) {
    const uint32_t wire_mode = c.mode ? mode_value(*c.mode) : protocol::kModeUnchanged;
    auto text = call_for_text(
        g.socket_path,
        protocol::ResizeRequest{c.id, c.units, wire_mode, force ? protocol::kResizeForce : 0u, 0});
    if (!text) return fail("instance " + std::to_string(c.id) + ": " + text.error());
    if (g.json) {
      std::printf("%s\n", text->c_str());
    } else {
      std::printf("instance %llu: %s%s\n", static_cast<unsigned long long>(c.id),
                  c.units != 0 ? (std::to_string(c.units) + " units").c_str() : "",
                  c.mode ? (std::string(" ") + to_string(*c.mode)).c_str() : "");
    }
  }
  return 0;
}

// What one node is asked to do, and what puts it back.
struct NodePlan {
  std::string node;
  std::vector<std::string> apply{"resize"};
  std::vector<std::string> undo{"resize"};
  json changed = json::array();
};

// Each node's instances of the specs' steps, from its agent.
Result<std::vector<NodePlan>> plan_nodes(const JobOnSlurm& job,
                                         const std::vector<std::string>& nodes,
                                         const std::vector<ResizeSpec>& specs) {
  const auto before = egpuctl_on_nodes(
      job, nodes, std::vector(nodes.size(), std::vector<std::string>{"--json", "status"}));
  std::vector<NodePlan> plans;
  std::vector<bool> matched(specs.size(), false);
  for (const auto& b : before) {
    if (!b.run.ok()) return Error{"on " + b.node + ": " + b.why()};
    const json status = relayed_json(b.run.out);
    if (!status.is_object()) return Error{"on " + b.node + ": egpuctl status gave no JSON object"};
    NodePlan plan{b.node};
    std::map<uint64_t, std::string> named_by;
    for (size_t i = 0; i < specs.size(); ++i) {
      auto found = resolve(status, specs[i].sel);
      if (!found) continue;
      matched[i] = true;
      for (const auto& inst : *found) {
        if (Status twice = name_once(named_by, inst.value("id", uint64_t{0}), specs[i]); !twice) {
          return Error{"on " + b.node + ": " + twice.error(), EINVAL};  // a usage error
        }
        const std::string id = std::to_string(inst.value("id", uint64_t{0}));
        const std::string units = std::to_string(inst.value("units", 0u));
        const std::string mode = inst.value("mode", std::string());
        plan.apply.push_back(id + "=" + specs[i].value);
        // Only what the spec changes is put back.
        plan.undo.push_back(id + "=" + (specs[i].units != 0 ? units : "") +
                            (specs[i].units != 0 && specs[i].mode ? ":" : "") +
                            (specs[i].mode ? mode : ""));
        plan.changed.push_back({{"node", b.node},
                                {"id", inst.value("id", uint64_t{0})},
                                {"step", step_name(specs[i].sel)},
                                {"gpu", inst.value("gpu", 0)},
                                {"units_before", inst.value("units", 0u)},
                                {"mode_before", mode},
                                {"value", specs[i].value}});
      }
    }
    if (plan.apply.size() > 1) plans.push_back(std::move(plan));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!matched[i]) {
      return Error{"no instance of step " + step_name(specs[i].sel) + " that you may see on " +
                   job.placement.nodelist};
    }
  }
  return plans;
}

int resize_through_slurm(const Globals& g, const std::vector<ResizeSpec>& specs, bool force) {
  if (force) {
    return fail(
        "--force works on one node's agent only: Slurm lets no one but the job's owner start a "
        "step in the job, so through Slurm the agents see the owner. As root on each node: "
        "egpuctl resize --force --local ...",
        2);
  }
  const uint64_t job = specs.front().sel.job;
  for (const auto& s : specs) {
    if (s.sel.job != job) {
      return fail("one job per resize through Slurm (got " + std::to_string(job) + " and " +
                      std::to_string(s.sel.job) + ")",
                  2);
    }
  }
  auto found = find_job(job);
  if (!found) return fail(found.error());
  std::vector<std::string> nodes;
  std::set<std::string> seen;
  for (const auto& s : specs) {
    auto list = model::step_nodelist(found->steps, job, s.sel.step);
    if (!list) return fail(list.error());
    auto names = expand_nodes(*list);
    if (!names) return fail(names.error());
    for (auto& n : *names) {
      if (seen.insert(n).second) nodes.push_back(n);
    }
  }
  auto plans = plan_nodes(*found, nodes, specs);
  if (!plans)
    return fail(plans.error() + "; nothing changed", plans.error_code() == EINVAL ? 2 : 1);

  std::vector<std::string> plan_nodes_names;
  std::vector<std::vector<std::string>> apply, undo;
  for (const auto& p : *plans) {
    plan_nodes_names.push_back(p.node);
    apply.push_back(p.apply);
    undo.push_back(p.undo);
  }
  const auto applied = egpuctl_on_nodes(*found, plan_nodes_names, apply);
  std::string refused;
  for (const auto& a : applied) {
    if (!a.run.ok()) refused += (refused.empty() ? "" : "; ") + ("on " + a.node + ": " + a.why());
  }
  if (refused.empty()) {
    json changed = json::array();
    for (const auto& p : *plans) {
      for (const auto& c : p.changed) {
        changed.push_back(c);
        if (!g.json) {
          std::printf("%s: instance %llu (step %s on GPU %d): %u units %s -> %s\n", p.node.c_str(),
                      static_cast<unsigned long long>(c["id"].get<uint64_t>()),
                      c["step"].get<std::string>().c_str(), c["gpu"].get<int>(),
                      c["units_before"].get<unsigned>(),
                      c["mode_before"].get<std::string>().c_str(),
                      c["value"].get<std::string>().c_str());
        }
      }
    }
    if (g.json) std::printf("%s\n", json{{"job", job}, {"changed", changed}}.dump(2).c_str());
    return 0;
  }
  // A node refused: put back every node where something may have changed:
  // where egpuctl ran (a refusing node may have applied the changes before
  // the one it refused) or may still be running (no answer in time). Where
  // srun could not start it, nothing changed.
  std::vector<std::string> back_nodes;
  std::vector<std::vector<std::string>> back;
  bool unanswered = false;
  for (size_t i = 0; i < applied.size(); ++i) {
    if (!applied[i].may_have_changed()) continue;
    unanswered = unanswered || applied[i].run.timed_out;
    back_nodes.push_back(applied[i].node);
    back.push_back(undo[i]);
  }
  const auto undone = egpuctl_on_nodes(*found, back_nodes, back);
  std::string undo_failed;
  for (const auto& u : undone) {
    if (!u.run.ok())
      undo_failed += (undo_failed.empty() ? "" : "; ") + ("on " + u.node + ": " + u.why());
  }
  const std::string head = "resize of job " + std::to_string(job) + " refused " + refused;
  const std::string see = " (see egpuctl status --job " + std::to_string(job) + ")";
  if (!undo_failed.empty()) return fail(head + "; PUTTING IT BACK FAILED " + undo_failed + see);
  if (unanswered) {
    return fail(head + "; put back where it ran, but a node that did not answer in time may " +
                "still apply it" + see);
  }
  return fail(head + "; nothing changed on any node");
}

}  // namespace

int cmd_resize(const Globals& g, const std::vector<std::string>& args) {
  // --force (root): grow a job past what Slurm granted it (see the README).
  const bool force = std::find(args.begin(), args.end(), "--force") != args.end();
  std::vector<ResizeSpec> specs;
  for (const auto& a : args) {
    if (a == "--force") continue;
    auto spec = parse_spec(a);
    if (!spec) return fail(spec.error(), 2);
    specs.push_back(std::move(*spec));
  }
  if (specs.empty()) return fail("usage: egpuctl resize [--force] INSTANCE=UNITS[:MODE] ...", 2);
  const bool by_id =
      std::any_of(specs.begin(), specs.end(), [](const auto& s) { return s.sel.id != 0; });
  const bool by_step =
      std::any_of(specs.begin(), specs.end(), [](const auto& s) { return s.sel.id == 0; });
  if (g.local || !slurm_clients_present()) return resize_local(g, specs, force);
  if (by_id && by_step) {
    return fail(
        "instance ids are this node's, JOB.STEP is the step on all its nodes: use one kind "
        "per call (or --local for this node only)",
        2);
  }
  return by_id ? resize_local(g, specs, force) : resize_through_slurm(g, specs, force);
}

}  // namespace egpu::ctl
