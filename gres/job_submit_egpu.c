/* job_submit/egpu: the slurmctld side of egpu.
 *
 * 1. At slurmctld start (before state recovery and before nodes register) it
 *    tells Slurm's GRES layer that gres/egpu is a *shared* GRES on gpu. Slurm
 *    knows this by name only for mps and shard; for any other name it learns
 *    it from the first slurmd registration, which is too late:
 *    - the gpu<->egpu link is built when node GRES state is created, so on a
 *      fresh cluster a gpu:1 job could be placed on a GPU full of egpu jobs;
 *    - 22.05 rebuilds running jobs' GRES state before any node registers and
 *      kills egpu jobs on restart ("count mismatch").
 *    It does so through the exported gres_node_config_unpack(), feeding it one
 *    egpu record flagged shared, the same message a registering slurmd sends.
 * 2. It refuses requests Slurm would accept but never run, with a message:
 *    egpu:0; egpu named twice in one option (Slurm allocates the last entry
 *    only and refuses the job's steps); more than 100 units per node unless
 *    SelectTypeParameters has MULTIPLE_SHARING_GRES_PJ (24.11), without which
 *    a job's units must fit on one GPU and it would pend forever. It says why
 *    Slurm 22.05 refuses egpu jobs in the seconds after slurmctld starts,
 *    before nodes registered.
 * 3. With PackNodes=yes in egpu.conf it keeps node weights following free
 *    egpu units (egpu_node_weights.c).
 * 4. It appends the usage records SPANK sends when a step ends to the job's
 *    AdminComment (core/accounting/admin_comment.h), where sacct shows them
 *    after the job ended. */
#include <stdlib.h>
#include <string.h>

#include "egpu_node_weights.h"
#include "egpu_request.h"
#include "egpu_slurm.h"
#include "src/common/run_in_daemon.h"
#include "src/slurmctld/slurmctld.h"
#ifdef EGPU_HAVE_TOPO
#include "core/accounting/admin_comment_c.h"
#endif

const char plugin_name[] = "egpu job submit plugin";
const char plugin_type[] = "job_submit/egpu";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* The registration record format of gres_node_config_pack() (same on 22.05
 * and 24.11 for the current protocol version). */
static buf_t* registration_message(bool with_egpu_record) {
  buf_t* buf = init_buf(256);
  pack16(SLURM_PROTOCOL_VERSION, buf);
  pack16(with_egpu_record ? 1 : 0, buf);
  if (with_egpu_record) {
    pack32(GRES_MAGIC, buf);
    pack64(1, buf); /* count: non-zero or the record is skipped */
    pack32(0, buf); /* cpu_cnt */
    pack32(GRES_CONF_SHARED, buf);
    pack32(gres_build_id("egpu"), buf);
    packnull(buf); /* cpus */
    packnull(buf); /* links */
    packstr("egpu", buf);
    packnull(buf); /* type */
    packnull(buf); /* unique_id */
  }
  set_buf_offset(buf, 0);
  return buf;
}

static void mark_egpu_shared(void) {
  buf_t* buf = registration_message(true);
  int rc = gres_node_config_unpack(buf, "job_submit/egpu");
  FREE_NULL_BUFFER(buf);
  /* Leave the "last registration" list empty again. */
  buf = registration_message(false);
  (void)gres_node_config_unpack(buf, "job_submit/egpu");
  FREE_NULL_BUFFER(buf);
  if (rc != SLURM_SUCCESS)
    error("job_submit/egpu: could not mark gres/egpu as shared (is egpu in GresTypes?)");
  else
    info("job_submit/egpu: gres/egpu marked as a shared GRES on gpu");
}

extern int init(void) {
  if (running_in_slurmctld() && slurm_conf.gres_plugins &&
      xstrcasestr(slurm_conf.gres_plugins, "egpu")) {
    mark_egpu_shared();
    egpu_node_weights_start();
  }
  return SLURM_SUCCESS;
}

extern int fini(void) {
  egpu_node_weights_stop();
  return SLURM_SUCCESS;
}

