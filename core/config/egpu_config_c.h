/* C interface to core/config for Slurm glue written in C (gres/): egpu.conf
 * read by the node agent's own parser (egpu_config.h), so that quoting,
 * comments, key case and errors mean the same to the plugin as to the agent,
 * and a file the agent refuses is refused here with the same message. No
 * function throws: errors come back as -1 and a message in err. */
#ifndef EGPU_CORE_CONFIG_EGPU_CONFIG_C_H
#define EGPU_CORE_CONFIG_EGPU_CONFIG_C_H

/* C header in C pointer style; clang-format is set up for the C++ files. */
/* clang-format off */
#include <stddef.h>

#include "core/env/egpu_env_names.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct egpu_conf egpu_conf_t;

/* The egpu.conf to read: $EGPU_CONF when set and non-empty, else
 * EGPU_CONF_DEFAULT_PATH. The string is the environment's or a constant. */
const char *egpu_conf_path(void);

/* egpu_conf_load flags. */
/* A path that does not exist gives the built-in defaults instead of an error,
 * as the agent treats its default file. */
#define EGPU_CONF_MISSING_IS_DEFAULTS 1u

/* Reads and checks the egpu.conf at path. Returns 0 and *out (release it with
 * egpu_conf_free); else -1, *out NULL and a message in err that names the
 * file, and the line where the text is at fault ("/etc/egpu/egpu.conf:3:
 * unknown key 'Foo' ..."). Unknown flags are an error. */
int egpu_conf_load(const char *path, unsigned flags, egpu_conf_t **out, char *err,
                   size_t errlen);

/* The same for configuration text; source names it in messages. */
int egpu_conf_parse(const char *text, const char *source, egpu_conf_t **out, char *err,
                    size_t errlen);

void egpu_conf_free(egpu_conf_t *conf);

/* TopologyXml=: an hwloc XML to read instead of the live machine; "" when not
 * set. The string lives as long as conf. */
const char *egpu_conf_topology_xml(const egpu_conf_t *conf);

/* PackNodes=: 1 when slurmctld should keep node weights packed, else 0. */
int egpu_conf_pack_nodes(const egpu_conf_t *conf);

#ifdef __cplusplus
}
#endif
#endif
