// spank_egpu: the SPANK side of egpu. In srun/sbatch/salloc it adds and checks
// --egpu-mode and --egpu-mem; in slurmstepd (as root) it asks the node agent
// to create the step's instances from what gres/egpu put in the step's
// environment, preloads the shim into the tasks, and removes the instances
// when the step's last task on the node ends, recording what they achieved
// in the job's AdminComment (step_records.h). Thin glue: the rules are in
// core/model/step_plan and core/accounting.
//
// plugstack.conf:  required /path/spank_egpu.so [conf=/etc/egpu/egpu.conf]
// $EGPU_CONF in the environment of slurmd (and so slurmstepd) or of the
// client overrides conf= (one plugstack.conf for nodes with different configs).
//
// A step that cannot be set up for a reason of the job's own (a bad option,
// the agent refusing it, no agent with FailMode=closed) must fail the job's
// tasks with a message in the job's output, never fail slurmstepd's plugin
// stack: Slurm drains the node and requeues a batch job when that fails.
// So errors found in slurmstepd are kept and reported by slurm_spank_task_init
// on the task's stderr (the job's output), which then fails the task.
extern "C" {
#include <slurm/spank.h>
}

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "core/config/egpu_config.h"
#include "core/env/egpu_env_names.h"
#include "core/model/step_plan.h"
#include "core/protocol/control_client.h"
#include "core/topo/topology.h"
#include "spank/step_checkpoints.h"
#include "spank/step_records.h"

#ifndef EGPU_SPANK_SLURM_VERSION
#error "EGPU_SPANK_SLURM_VERSION must be the Slurm release this plugin is built for"
#endif

#define EGPU_EXPORT __attribute__((visibility("default")))

extern "C" {
// SPANK_PLUGIN(egpu, 1), with the release chosen at build time: one source,
// one build per supported Slurm release (only major.minor must match).
EGPU_EXPORT extern const char plugin_name[];
EGPU_EXPORT extern const char plugin_type[];
EGPU_EXPORT extern const unsigned int plugin_version;
EGPU_EXPORT extern const unsigned int spank_plugin_version;
const char plugin_name[] = "egpu";
const char plugin_type[] = "spank";
const unsigned int plugin_version = EGPU_SPANK_SLURM_VERSION;
const unsigned int spank_plugin_version = 1;
}

