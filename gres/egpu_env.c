/* Builds the egpu environment (see egpu_env.h). */
#include "egpu_env.h"

#include "core/env/egpu_env_names.h"
#include "egpu_env_list.h"
#include "egpu_node.h"
#include "egpu_stepd.h"
#include "gres_common.h"

static const char* const egpu_alloc_vars[] = {EGPU_ENV_GPU_INDICES, EGPU_ENV_UNITS,
                                              EGPU_ENV_JOB_UNITS, EGPU_ENV_MEM_QUOTA,
                                              EGPU_ENV_GPU_UUIDS};

static void release_entry(char* entry) {
  xfree(entry);
}

/* Every copy of one of our variables goes (not unsetenvp's every other one
 * of a run: see egpu_env_list.h); set, it is then the only one. */
static void drop_ours(char** env, const char* name) {
  (void)egpu_env_remove_all(env, name, release_entry);
}
static void set_ours(char*** env, const char* name, const char* value) {
  drop_ours(*env, name);
  env_array_overwrite(env, name, value);
}

static bool has_units(bitstr_t* bits, uint64_t units) {
  return bits && units && bit_set_count(bits) > 0;
}

/* Device number (/dev/nvidiaN) of the GPU with gres index idx. */
static int dev_num_of_index(int idx) {
  if (!egpu_node_gres_devices) return idx;
  egpu_list_itr_t itr = list_iterator_create(egpu_node_gres_devices);
  gres_device_t* dev;
  int found = idx;
  while ((dev = list_next(itr))) {
    if (dev->index == idx) {
      found = dev->dev_num;
      break;
    }
  }
  list_iterator_destroy(itr);
  return found;
}

/* The gres/gpu variables, exactly as Slurm's own GPU-like GRES set them. */
static void set_gpu_vars(const egpu_env_request_t* req) {
#if EGPU_SLURM_NEW_GRES_API
  common_gres_env_t gres_env = {
      .bit_alloc = req->gpus,
      .env_ptr = req->env,
      .flags = req->flags,
      .gres_cnt = req->units,
      .gres_conf_flags = egpu_node_env_flags,
      .gres_devices = egpu_node_gres_devices,
      .is_job = req->kind == EGPU_ENV_KIND_JOB,
      .is_task = req->kind == EGPU_ENV_KIND_TASK,
      .usable_gres = req->usable,
  };
  gres_common_gpu_set_env(&gres_env);
#else
  /* 22.05 keeps the device cursor across calls within one step. */
  static int step_inx, task_inx;
  static bool step_seen, task_seen;
  int job_inx = 0;
  bool job_seen = false;
  int* inx = &job_inx;
  bool* seen = &job_seen;
  if (req->kind == EGPU_ENV_KIND_STEP) {
    inx = &step_inx;
    seen = &step_seen;
  } else if (req->kind == EGPU_ENV_KIND_TASK) {
    inx = &task_inx;
    seen = &task_seen;
  }
  gres_common_gpu_set_env(req->env, req->gpus, req->usable, seen, inx,
                          req->kind == EGPU_ENV_KIND_TASK, req->kind == EGPU_ENV_KIND_JOB,
                          req->flags, egpu_node_env_flags, egpu_node_gres_devices);
#endif
}

/* Units per allocated GPU: Slurm's per-GPU counts when we have them, else
 * everything on the one GPU, else (prolog on a multi-GPU allocation, where
 * Slurm does not hand us the split) an even split. */
static uint64_t units_of(const egpu_env_request_t* req, int idx, int nth, int nbits) {
  if (req->per_bit) return req->per_bit[idx];
  uint64_t share = req->units / (uint64_t)nbits;
  return share + ((uint64_t)nth < req->units % (uint64_t)nbits ? 1 : 0);
}