static bool multiple_sharing_per_job(void) {
#ifdef MULTIPLE_SHARING_GRES_PJ
  return slurm_conf.select_type_param & MULTIPLE_SHARING_GRES_PJ;
#else
  return false;
#endif
}

/* Checks one TRES string; per_node says it is tres_per_node. */
static int check_tres(const char* tres, bool per_node, char** err_msg) {
  uint64_t units = 0;
  egpu_request_status_t st = egpu_request_units(tres, &units);
  if (st == EGPU_REQUEST_NONE) return SLURM_SUCCESS;
  if (st == EGPU_REQUEST_BAD) {
    xstrfmtcat(*err_msg, "egpu: cannot read the egpu count in '%s'", tres);
    return ESLURM_INVALID_GRES;
  }
  if (st == EGPU_REQUEST_SEVERAL) {
    xstrfmtcat(*err_msg,
               "egpu: '%s' names egpu more than once; Slurm would allocate only the last entry "
               "and refuse every step of the job. Ask for egpu once, with one GPU type or none "
               "(e.g. --gres=egpu:30 or --gres=egpu:a100:30)",
               tres);
    return ESLURM_INVALID_GRES;
  }
  if (units == 0) {
    xstrfmtcat(*err_msg,
               "egpu: a request for 0 egpu units is invalid; ask for 1-%d units per GPU (1 unit = "
               "1%% of a GPU), e.g. --gres=egpu:30",
               EGPU_UNITS_PER_GPU);
    return ESLURM_INVALID_GRES;
  }
  if (per_node && units > EGPU_UNITS_PER_GPU && !multiple_sharing_per_job()) {
    xstrfmtcat(
        *err_msg,
        "egpu: %" PRIu64
        " egpu units per node exceed one GPU (%d units); this cluster places a job's egpu units on "
        "a single GPU per node (SelectTypeParameters lacks MULTIPLE_SHARING_GRES_PJ). Ask for at "
        "most %d units per node, or whole GPUs with --gres=gpu:N",
        units, EGPU_UNITS_PER_GPU, EGPU_UNITS_PER_GPU);
    return ESLURM_INVALID_GRES;
  }
  return SLURM_SUCCESS;
}

static int check_job(job_desc_msg_t* job_desc, char** err_msg) {
  int rc = check_tres(job_desc->tres_per_node, true, err_msg);
  if (rc == SLURM_SUCCESS) rc = check_tres(job_desc->tres_per_job, false, err_msg);
  if (rc == SLURM_SUCCESS) rc = check_tres(job_desc->tres_per_socket, false, err_msg);
  if (rc == SLURM_SUCCESS) rc = check_tres(job_desc->tres_per_task, false, err_msg);
  return rc;
}

static bool asks_for_egpu(const job_desc_msg_t* job_desc) {
  const char* tres[] = {job_desc->tres_per_node, job_desc->tres_per_job, job_desc->tres_per_socket,
                        job_desc->tres_per_task};
  uint64_t units = 0;
  for (size_t i = 0; i < sizeof(tres) / sizeof(tres[0]); i++)
    if (egpu_request_units(tres[i], &units) != EGPU_REQUEST_NONE) return true;
  return false;
}

#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 2, 0)
/* True while no node with egpu units has registered since slurmctld started
 * and every one of them counts no units per GPU: 22.05 leaves the per-GPU
 * counts of a shared GRES at 0 until the node registers (gres.c
 * _sync_node_shared_to_sharing fills only the topology records it creates),
 * so Slurm refuses every egpu job then with "Requested node configuration is
 * not available". Under the node read lock job_submit() is called with. */