namespace {

using egpu::config::EgpuConfig;

struct PluginState {
  EgpuConfig config;
  bool config_loaded = false;
  std::string config_path = EGPU_CONF_DEFAULT_PATH;
  std::optional<egpu::Mode> mode;
  std::optional<uint64_t> mem_bytes;
  std::optional<egpu::slo::LatencyObjective> objective;
  bool created = false;
  uint32_t tasks_exited = 0;  // on this node
  uint64_t job_id = 0;
  uint32_t step_id = 0;
  // In slurmstepd: printed on each task's stderr by slurm_spank_task_init.
  std::string task_error;    // the task fails
  std::string task_warning;  // the task runs
  // In slurmstepd, while the step's instances exist. Deleted only by
  // stop_checkpoints(), never by a static destructor: a task forked from
  // slurmstepd has a copy of it without the thread.
  egpu::spank::StepCheckpoints* checkpoints = nullptr;
};

PluginState& state() {
  static PluginState s;
  return s;
}

// How long a step's end may wait for slurmctld to take its usage record
// (scontrol gets SIGKILL 3 s after this).
constexpr int kRecordTimeoutMs = 7'000;

void stop_checkpoints() {
  delete state().checkpoints;  // waits for a checkpoint under way
  state().checkpoints = nullptr;
}

// How scontrol names the job (step_records.h): the one task of an array whose
// own id is the array's id must be named ARRAYID_TASK, since scontrol takes
// that id alone for every task of the array. Any other job is named by its
// own id. (In srun steps slurmstepd takes the array ids from the step's
// environment, which is the user's: forged ones can at worst lose the job
// its own record; job_submit/egpu takes records only into the job they are
// of.)
std::string job_ref_of(spank_t sp, uint64_t job_id);

// An option error: the client (sbatch, srun, salloc) refuses the command
// line; in slurmstepd the job's tasks fail with the message (see the top).
int option_error(int remote, const std::string& message) {
  slurm_error("egpu: %s", message.c_str());
  if (remote == 0) return -1;
  if (state().task_error.empty()) state().task_error = message;
  return 0;
}

// The largest GPU memory of the cluster as this host's egpu.conf knows it
// (GpuMemory=, else the GPUs of TopologyXml=); 0 when unknown. Never probes
// the live machine: clients run on login nodes without GPUs.
uint64_t known_gpu_memory(const EgpuConfig& config) {
  if (config.gpu_memory_bytes != 0 || config.topology_xml.empty()) return config.gpu_memory_bytes;
  egpu::topo::XmlOptions quiet;
  quiet.log = [](std::string_view) {};
  const auto loaded = egpu::topo::load_from_xml(config.topology_xml, quiet);
  uint64_t most = 0;
  if (loaded.ok()) {
    for (const auto& gpu : loaded.topology->gpus)
      most = std::max(most, gpu.memory_bytes);
  }
  return most;
}

int option_mode(int, const char* optarg, int remote) {
  try {
    auto m = egpu::model::parse_mode_option(optarg != nullptr ? optarg : "");
    if (!m) return option_error(remote, m.error());
    state().mode = *m;
    return 0;
  } catch (...) {
    return option_error(remote, "internal error while reading --egpu-mode");
  }
}

int option_mem(int, const char* optarg, int remote) {
  try {
    auto b = egpu::model::parse_mem_option(optarg != nullptr ? optarg : "",
                                           known_gpu_memory(state().config));
    if (!b) return option_error(remote, b.error());
    state().mem_bytes = *b;
    return 0;
  } catch (...) {
    return option_error(remote, "internal error while reading --egpu-mem");
  }
}

int option_slo(int, const char* optarg, int remote) {
  try {
    auto o = egpu::model::parse_slo_option(optarg != nullptr ? optarg : "");
    if (!o) return option_error(remote, o.error());
    state().objective = *o;
    return 0;
  } catch (...) {
    return option_error(remote, "internal error while reading --egpu-slo");
  }
}

struct spank_option kOptions[] = {
    {const_cast<char*>("egpu-mode"), const_cast<char*>("burst|cap|lend"),
     const_cast<char*>("egpu: burst may use idle GPU time beyond the share; cap never exceeds it; "
                       "lend is burst whose share a latency-critical step on the GPU may borrow"),
     1, 0, option_mode},
    {const_cast<char*>("egpu-mem"), const_cast<char*>("SIZE"),
     const_cast<char*>("egpu: GPU memory quota per GPU (at most the units' share), e.g. 16G"), 1, 0,
     option_mem},
    {const_cast<char*>("egpu-slo"), const_cast<char*>("pP:T|off"),
     const_cast<char*>("egpu: a latency objective, e.g. p99:40ms: the step borrows share from "
                       "lend steps on its GPUs while it is at risk of missing it"),
     1, 0, option_slo},
    SPANK_OPTIONS_TABLE_END};

void load_config(int ac, char** av) {
  PluginState& s = state();
  for (int i = 0; i < ac; ++i) {
    if (std::strncmp(av[i], "conf=", 5) == 0) s.config_path = av[i] + 5;
  }
  const char* from_env = std::getenv(EGPU_ENV_CONF);
  if (from_env != nullptr && from_env[0] != '\0') s.config_path = from_env;
  if (s.config_loaded) return;
  auto loaded = egpu::config::load_egpu_config(s.config_path);
  if (loaded) {
    s.config = *loaded;
    s.config_loaded = true;
  }
}

std::string getenv_of(spank_t sp, const char* name) {
  // Grown until it fits: a user's LD_PRELOAD may be long, and one cut or
  // dropped would lose the user's own preloads. One variable is at most
  // 128 KiB (MAX_ARG_STRLEN).
  for (size_t size = 4096; size <= (size_t{1} << 20); size *= 4) {
    std::vector<char> buf(size);
    const spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) return buf.data();
    if (rc != ESPANK_NOSPACE) return "";
  }
  return "";
}

