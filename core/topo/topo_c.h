/* C interface to core/topo for Slurm glue written in C (gres/). The C++ API is
 * core/topo/topology.h; this header only wraps it. No function throws: errors
 * come back as a non-zero return and a message in err. */
#ifndef EGPU_CORE_TOPO_TOPO_C_H
#define EGPU_CORE_TOPO_TOPO_C_H

/* C header in C pointer style; clang-format is set up for the C++ files. */
/* clang-format off */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct egpu_topo egpu_topo_t;

/* Loads the topology from an hwloc XML file, or from the live system (plus
 * NVLink from NVML when libnvidia-ml.so.1 is present) when xml_path is NULL or
 * empty. Returns 0 and *out on success; else -1 and a message in err. */
int egpu_topo_load(const char *xml_path, egpu_topo_t **out, char *err, size_t errlen);
void egpu_topo_free(egpu_topo_t *topo);

/* Number of GPUs, in the order the node exposes them (PCI bus order, which is
 * NVML's order and /dev/nvidiaN's). */
int egpu_topo_gpu_count(const egpu_topo_t *topo);

/* Per GPU i (0-based). Strings live as long as topo. */
const char *egpu_topo_gpu_pci_bus_id(const egpu_topo_t *topo, int i);
const char *egpu_topo_gpu_uuid(const egpu_topo_t *topo, int i);
const char *egpu_topo_gpu_model(const egpu_topo_t *topo, int i);
uint64_t egpu_topo_gpu_memory_bytes(const egpu_topo_t *topo, int i);
/* gres.conf Cores= value (a CPU core list such as "0-47" or "0-7,16-23"), "" when unknown. */
const char *egpu_topo_gpu_cores(const egpu_topo_t *topo, int i);
/* gres.conf Links= value: link count to every GPU, -1 for itself, e.g. "-1,2,1,0". */
const char *egpu_topo_gpu_links(const egpu_topo_t *topo, int i);

/* Additions to the contract above. */

/* Receives core/topo's log lines (NVML absent, NVML errors); no newline. */
typedef void (*egpu_topo_log_fn)(const char *line, void *ctx);

/* egpu_topo_load with log lines sent to log(line, log_ctx) instead of stderr
 * (log may be NULL: stderr). */
int egpu_topo_load_ex(const char *xml_path, egpu_topo_log_fn log, void *log_ctx,
                      egpu_topo_t **out, char *err, size_t errlen);

/* Cores= widened to the whole sockets the GPU's cores are on: what Slurm
 * accepts without SlurmdParameters=numa_node_as_socket. "" when unknown. */
const char *egpu_topo_gpu_socket_cores(const egpu_topo_t *topo, int i);

#ifdef __cplusplus
}
#endif
#endif
