/* gres/egpu: Slurm GRES plugin for fractional GPUs. 100 egpu units per GPU,
 * mapped onto the node's gpu records as a shared GRES (like Slurm's shard).
 * Entry points only; the work is in egpu_node.c (node config), egpu_env.c
 * (environment) and egpu_stepd.c (per-GPU split). One source for Slurm 22.05
 * and 24.11; plugin_version must equal the release's SLURM_VERSION_NUMBER. */
#include "egpu_env.h"
#include "egpu_node.h"
#include "egpu_slurm.h"
#include "egpu_stepd.h"
#include "gres_c_s.h"
#include "gres_common.h"

const char plugin_name[] = "egpu fractional GPU GRES plugin";
const char plugin_type[] = "gres/egpu";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

extern int init(void) {
  debug("gres/egpu: loaded");
  return SLURM_SUCCESS;
}

extern int fini(void) {
  egpu_node_fini();
  return SLURM_SUCCESS;
}

extern int gres_p_node_config_load(egpu_list_t gres_conf_list, node_config_load_t* config) {
  return egpu_node_config_load(gres_conf_list, config);
}

extern void gres_p_job_set_env(char*** job_env_ptr, bitstr_t* gres_bit_alloc,
                               uint64_t gres_per_node, gres_internal_flags_t flags) {
  egpu_env_request_t req = {
      .kind = EGPU_ENV_KIND_JOB,
      .env = job_env_ptr,
      .gpus = gres_bit_alloc,
      .units = gres_per_node,
      .per_bit = egpu_stepd_units_per_gpu(job_env_ptr, true, gres_bit_alloc),
      .flags = flags,
  };
  egpu_env_apply(&req);
}

extern void gres_p_step_set_env(char*** step_env_ptr, bitstr_t* gres_bit_alloc,
                                uint64_t gres_per_node, gres_internal_flags_t flags) {
  egpu_env_request_t req = {
      .kind = EGPU_ENV_KIND_STEP,
      .env = step_env_ptr,
      .gpus = gres_bit_alloc,
      .units = gres_per_node,
      .per_bit = egpu_stepd_units_per_gpu(step_env_ptr, false, gres_bit_alloc),
      .flags = flags,
  };
  egpu_env_apply(&req);
}

/* Only called with --gpu-bind/--tres-bind: narrows the step's GPUs per task.
 * The per-GPU split is not known here, so tasks keep the step's EGPU_UNITS
 * list unless binding removes GPUs. */
static void task_set_env(char*** env, bitstr_t* gres_bit_alloc, uint64_t gres_cnt,
                         bitstr_t* usable_gres, gres_internal_flags_t flags) {
  egpu_env_request_t req = {
      .kind = EGPU_ENV_KIND_TASK,
      .env = env,
      .gpus = gres_bit_alloc,
      .units = gres_cnt,
      .usable = usable_gres,
      .flags = flags,
  };
  egpu_env_apply(&req);
}

#if EGPU_SLURM_NEW_GRES_API
extern void gres_p_task_set_env(char*** task_env_ptr, bitstr_t* gres_bit_alloc, uint64_t gres_cnt,
                                bitstr_t* usable_gres, gres_internal_flags_t flags) {
  task_set_env(task_env_ptr, gres_bit_alloc, gres_cnt, usable_gres, flags);
}
#else
extern void gres_p_task_set_env(char*** task_env_ptr, bitstr_t* gres_bit_alloc,
                                bitstr_t* usable_gres, uint64_t gres_cnt,
                                gres_internal_flags_t flags) {
  task_set_env(task_env_ptr, gres_bit_alloc, gres_cnt, usable_gres, flags);
}
#endif

extern void gres_p_send_stepd(buf_t* buffer) {
#if EGPU_SLURM_NEW_GRES_API
  gres_send_stepd(buffer, egpu_node_gres_devices);
#else
  common_send_stepd(buffer, egpu_node_gres_devices);
#endif
  pack32(egpu_node_env_flags, buffer);
  gres_c_s_send_stepd(buffer);
  egpu_node_pack(buffer);
}

extern void gres_p_recv_stepd(buf_t* buffer) {
#if EGPU_SLURM_NEW_GRES_API
  gres_recv_stepd(buffer, &egpu_node_gres_devices);
#else
  common_recv_stepd(buffer, &egpu_node_gres_devices);
#endif
  safe_unpack32(&egpu_node_env_flags, buffer);
  gres_c_s_recv_stepd(buffer);
  if (egpu_node_unpack(buffer) != SLURM_SUCCESS) goto unpack_error;
  return;

unpack_error:
  error("gres/egpu: %s failed", __func__);
}

extern egpu_list_t gres_p_get_devices(void) {
  return egpu_node_gres_devices;
}

/* Nothing to program on the device: sharing is enforced by the egpu agent. */
extern void gres_p_step_hardware_init(bitstr_t* usable_gres, char* settings) {
  (void)usable_gres;
  (void)settings;
}

extern void gres_p_step_hardware_fini(void) {}

/* slurmctld: what the prolog/epilog env needs, per node of the job. */
static egpu_prep_t* build_prep(gres_job_state_t* gres_js) {
  egpu_prep_t* prep = xmalloc(sizeof(*prep));
  prep->node_cnt = gres_js->node_cnt;
  prep->gres_bit_alloc = xcalloc(prep->node_cnt, sizeof(bitstr_t*));
  prep->gres_cnt_node_alloc = xcalloc(prep->node_cnt, sizeof(uint64_t));
  for (uint32_t i = 0; i < prep->node_cnt; i++) {
    if (!gres_js->gres_bit_alloc || !gres_js->gres_bit_alloc[i]) continue;
    prep->gres_bit_alloc[i] = bit_copy(gres_js->gres_bit_alloc[i]);
    if (gres_js->gres_cnt_node_alloc)
      prep->gres_cnt_node_alloc[i] = gres_js->gres_cnt_node_alloc[i];
  }
  return prep;
}

#if EGPU_SLURM_NEW_GRES_API
extern gres_prep_t* gres_p_prep_build_env(gres_job_state_t* gres_js) {
  return build_prep(gres_js);
}

extern void gres_p_prep_set_env(char*** prep_env_ptr, gres_prep_t* gres_prep, int node_inx) {
  egpu_env_prep(prep_env_ptr, gres_prep, node_inx);
}
#else
extern gres_epilog_info_t* gres_p_epilog_build_env(gres_job_state_t* gres_js) {
  return build_prep(gres_js);
}

extern void gres_p_epilog_set_env(char*** epilog_env_ptr, gres_epilog_info_t* gres_ei,
                                  int node_inx) {
  egpu_env_prep(epilog_env_ptr, gres_ei, node_inx);
}

/* 22.05 asks plugins for job/step data; none is plugin-specific here. */
extern int gres_p_get_job_info(gres_job_state_t* gres_js, uint32_t node_inx,
                               enum gres_job_data_type data_type, void* data) {
  (void)gres_js;
  (void)node_inx;
  (void)data_type;
  (void)data;
  return EINVAL;
}

extern int gres_p_get_step_info(gres_step_state_t* gres_ss, uint32_t node_inx,
                                enum gres_step_data_type data_type, void* data) {
  (void)gres_ss;
  (void)node_inx;
  (void)data_type;
  (void)data;
  return EINVAL;
}
#endif