template <typename T>
bool item(spank_t sp, spank_item_t what, T* out) {
  return spank_get_item(sp, what, out) == ESPANK_SUCCESS;
}

// Records a step set-up failure: logged for the admin, shown to the user.
void step_error(const std::string& message) {
  slurm_error("egpu: %s", message.c_str());
  if (state().task_error.empty()) state().task_error = message;
}

// Asks the agent for the step's instances and prepares the tasks' env. Errors
// are kept for slurm_spank_task_init (see the top); only a failure to read
// Slurm's own items fails slurmstepd.
int create_instances(spank_t sp) {
  PluginState& s = state();
  uint32_t uid = 0, gid = 0, job = 0, step = 0;
  if (!item(sp, S_JOB_UID, &uid) || !item(sp, S_JOB_GID, &gid) || !item(sp, S_JOB_ID, &job) ||
      !item(sp, S_JOB_STEPID, &step)) {
    slurm_error("egpu: cannot read the step's ids from Slurm");
    return -1;
  }
  if (step == egpu::protocol::kStepExtern) return 0;
  // Every step's tasks learn their node's agent, egpu units or none: egpuctl
  // in a step (`egpuctl resize JOB.STEP=...` starts one per node) talks to it.
  spank_setenv(sp, EGPU_ENV_SOCKET, s.config.socket_path.c_str(), 1);
  if (!s.task_error.empty()) return 0;  // an option was refused already
  const egpu::model::StepEnv env{getenv_of(sp, EGPU_ENV_GPU_INDICES), getenv_of(sp, EGPU_ENV_UNITS),
                                 getenv_of(sp, EGPU_ENV_MEM_QUOTA),
                                 getenv_of(sp, EGPU_ENV_JOB_UNITS)};
  // In slurmstepd this is the step's node count: a step on several nodes is
  // one gang across them (kCreateSpansNodes).
  uint32_t nodes = 1;
  if (!item(sp, S_JOB_NNODES, &nodes)) nodes = 1;
  auto plan =
      egpu::model::plan_step_instances(env, {job, step, uid, gid, nodes > 1},
                                       {s.mode, s.mem_bytes, s.objective}, s.config.default_mode);
  if (!plan) {
    step_error(plan.error());
    return 0;
  }
  if (plan->empty()) {  // no egpu units in this step
    s.task_warning = egpu::model::options_without_egpu({s.mode, s.mem_bytes, s.objective});
    return 0;
  }
  auto client = egpu::protocol::ControlClient::connect(s.config.socket_path);
  if (!client) {
    const std::string why = "no egpu node agent answers (" + client.error() + ")";
    if (s.config.fail_mode == egpu::FailMode::kOpen) {
      s.task_warning = why + "; this step runs WITHOUT GPU share enforcement (FailMode=open)";
      slurm_error("egpu: %s", s.task_warning.c_str());
    } else {
      step_error(why + "; the step is refused rather than run unenforced (FailMode=closed)");
    }
    return 0;
  }
  s.job_id = job;
  s.step_id = step;
  for (const auto& req : *plan) {
    auto r = client->call(req);
    if (!r) {
      step_error("the node agent failed: " + r.error());
      return 0;
    }
    if (r->status != egpu::protocol::ReplyStatus::kOk &&
        r->status != egpu::protocol::ReplyStatus::kExists) {
      step_error("the node agent refused the step's share of GPU " + std::to_string(req.gpu_index) +
                 ": " + egpu::protocol::to_string(r->status) + ": " + r->text);
      return 0;  // slurm_spank_exit removes what was created
    }
    s.created = true;
    if (s.objective && r->status == egpu::protocol::ReplyStatus::kExists) {
      // Created before (by whom, the agent does not say): it keeps what it has.
      s.task_warning = "the step's instance on GPU " + std::to_string(req.gpu_index) +
                       " existed already; its latency objective was left as it was (egpuctl slo "
                       "sets it)";
      slurm_error("egpu: %s", s.task_warning.c_str());
    }
    if (s.objective && r->status == egpu::protocol::ReplyStatus::kOk) {
      auto o = client->call(egpu::protocol::ObjectiveRequest{
          r->instance_id, s.objective->percentile_milli, 0, s.objective->target_ns});
      if (!o || o->status != egpu::protocol::ReplyStatus::kOk) {
        step_error("the node agent refused the step's latency objective on GPU " +
                   std::to_string(req.gpu_index) + ": " + (o ? o->text : o.error()));
        return 0;
      }
    }
  }
  if (s.created && s.config.step_records && s.config.step_record_interval_s > 0) {
    // What the step achieved so far, every interval, until it ends here.
    // Without the thread (none could be started) the step runs on with its
    // final record only.
    try {
      s.checkpoints = new egpu::spank::StepCheckpoints(
          {job, step, job_ref_of(sp, job), egpu::spank::node_name(getenv_of(sp, EGPU_ENV_NODE)),
           s.config.socket_path, egpu::spank::scontrol_env()},
          std::chrono::seconds(s.config.step_record_interval_s), kRecordTimeoutMs,
          // slurmd's log only: slurm_error would also reach the job's
          // output, and a missed checkpoint (the agent restarting) is not
          // the user's concern; the next one or the final record follows.
          [job, step](const std::string& what) {
            slurm_info("egpu: step %u.%s: %s", static_cast<unsigned>(job),
                       egpu::protocol::step_label(step).c_str(), what.c_str());
          });
    } catch (const std::exception& e) {
      slurm_error("egpu: step %u.%s: no checkpoints of its usage: %s", static_cast<unsigned>(job),
                  egpu::protocol::step_label(step).c_str(), e.what());
    }
  }
  // The tasks attach to these instances through the preloaded shim.
  std::string preload = s.config.shim_library;
  const std::string existing = getenv_of(sp, "LD_PRELOAD");
  if (!existing.empty()) preload += " " + existing;
  spank_setenv(sp, "LD_PRELOAD", preload.c_str(), 1);
  spank_setenv(sp, EGPU_ENV_JOB_ID, std::to_string(job).c_str(), 1);
  spank_setenv(sp, EGPU_ENV_STEP_ID, std::to_string(step).c_str(), 1);
  spank_setenv(sp, EGPU_ENV_SOCKET, s.config.socket_path.c_str(), 1);
  spank_setenv(sp, EGPU_ENV_FAIL_MODE, egpu::to_string(s.config.fail_mode), 1);
  return 0;
}