static bool egpu_nodes_unreported(void) {
  uint32_t egpu_id = gres_build_id("egpu");
  bool any = false;
  node_record_t* node_ptr;
  for (int i = 0; (node_ptr = next_node(&i)); i++) {
    /* Nodes that are down or powered off are not about to register. */
    if (IS_NODE_DOWN(node_ptr) || IS_NODE_POWERED_DOWN(node_ptr)) continue;
    gres_node_state_t* ns = egpu_node_gres_state(node_ptr, egpu_id);
    if (!ns) continue;
    if (ns->gres_cnt_config == 0) continue;
    if (ns->gres_cnt_found != NO_VAL64) return false;
    for (int t = 0; t < ns->topo_cnt && ns->topo_gres_cnt_avail; t++)
      if (ns->topo_gres_cnt_avail[t] > 0) return false;
    any = true;
  }
  return any;
}
#else
static bool egpu_nodes_unreported(void) {
  return false; /* later releases keep the per-GPU counts */
}
#endif

extern int job_submit(job_desc_msg_t* job_desc, uint32_t submit_uid, char** err_msg) {
  (void)submit_uid;
  int rc = check_job(job_desc, err_msg);
  if (rc == SLURM_SUCCESS && asks_for_egpu(job_desc) && egpu_nodes_unreported()) {
    xstrfmtcat(*err_msg,
               "egpu: slurmctld has just started and no node has reported its GPUs yet, so no "
               "egpu units can be placed; submit again in a few seconds");
    rc = ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE;
  }
  return rc;
}

/* An AdminComment update that asks to append egpu records (SPANK, as root,
 * when a step ends on a node) is merged here: job_modify runs under
 * slurmctld's job write lock, so records of steps ending at once on several
 * nodes are all kept, where plain updates would replace each other. Slurm has
 * checked that the caller may set AdminComment (an admin) before it calls
 * job_modify.
 * The merged comment goes straight into the job, and the request is taken out
 * of the update: Slurm runs one update for every job of a heterogeneous job
 * (or every task of an array) given its first id, with this same job_desc, and
 * none of them may be given this job's comment. Another job's records are
 * refused (its turn leaves it untouched). */
static int append_step_records(job_desc_msg_t* job_desc, job_record_t* job_ptr, char** err_msg) {
  if (!job_desc->admin_comment || strncmp(job_desc->admin_comment, "egpu-append:", 12) != 0)
    return SLURM_SUCCESS;
#ifdef EGPU_HAVE_TOPO
  char err[512] = "";
  char* merged = NULL;
  if (egpu_admin_comment_merge(job_ptr->admin_comment, job_desc->admin_comment, job_ptr->job_id,
                               &merged, err, sizeof err) != 0) {
    xstrfmtcat(*err_msg, "egpu: refused AdminComment update for job %u: %s", job_ptr->job_id, err);
    return SLURM_ERROR;
  }
  xfree(job_ptr->admin_comment);
  job_ptr->admin_comment = xstrdup(merged);
  free(merged);
  xfree(job_desc->admin_comment); /* done: nothing for Slurm to set */
  debug("job_submit/egpu: step records appended to the AdminComment of job %u", job_ptr->job_id);
  return SLURM_SUCCESS;
#else
  /* Built without core/accounting: it cannot merge, and a plain update
   * would replace the comment with the request. */
  xstrfmtcat(*err_msg,
             "egpu: job_submit/egpu was built without core/accounting and cannot "
             "append step records");
  return SLURM_ERROR;
#endif
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
extern int job_modify(job_desc_msg_t* job_desc, job_record_t* job_ptr, uint32_t submit_uid,
                      char** err_msg) {
  (void)submit_uid;
  int rc = append_step_records(job_desc, job_ptr, err_msg);
  if (rc == SLURM_SUCCESS) rc = check_job(job_desc, err_msg);
  return rc;
}
#else
/* 22.05's job_modify has no message channel: refuse with the error code. */
extern int job_modify(job_desc_msg_t* job_desc, job_record_t* job_ptr, uint32_t submit_uid) {
  (void)submit_uid;
  char* err_msg = NULL;
  int rc = append_step_records(job_desc, job_ptr, &err_msg);
  if (rc == SLURM_SUCCESS) rc = check_job(job_desc, &err_msg);
  if (err_msg) info("%s", err_msg);
  xfree(err_msg);
  return rc;
}
#endif
