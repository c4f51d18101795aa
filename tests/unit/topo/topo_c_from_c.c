/* Uses topo_c.h from C, as the Slurm GRES plugin does: proves the header is C
 * and the library links into a C caller. Called from topo_c_test.cpp. */
/* clang-format off */
#include <stdio.h>

#include "core/topo/topo_c.h"

int topo_c_describe_first_gpu(const char *xml_path, char *out, size_t outlen) {
  char err[256];
  egpu_topo_t *topo = NULL;
  if (egpu_topo_load(xml_path, &topo, err, sizeof err) != 0) {
    snprintf(out, outlen, "error: %s", err);
    return -1;
  }
  snprintf(out, outlen, "%d %s Cores=%s Links=%s", egpu_topo_gpu_count(topo),
           egpu_topo_gpu_pci_bus_id(topo, 0), egpu_topo_gpu_cores(topo, 0),
           egpu_topo_gpu_links(topo, 0));
  egpu_topo_free(topo);
  return 0;
}