// Removes the step's instances on this node and records what they achieved
// in the job's AdminComment. Never fails the step: it has ended.
void remove_step(spank_t sp) {
  PluginState& s = state();
  s.created = false;
  stop_checkpoints();
  auto client = egpu::protocol::ControlClient::connect(s.config.socket_path);
  if (!client) {
    // The reaper frees them when this slurmstepd ends; the agent logs their usage.
    slurm_error("egpu: cannot remove step %u.%u from the node agent: %s",
                static_cast<unsigned>(s.job_id), s.step_id, client.error().c_str());
    return;
  }
  auto r = client->call(egpu::protocol::RemoveRequest{s.job_id, s.step_id, 0});
  if (!r || (r->status != egpu::protocol::ReplyStatus::kOk &&
             r->status != egpu::protocol::ReplyStatus::kNotFound)) {
    slurm_error("egpu: removing step %u.%u: %s", static_cast<unsigned>(s.job_id), s.step_id,
                r ? r->text.c_str() : r.error().c_str());
    return;
  }
  if (r->status != egpu::protocol::ReplyStatus::kOk || !s.config.step_records) return;
  const std::string failed = egpu::spank::record_step_usage(
      {s.job_id, s.step_id, job_ref_of(sp, s.job_id),
       egpu::spank::node_name(getenv_of(sp, EGPU_ENV_NODE))},
      r->text, egpu::spank::RecordKind::kFinal, kRecordTimeoutMs, egpu::spank::scontrol_env());
  if (!failed.empty())
    slurm_error("egpu: step %u.%s: %s", static_cast<unsigned>(s.job_id),
                egpu::protocol::step_label(s.step_id).c_str(), failed.c_str());
}

