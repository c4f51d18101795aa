#include "nodeagent/egpuctl/slurm_relay.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string_view>

#include "core/util/printable.h"

extern char** environ;

namespace egpu::ctl {
namespace {

// Slurm's commands answer within seconds when slurmctld does; srun's step
// start and egpuctl on the node as well.
constexpr int kQueryTimeoutMs = 30'000;
constexpr int kRelayTimeoutMs = 60'000;
// Steps started at once: each is a step-create RPC to slurmctld, so a job on
// hundreds of nodes is reached a batch at a time.
constexpr size_t kRelayBatch = 32;

// "PROGRAM: why", once: Slurm's commands name themselves in their messages.
std::string failure_of(const std::string& program, const ProcessOutcome& o) {
  const std::string why = o.failure();
  return why.starts_with(program + ":") ? why : program + ": " + why;
}

Result<std::string> run_one(const std::vector<std::string>& argv) {
  auto outcome = run_processes({argv}, kQueryTimeoutMs).front();
  if (!outcome.ok()) return Error{failure_of(argv[0], outcome)};
  return std::move(outcome.out);
}

// This very program, to run the same egpuctl on the nodes (installed at the
// same path on every node, as Slurm's own commands are).
std::string own_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "egpuctl";
  std::string path(buf, static_cast<size_t>(n));
  // Replaced by an upgrade while it runs: the new file has the same path.
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path;
}

}  // namespace

std::vector<std::string> relay_environment(const char* const* env, bool for_another_user) {
  std::vector<std::string> kept;
  for (const char* const* e = env; e != nullptr && *e != nullptr; ++e) {
    const std::string_view var(*e);
    if (for_another_user) {
      const bool wanted = var.starts_with("PATH=") || var.starts_with("SLURM_CONF=") ||
                          var.starts_with("LANG=") || var.starts_with("LANGUAGE=") ||
                          var.starts_with("LC_") || var.starts_with("TZ=");
      if (wanted) kept.emplace_back(var);
      continue;
    }
    const bool slurm = var.starts_with("SLURM_") || var.starts_with("SRUN_");
    if (!slurm || var.starts_with("SLURM_CONF=")) kept.emplace_back(var);
  }
  return kept;
}

std::string NodeOutcome::why() const {
  if (run.ok()) return "";
  constexpr std::string_view kPrefix = "egpuctl: ";
  std::string_view rest = run.err, last;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    if (line.substr(0, kPrefix.size()) == kPrefix) last = line.substr(kPrefix.size());
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return last.empty() ? run.failure() : std::string(last);
}

bool NodeOutcome::may_have_changed() const {
  return run.ok() || run.timed_out || run.err.starts_with("egpuctl: ") ||
         run.err.find("\negpuctl: ") != std::string::npos;
}

bool slurm_clients_present() {
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    if (!dir.empty() && ::access((dir + "/squeue").c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return false;
}

Result<JobOnSlurm> find_job(uint64_t job) {
  const std::string id = std::to_string(job);
  auto outcomes = run_processes({{"squeue", "-h", "-j", id, "-o", model::kJobListingFormat},
                                 {"squeue", "-h", "-s", "-j", id, "-o", model::kStepListingFormat}},
                                kQueryTimeoutMs);
  for (const auto& o : outcomes) {
    if (!o.ok()) {
      // squeue says so when the job is gone: name it plainly.
      if (o.err.find("Invalid job id") != std::string::npos) {
        return Error{"job " + id + " is not known to Slurm (ended, or never submitted)"};
      }
      return Error{failure_of("squeue", o)};
    }
  }
  auto placement = model::parse_job_listing(outcomes[0].out, job);
  if (!placement) return Error{placement.error()};
  auto steps = model::parse_step_listing(outcomes[1].out, job);
  if (!steps) return Error{steps.error()};
  return JobOnSlurm{job, std::move(*placement), std::move(*steps)};
}

Result<std::vector<std::string>> expand_nodes(const std::string& nodelist) {
  auto out = run_one({"scontrol", "show", "hostnames", nodelist});
  if (!out) return Error{out.error()};
  return model::parse_hostnames(*out);
}

std::vector<NodeOutcome> egpuctl_on_nodes(
    const JobOnSlurm& job, const std::vector<std::string>& nodes,
    const std::vector<std::vector<std::string>>& args_per_node) {
  std::vector<std::vector<std::string>> commands;
  const bool as_owner = ::geteuid() == 0 && job.placement.user != "root";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string& node = nodes[i];
    const std::vector<std::string>& args = args_per_node.at(i);
    std::vector<std::string> argv;
    if (as_owner) argv = {"runuser", "-u", job.placement.user, "--"};
    // A step of its own that shares the job's CPUs and holds no GRES, so it
    // fits beside whatever runs; the egpu SPANK plugin gives it the node's
    // agent socket.
    for (const char* a : {"srun", "--overlap", "--gres=none", "--quiet", "--job-name=egpuctl",
                          "--nodes=1", "--ntasks=1"}) {
      argv.emplace_back(a);
    }
    // Root's resource limits are not the owner's to keep.
    if (as_owner) argv.emplace_back("--propagate=NONE");
    argv.push_back("--jobid=" + std::to_string(job.job));
    argv.push_back("--nodelist=" + node);
    argv.push_back("--");
    argv.push_back(own_path());
    argv.push_back("--local");
    argv.insert(argv.end(), args.begin(), args.end());
    commands.push_back(std::move(argv));
  }
  const std::vector<std::string> env = relay_environment(environ, as_owner);
  std::vector<NodeOutcome> outcomes;
  for (size_t first = 0; first < commands.size(); first += kRelayBatch) {
    const size_t last = std::min(commands.size(), first + kRelayBatch);
    auto runs = run_processes({commands.begin() + static_cast<std::ptrdiff_t>(first),
                               commands.begin() + static_cast<std::ptrdiff_t>(last)},
                              kRelayTimeoutMs, &env);
    for (size_t i = first; i < last; ++i) {
      // The owner's process wrote it, and root's terminal may show it.
      runs[i - first].err = printable(runs[i - first].err);
      outcomes.push_back({nodes[i], std::move(runs[i - first])});
    }
  }
  return outcomes;
}

nlohmann::json relayed_json(const std::string& out) {
  // The parser is iterative, make_printable is not: a 10^5-deep array (200 KB,
  // within what the relay reads) would overflow root's stack. An agent's
  // status nests 6 deep.
  constexpr int kMaxDepth = 32;
  bool too_deep = false;
  nlohmann::json value = nlohmann::json::parse(
      out,
      [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > kMaxDepth) too_deep = true;
        return !too_deep;
      },
      false);
  if (too_deep) return nlohmann::json(nlohmann::json::value_t::discarded);
  make_printable(value);
  return value;
}

}  // namespace egpu::ctl
