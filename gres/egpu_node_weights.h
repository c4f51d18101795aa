/* job_submit/egpu's packed node weights (PackNodes=yes in egpu.conf): a
 * thread in slurmctld that keeps node weights following free egpu units. */
#ifndef EGPU_GRES_EGPU_NODE_WEIGHTS_H
#define EGPU_GRES_EGPU_NODE_WEIGHTS_H

#include "egpu_slurm.h"

/* Starts the thread (slurmctld only; idempotent). It reads the controller's
 * egpu.conf once a second and acts only while PackNodes=yes. */
void egpu_node_weights_start(void);

/* Ends it (the plugin's fini). */
void egpu_node_weights_stop(void);

/* The node's egpu GRES state (egpu_id: gres_build_id("egpu")), or NULL.
 * Under the caller's node lock. */
gres_node_state_t* egpu_node_gres_state(node_record_t* node_ptr, uint32_t egpu_id);

#endif
