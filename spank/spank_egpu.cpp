// spank_egpu: the SPANK side of egpu. In srun/sbatch/salloc it adds and checks
// --egpu-mode and --egpu-mem; in slurmstepd (as root) it asks the node agent
// to create the step's instances from what gres/egpu put in the step's
// environment, preloads the shim into the tasks, and removes the instances
// when the step ends. Thin glue: the rules are in core/model/step_plan.
//
// plugstack.conf:  required /path/spank_egpu.so [conf=/etc/egpu/egpu.conf]
extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/config/egpu_config.h"
#include "core/model/step_plan.h"
#include "core/protocol/control_client.h"

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
  std::string config_path = "/etc/egpu/egpu.conf";
  std::optional<egpu::config::ShareMode> mode;
  std::optional<uint64_t> mem_bytes;
  bool created = false;
  uint64_t job_id = 0;
  uint32_t step_id = 0;
};

PluginState& state() {
  static PluginState s;
  return s;
}

int option_mode(int, const char* optarg, int) {
  try {
    auto m = egpu::model::parse_mode_option(optarg != nullptr ? optarg : "");
    if (!m) {
      slurm_error("egpu: %s", m.error().c_str());
      return -1;
    }
    state().mode = *m;
    return 0;
  } catch (...) {
    return -1;
  }
}

int option_mem(int, const char* optarg, int) {
  try {
    auto b = egpu::model::parse_mem_option(optarg != nullptr ? optarg : "",
                                           state().config.gpu_memory_bytes);
    if (!b) {
      slurm_error("egpu: %s", b.error().c_str());
      return -1;
    }
    state().mem_bytes = *b;
    return 0;
  } catch (...) {
    return -1;
  }
}

struct spank_option kOptions[] = {
    {const_cast<char*>("egpu-mode"), const_cast<char*>("burst|cap"),
     const_cast<char*>("egpu: burst may use idle GPU time beyond the share; cap never exceeds it"),
     1, 0, option_mode},
    {const_cast<char*>("egpu-mem"), const_cast<char*>("SIZE"),
     const_cast<char*>("egpu: GPU memory quota per GPU (at most the units' share), e.g. 16G"), 1, 0,
     option_mem},
    SPANK_OPTIONS_TABLE_END};

void load_config(int ac, char** av) {
  PluginState& s = state();
  for (int i = 0; i < ac; ++i) {
    if (std::strncmp(av[i], "conf=", 5) == 0) s.config_path = av[i] + 5;
  }
  if (s.config_loaded) return;
  auto loaded = egpu::config::load_egpu_config(s.config_path);
  if (loaded) {
    s.config = *loaded;
    s.config_loaded = true;
  }
}

std::string getenv_of(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  if (spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size())) != ESPANK_SUCCESS) return "";
  return buf.data();
}

template <typename T>
bool item(spank_t sp, spank_item_t what, T* out) {
  return spank_get_item(sp, what, out) == ESPANK_SUCCESS;
}

int create_instances(spank_t sp) {
  PluginState& s = state();
  uint32_t uid = 0, gid = 0, job = 0, step = 0;
  if (!item(sp, S_JOB_UID, &uid) || !item(sp, S_JOB_GID, &gid) || !item(sp, S_JOB_ID, &job) ||
      !item(sp, S_JOB_STEPID, &step)) {
    slurm_error("egpu: cannot read the step's ids from Slurm");
    return -1;
  }
  if (step == egpu::protocol::kStepExtern) return 0;
  const egpu::model::StepEnv env{getenv_of(sp, "EGPU_GPU_INDICES"), getenv_of(sp, "EGPU_UNITS"),
                                 getenv_of(sp, "EGPU_MEM_QUOTA")};
  auto plan = egpu::model::plan_step_instances(env, {job, step, uid, gid}, {s.mode, s.mem_bytes},
                                               s.config.default_mode);
  if (!plan) {
    slurm_error("egpu: %s", plan.error().c_str());
    return -1;
  }
  if (plan->empty()) return 0;  // no egpu units in this step
  const bool fail_open = s.config.fail_mode == egpu::config::FailMode::kOpen;
  auto client = egpu::protocol::ControlClient::connect(s.config.socket_path);
  if (!client) {
    if (fail_open) {
      slurm_error("egpu: %s; the step runs WITHOUT GPU share enforcement (FailMode=open)",
                  client.error().c_str());
      return 0;
    }
    slurm_error("egpu: %s; refusing to run the step unenforced (FailMode=closed)",
                client.error().c_str());
    return -1;
  }
  s.job_id = job;
  s.step_id = step;
  for (const auto& req : *plan) {
    auto r = client->call(req);
    if (!r) {
      slurm_error("egpu: the node agent failed: %s", r.error().c_str());
      return -1;
    }
    if (r->status != egpu::protocol::ReplyStatus::kOk &&
        r->status != egpu::protocol::ReplyStatus::kExists) {
      slurm_error("egpu: GPU %u: %s: %s", req.gpu_index, egpu::protocol::to_string(r->status),
                  r->text.c_str());
      return -1;
    }
    s.created = true;
  }
  // The tasks attach to these instances through the preloaded shim.
  std::string preload = s.config.shim_library;
  const std::string existing = getenv_of(sp, "LD_PRELOAD");
  if (!existing.empty()) preload += " " + existing;
  spank_setenv(sp, "LD_PRELOAD", preload.c_str(), 1);
  spank_setenv(sp, "EGPU_JOB_ID", std::to_string(job).c_str(), 1);
  spank_setenv(sp, "EGPU_STEP_ID", std::to_string(step).c_str(), 1);
  spank_setenv(sp, "EGPU_SOCKET", s.config.socket_path.c_str(), 1);
  spank_setenv(sp, "EGPU_FAIL_MODE", egpu::config::to_string(s.config.fail_mode).c_str(), 1);
  return 0;
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
    if (spank_context() != S_CTX_REMOTE) return 0;
    return create_instances(sp);
  } catch (...) {
    slurm_error("egpu: internal error while registering the step");
    return -1;
  }
}

EGPU_EXPORT int slurm_spank_exit(spank_t sp, int, char**) {
  try {
    PluginState& s = state();
    if (spank_context() != S_CTX_REMOTE || !s.created) return 0;
    (void)sp;
    auto client = egpu::protocol::ControlClient::connect(s.config.socket_path);
    if (!client) {
      slurm_error("egpu: cannot remove step %u.%u from the node agent: %s",
                  static_cast<unsigned>(s.job_id), s.step_id, client.error().c_str());
      return 0;  // the agent reclaims dead processes; never fail a finished step
    }
    auto r = client->call(egpu::protocol::RemoveRequest{s.job_id, s.step_id, 0});
    if (!r || (r->status != egpu::protocol::ReplyStatus::kOk &&
               r->status != egpu::protocol::ReplyStatus::kNotFound)) {
      slurm_error("egpu: removing step %u.%u: %s", static_cast<unsigned>(s.job_id), s.step_id,
                  r ? r->text.c_str() : r.error().c_str());
    }
    s.created = false;
    return 0;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
