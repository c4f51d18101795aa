/* See egpu_stepd.h. Built against the exact Slurm source of the release, so
 * the step record's layout is the one slurmstepd uses. */
#include "egpu_stepd.h"

#include <stddef.h>

#include "src/slurmd/slurmstepd/slurmstepd_job.h"

static uint32_t egpu_plugin_id(void) {
  static uint32_t id;
  if (!id) id = gres_build_id("egpu");
  return id;
}

/* The step record that owns env_ptr (slurmstepd passes &step->env to
 * gres_g_job_set_env/gres_g_step_set_env), or NULL outside slurmstepd. */
static stepd_step_rec_t* step_of(char*** env_ptr) {
  if (!running_in_slurmstepd() || !env_ptr) return NULL;
  return (stepd_step_rec_t*)((char*)env_ptr - offsetof(stepd_step_rec_t, env));
}

uint64_t egpu_stepd_job_units_on(char*** env_ptr, int idx) {
  stepd_step_rec_t* step = step_of(env_ptr);
  if (!step || !step->job_gres_list || idx < 0) return 0;
  uint64_t units = 0;
  egpu_list_itr_t itr = list_iterator_create(step->job_gres_list);
  gres_state_t* state;
  while ((state = list_next(itr))) {
    if (state->plugin_id != egpu_plugin_id() || !state->gres_data) continue;
    gres_job_state_t* js = state->gres_data;
    /* slurmstepd's copy holds this node only, at index 0. */
    if (js->node_cnt < 1 || !js->gres_bit_alloc || !js->gres_bit_alloc[0]) continue;
    bitstr_t* bits = js->gres_bit_alloc[0];
    if (idx >= bit_size(bits) || !bit_test(bits, idx)) continue;
#if EGPU_SLURM_HAS_PER_BIT
    if (js->gres_per_bit_alloc && js->gres_per_bit_alloc[0]) {
      units = js->gres_per_bit_alloc[0][idx];
      break;
    }
#endif
    /* Without per-GPU counts the node's count is known per GPU only when
     * it sits on one GPU (always so before 23.11). */
    if (js->gres_cnt_node_alloc && bit_set_count(bits) == 1) units = js->gres_cnt_node_alloc[0];
    break;
  }
  list_iterator_destroy(itr);
  return units;
}

#if EGPU_SLURM_HAS_PER_BIT

const uint64_t* egpu_stepd_units_per_gpu(char*** env_ptr, bool is_job, bitstr_t* bit_alloc) {
  stepd_step_rec_t* step = step_of(env_ptr);
  if (!step || !bit_alloc) return NULL;
  list_t* gres_list = is_job ? step->job_gres_list : step->step_gres_list;
  if (!gres_list) return NULL;
  const uint64_t* found = NULL;
  list_itr_t* itr = list_iterator_create(gres_list);
  gres_state_t* state;
  while ((state = list_next(itr))) {
    if (state->plugin_id != egpu_plugin_id() || !state->gres_data) continue;
    uint32_t node_cnt;
    bitstr_t** bits;
    uint64_t** per_bit;
    if (is_job) {
      gres_job_state_t* js = state->gres_data;
      node_cnt = js->node_cnt;
      bits = js->gres_bit_alloc;
      per_bit = js->gres_per_bit_alloc;
    } else {
      gres_step_state_t* ss = state->gres_data;
      node_cnt = ss->node_cnt;
      bits = ss->gres_bit_alloc;
      per_bit = ss->gres_per_bit_alloc;
    }
    /* slurmstepd sets env from node index 0 of its copy. */
    if (node_cnt < 1 || !bits || !bits[0] || !per_bit || !per_bit[0]) continue;
    if (bit_size(bits[0]) == bit_size(bit_alloc) && bit_equal(bits[0], bit_alloc)) {
      found = per_bit[0];
      break;
    }
  }
  list_iterator_destroy(itr);
  return found;
}
#else
const uint64_t* egpu_stepd_units_per_gpu(char*** env_ptr, bool is_job, bitstr_t* bit_alloc) {
  (void)env_ptr;
  (void)is_job;
  (void)bit_alloc;
  return NULL;
}
#endif