std::string job_ref_of(spank_t sp, uint64_t job_id) {
  constexpr uint32_t kNoVal = 0xfffffffe;
  uint32_t array_id = 0, array_task = kNoVal;
  if (item(sp, S_JOB_ARRAY_ID, &array_id) && array_id == job_id &&
      item(sp, S_JOB_ARRAY_TASK_ID, &array_task) && array_task != kNoVal)
    return std::to_string(array_id) + "_" + std::to_string(array_task);
  return std::to_string(job_id);
}

}  // namespace

extern "C" {

EGPU_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  try {
    load_config(ac, av);
    for (auto* opt = kOptions; opt->name != nullptr; ++opt) {
      if (spank_option_register(sp, opt) != ESPANK_SUCCESS) {
        slurm_error("egpu: cannot register option --%s", opt->name);
        return -1;
      }
    }
    if (spank_remote(sp) && !state().config_loaded) {
      // On a node the agent's configuration must be readable and valid.
      auto loaded = egpu::config::load_egpu_config(state().config_path);
      slurm_error("egpu: %s", loaded ? "configuration unreadable" : loaded.error().c_str());
      return -1;
    }
    return 0;
  } catch (...) {
    slurm_error("egpu: internal error in slurm_spank_init");
    return -1;
  }
}

EGPU_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  try {
    if (spank_context() != S_CTX_REMOTE) {
      // srun, sbatch, salloc: options that cannot go together are refused
      // before anything is submitted.
      const PluginState& s = state();
      if (egpu::Status ok = egpu::model::check_step_options({s.mode, s.mem_bytes, s.objective},
                                                            s.config.default_mode);
          !ok) {
        slurm_error("egpu: %s", ok.error().c_str());
        return -1;
      }
      return 0;
    }
    return create_instances(sp);
  } catch (...) {
    slurm_error("egpu: internal error while registering the step");
    return -1;
  }
}

// In each task, as the job's user, with its stdio set up: what went wrong
// while setting up the step goes to the job's output.
EGPU_EXPORT int slurm_spank_task_init(spank_t, int, char**) {
  try {
    const PluginState& s = state();
    if (!s.task_error.empty()) {
      std::fprintf(stderr, "egpu: error: %s\n", s.task_error.c_str());
      return -1;  // the task exits 1 before it runs
    }
    if (!s.task_warning.empty())
      std::fprintf(stderr, "egpu: warning: %s\n", s.task_warning.c_str());
    return 0;
  } catch (...) {
    return -1;
  }
}

// The last local task exited: the step is over on this node. Its instances
// go now, before slurmstepd tells srun or slurmctld that the tasks ended, so
// the usage record reaches the job while it still runs (slurmctld refuses
// updates to finished jobs; srun ends a job it allocated itself as soon as
// its tasks are done).
EGPU_EXPORT int slurm_spank_task_exit(spank_t sp, int, char**) {
  try {
    PluginState& s = state();
    if (spank_context() != S_CTX_REMOTE || !s.created) return 0;
    uint32_t local_tasks = 0;
    if (!item(sp, S_JOB_LOCAL_TASK_COUNT, &local_tasks)) local_tasks = 1;
    if (++s.tasks_exited >= local_tasks) remove_step(sp);
    return 0;
  } catch (...) {
    return 0;
  }
}

// Whatever is left (the tasks never started): removed when slurmstepd ends.
EGPU_EXPORT int slurm_spank_exit(spank_t sp, int, char**) {
  try {
    if (spank_context() == S_CTX_REMOTE && state().created) remove_step(sp);
    stop_checkpoints();
    return 0;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
