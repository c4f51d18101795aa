/* What gres/egpu knows about its node: the GPU device list Slurm uses for env
 * and cgroups, the env flags of the gpu records, and per GPU the UUID and
 * memory size from core/topo. Loaded in slurmd (node_config_load) and shipped
 * to each slurmstepd (send_stepd/recv_stepd). */
#ifndef EGPU_GRES_EGPU_NODE_H
#define EGPU_GRES_EGPU_NODE_H

#include "egpu_slurm.h"

/* Device list (gres_device_t) of the egpu records, one per GPU. */
extern egpu_list_t egpu_node_gres_devices;
/* GRES_CONF_ENV_* flags wanted by the node's gpu records. */
extern uint32_t egpu_node_env_flags;

/* node_config_load: fills Cores=/Links= of gpu records from core/topo where
 * gres.conf has none, sets the egpu count to 100 per GPU and splits it over
 * the GPUs. Returns a Slurm error code. */
int egpu_node_config_load(egpu_list_t gres_conf_list, node_config_load_t* config);

/* Per GPU, by device number (N of /dev/nvidiaN, which is the topology's PCI
 * order): UUID (NULL when unknown) and memory in bytes (0 when unknown). */
const char* egpu_node_gpu_uuid(int dev_num);
uint64_t egpu_node_gpu_memory(int dev_num);
/* Slurm node name of this slurmd (NULL when unknown). */
const char* egpu_node_name(void);

void egpu_node_pack(buf_t* buffer);
int egpu_node_unpack(buf_t* buffer);
void egpu_node_fini(void);

#endif