static void set_egpu_alloc_vars(const egpu_env_request_t* req) {
  char *indices = NULL, *units = NULL, *job_units = NULL, *quota = NULL, *uuids = NULL;
  const char* sep = "";
  bool all_uuids = true;
  int nbits = bit_set_count(req->gpus);
  int nth = 0;
  int size = (int)bit_size(req->gpus);
  for (int idx = 0; idx < size; idx++) {
    if (!bit_test(req->gpus, idx)) continue;
    int this_nth = nth++;
    if (req->usable && (idx >= bit_size(req->usable) || !bit_test(req->usable, idx))) continue;
    int dev = dev_num_of_index(idx);
    uint64_t n = units_of(req, idx, this_nth, nbits);
    uint64_t mem = egpu_node_gpu_memory(dev);
    const char* uuid = egpu_node_gpu_uuid(dev);
    /* The agent numbers GPUs by device (GpuDeviceFiles=/dev/nvidia%d), and
     * Slurm by gres.conf order: the same only where File= lists
     * /dev/nvidia0..N-1 in order (not /dev/nvidia[1-3]). */
    xstrfmtcat(indices, "%s%d", sep, dev);
    xstrfmtcat(units, "%s%" PRIu64, sep, n);
    /* A job's env holds its own allocation; a step's, its job's as
     * slurmstepd knows it (0: not known). Only a step's env pointer is
     * &step->env (a task's is not): never ask the step record for a task. */
    if (req->kind != EGPU_ENV_KIND_TASK) {
      const uint64_t job_n =
          req->kind == EGPU_ENV_KIND_JOB ? n : egpu_stepd_job_units_on(req->env, idx);
      xstrfmtcat(job_units, "%s%" PRIu64, sep, job_n);
    }
    xstrfmtcat(quota, "%s%" PRIu64, sep, mem * n / EGPU_UNITS_PER_GPU);
    if (uuid)
      xstrfmtcat(uuids, "%s%s", sep, uuid);
    else
      all_uuids = false;
    sep = ",";
  }
  if (!indices) return; /* binding left this task none of our GPUs */
  set_ours(req->env, EGPU_ENV_GPU_INDICES, indices);
  set_ours(req->env, EGPU_ENV_UNITS, units);
  /* Only slurmstepd's step env carries it (SPANK reads it there); a task's
   * env is not the step record's, so a task bound to some GPUs drops it. */
  if (req->kind == EGPU_ENV_KIND_TASK)
    drop_ours(*req->env, EGPU_ENV_JOB_UNITS);
  else
    set_ours(req->env, EGPU_ENV_JOB_UNITS, job_units);
  set_ours(req->env, EGPU_ENV_MEM_QUOTA, quota);
  if (all_uuids)
    set_ours(req->env, EGPU_ENV_GPU_UUIDS, uuids);
  else
    drop_ours(*req->env, EGPU_ENV_GPU_UUIDS);
  xfree(indices);
  xfree(units);
  xfree(job_units);
  xfree(quota);
  xfree(uuids);
}

/* UUIDs of whole GPUs that gres/gpu gave the step (it ran before us). */
static void set_uuids_from_gpu_vars(char*** env, egpu_env_kind_t kind) {
  const char* gpus =
      getenvp(*env, kind == EGPU_ENV_KIND_JOB ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
  if (!gpus && kind != EGPU_ENV_KIND_JOB) gpus = getenvp(*env, "SLURM_JOB_GPUS");
  if (!gpus || !gpus[0]) return;
  char *uuids = NULL, *copy = xstrdup(gpus), *save = NULL;
  const char* sep = "";
  bool all = true;
  for (char* tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    const char* uuid = egpu_node_gpu_uuid(atoi(tok));
    if (!uuid) {
      all = false;
      break;
    }
    xstrfmtcat(uuids, "%s%s", sep, uuid);
    sep = ",";
  }
  if (all && uuids) set_ours(env, EGPU_ENV_GPU_UUIDS, uuids);
  xfree(uuids);
  xfree(copy);
}

void egpu_env_apply(const egpu_env_request_t* req) {
  const char* node = egpu_node_name();
  if (node && req->kind != EGPU_ENV_KIND_TASK) set_ours(req->env, EGPU_ENV_NODE, node);

  if (has_units(req->gpus, req->units)) {
    set_gpu_vars(req);
    set_egpu_alloc_vars(req);
    return;
  }
  /* Nothing of ours here: leave every GPU variable alone (gres/gpu may
   * have set them for a whole-GPU job), drop only our own. */
  if (req->kind == EGPU_ENV_KIND_TASK) return;
  for (size_t i = 0; i < sizeof(egpu_alloc_vars) / sizeof(egpu_alloc_vars[0]); i++)
    drop_ours(*req->env, egpu_alloc_vars[i]);
  set_uuids_from_gpu_vars(req->env, req->kind);
}

void egpu_env_prep(char*** env, egpu_prep_t* prep, int node_inx) {
  if (!prep || node_inx < 0 || (uint32_t)node_inx >= prep->node_cnt) return;
  bitstr_t* bits = prep->gres_bit_alloc ? prep->gres_bit_alloc[node_inx] : NULL;
  uint64_t units = prep->gres_cnt_node_alloc ? prep->gres_cnt_node_alloc[node_inx] : 0;
  if (!has_units(bits, units)) return;
#if EGPU_SLURM_NEW_GRES_API
  (void)gres_common_prep_set_env(env, prep, node_inx, egpu_node_env_flags, egpu_node_gres_devices);
#else
  (void)gres_common_epilog_set_env(env, prep, node_inx, egpu_node_env_flags,
                                   egpu_node_gres_devices);
#endif
  egpu_env_request_t req = {.kind = EGPU_ENV_KIND_JOB, .env = env, .gpus = bits, .units = units};
  set_egpu_alloc_vars(&req);
  const char* node = egpu_node_name();
  if (node) set_ours(env, EGPU_ENV_NODE, node);
}
